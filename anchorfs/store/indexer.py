"""Build the store's vector index in a process of its own (`Store.maybe_index`).

Started detached by the write that took the table past `store.index_rows`, so that write does
not wait and a CLI call that exits at once does not cut the build short. One builder at a
time per workspace (`.anchorfs/index.lock`, an advisory lock); a build that fails leaves the
table as it was (flat search, same answers), and the next write past the threshold tries again.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

__all__ = ["main"]


class _Named:
    """The embedder as the table names it: all the store needs to open and index it."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim


def main(argv: list[str] | None = None) -> int:
    """`STATE ROOT [--text]`: build the vector index if there is none (not with `--text`),
    then fold unindexed rows into the indices (`Store.settle`'s background half); after
    letting the lock go, look again, so a write that found the lock held is not missed."""
    args = sys.argv[1:] if argv is None else argv
    state, root, text_only = Path(args[0]), args[1], "--text" in args[2:]
    from ..core.statefs import open_state
    from .table import Store

    code = 0
    for _ in range(4):  # bounded: a steady stream of writes leaves the rest to the next write
        try:
            fd = open_state(state / "index.lock", os.O_RDWR | os.O_CREAT)
        except OSError:
            return 1
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return code  # another builder has it
            probe = Store(state, _Named("", 0), root=root)  # type: ignore[arg-type]
            table = probe._connect().open_table("memories")
            meta = table.schema.metadata or {}
            name = meta.get(b"anchorfs.embedder", b"").decode()
            dim = int(meta.get(b"anchorfs.dim", b"0").decode() or 0)
            store = Store(state, _Named(name, dim), root=root)  # type: ignore[arg-type]
            if not text_only and store.vector_index() is None:
                code = 0 if store.build_index() else 1
            if store.text_unindexed():
                store.maybe_compact(force=True)
        except Exception:  # noqa: BLE001 - a detached helper: nobody reads a traceback; the table is as it was
            return 1
        finally:
            os.close(fd)
        if not store.text_unindexed():
            return code
    return code


if __name__ == "__main__":
    raise SystemExit(main())
