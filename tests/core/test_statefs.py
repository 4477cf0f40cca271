"""`statefs.replace_state`, the one writer of state files: whole or nothing, mode and mtime set
on the temp file before the rename, a link refused before anything is written."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from anchorfs.core import statefs
from anchorfs.core.errors import WorkspaceError
from anchorfs.core.statefs import FAULT_ENV


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_replace_state_sets_the_mode_exactly_whatever_the_umask(tmp_path: Path) -> None:
    """Why: a person's rules file keeps its mode across a rewrite, and never shows another one."""
    old = os.umask(0o077)
    try:
        st = statefs.replace_state(tmp_path / "rules.md", b"x", mode=0o664)
        plain = statefs.replace_state(tmp_path / "plain", b"y")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "rules.md").st_mode) == 0o664 == stat.S_IMODE(st.st_mode)
    assert stat.S_IMODE(os.stat(tmp_path / "plain").st_mode) == 0o600 == stat.S_IMODE(plain.st_mode)


def test_replace_state_sets_the_mtime_before_the_rename_and_returns_the_files_stat(tmp_path: Path) -> None:
    """Why: the fold snapshot's trust rule measures from its own moment, not the write's."""
    when = 1_600_000_000_123_456_789
    path = tmp_path / "fold.snap"
    st = statefs.replace_state(path, b"snapshot", fsync=True, mtime_ns=when)
    now = os.lstat(path)
    assert now.st_mtime_ns == when == st.st_mtime_ns
    assert (now.st_ino, now.st_size) == (st.st_ino, st.st_size) == (st.st_ino, 8)
    assert path.read_bytes() == b"snapshot"
    assert _names(tmp_path) == ["fold.snap"]


def test_replace_state_refuses_a_link_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "outside"
    target.write_bytes(b"theirs")
    (tmp_path / "state").symlink_to(target)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        statefs.replace_state(tmp_path / "state", b"ours", mode=0o600, mtime_ns=1)
    assert target.read_bytes() == b"theirs" and os.path.islink(tmp_path / "state")
    assert _names(tmp_path) == ["outside", "state"]


def test_replace_state_failing_mid_write_leaves_the_old_file_and_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "manifest.json"
    statefs.replace_state(path, b"old")
    monkeypatch.setenv(FAULT_ENV, "manifest-write")
    with pytest.raises(OSError) as info:
        statefs.replace_state(path, b"new" * 1000, fault_point="manifest-write", mode=0o600, mtime_ns=5)
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old" and _names(tmp_path) == ["manifest.json"]
