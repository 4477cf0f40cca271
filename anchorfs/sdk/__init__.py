"""sdk: `anchorfs.open(root) -> Workspace` and the doors every user comes through."""
