"""store: the searchable index, derived from the ledger. The LanceDB table (`table.Store`),
hybrid search and calibrated relevance (`search`, `ranking`, `lexicon`), pluggable embedders
loaded only when used (`embedders`), the background index build (`indexer`). Imports `core`,
`anchor` and `ledger`; LanceDB itself is imported only when a table is opened.

Public names: `table.Store`, `embedders.Embedder`, `embedders.get_embedder`,
`embedders.available_embedders`.
"""
