"""anchorfs.anchor."""
