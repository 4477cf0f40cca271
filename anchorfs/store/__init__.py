"""store: the searchable index (LanceDB), ranking and the pluggable embedders."""
