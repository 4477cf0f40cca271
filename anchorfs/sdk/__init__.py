"""sdk: `anchorfs.open(root) -> Workspace`, the one door every user comes through. The
`Workspace` (`workspace`) delegates each concern to a module that takes it: the write path
(`writes`, `revision`), the read path (`recall`, `context`), the last known drift
(`writeback`), the store kept to the ledger (`storesync`), shared and private workspaces and
secrets (`team`), agent instruction files (`instructions`). Nothing below this package takes a
`Workspace`.

Public names: `workspace.Workspace`, `workspace.open`, `workspace.init`, `workspace.find_root`.
"""
