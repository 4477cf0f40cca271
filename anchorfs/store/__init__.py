"""store: the searchable index, derived from the ledger. The LanceDB table and its background
index build (`table.Store`), hybrid search and calibrated relevance (`search`, `ranking`,
`lexicon`), pluggable embedders loaded only when used (`embedders`). LanceDB itself is
imported only when a table is opened.
"""
