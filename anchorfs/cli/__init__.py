"""cli: the `anchorfs` command (click commands that parse, call one SDK method, format) and the warm server.

Kept free of imports: `anchorfs.__main__` reaches `cli.server` for the warm hand-off before click is imported.
"""
