"""ledger: the append-only record of every write, its fold, and the fold's snapshot."""
