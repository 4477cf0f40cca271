"""sdk: `anchorfs.open(root) -> Workspace`, the one door every user comes through. The `Workspace`
(`workspace`) delegates each concern to a module: writes (`writes`, `revision`), reads (`recall`),
the store kept to the ledger and the last known drift (`storesync`), shared and private workspaces
(`team`), agent instruction files (`instructions`). Nothing below this package takes a `Workspace`.
"""
