"""verify: what a memory's prose claims (paths, symbols, URLs), checked against the workspace."""
