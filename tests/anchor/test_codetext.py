"""Anchored code as index vocabulary: what is read, what is skipped, the caps, file names."""

from __future__ import annotations

import os
from pathlib import Path

from anchorfs.anchor import anchors
from anchorfs.anchor import anchors as codetext
from anchorfs.anchor.anchors import anchored_text, code_vocabulary, defined_names, name_keys
from anchorfs.core.model import AnchorRef, Memory, new_id

SOURCE = '''"""Billing retries."""

RETRY_SCHEDULE_DAYS = (1, 3, 7)


class DunningPolicy:
    def should_give_up(self, attempts: int) -> bool:
        """Stop after the grace period: the invoice becomes uncollectible."""
        return attempts >= len(RETRY_SCHEDULE_DAYS)


def unrelated_helper() -> None:
    pass
'''


def _mem(*anchors: AnchorRef) -> Memory:
    return Memory(id=new_id(), content="x", anchors=anchors)


def _root(tmp_path: Path) -> str:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "dunning.py").write_text(SOURCE)
    return os.path.realpath(tmp_path)


def test_symbol_and_lines_anchors_give_their_text_only(tmp_path: Path) -> None:
    root = _root(tmp_path)
    text = anchored_text(root, _mem(AnchorRef("src/dunning.py", symbol="DunningPolicy.should_give_up")))
    assert "uncollectible" in text and "unrelated_helper" not in text
    lines = anchored_text(root, _mem(AnchorRef("src/dunning.py", lines=(3, 3))))
    assert lines == "RETRY_SCHEDULE_DAYS = (1, 3, 7)"


def test_whole_file_missing_unsafe_and_unknown_symbol_add_nothing(tmp_path: Path) -> None:
    root = _root(tmp_path)
    assert anchored_text(root, _mem(AnchorRef("src/dunning.py"))) == ""
    assert anchored_text(root, _mem(AnchorRef("src/gone.py", symbol="f"))) == ""
    assert anchored_text(root, _mem(AnchorRef("../outside.py", lines=(1, 1)))) == ""
    assert anchored_text(root, _mem(AnchorRef("src/dunning.py", symbol="Nope"))) == ""


def test_text_is_capped_per_anchor_and_per_memory(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    root = _root(tmp_path)
    (tmp_path / "big.py").write_text("".join(f"value_{i} = {i}\n" for i in range(5000)))
    monkeypatch.setattr(codetext, "MAX_ANCHOR_CHARS", 100)
    monkeypatch.setattr(anchors, "MAX_ANCHOR_CHARS", 100)
    monkeypatch.setattr(codetext, "MAX_MEMORY_CHARS", 150)
    one = anchored_text(root, _mem(AnchorRef("big.py", lines=(1, 4000))))
    assert len(one) == 100
    two = anchored_text(root, _mem(AnchorRef("big.py", lines=(1, 4000)), AnchorRef("big.py", lines=(10, 4000))))
    assert len(two) <= 151  # 100 + newline + the remaining 50


def test_code_vocabulary_drops_keywords_and_repeats() -> None:
    vocab = code_vocabulary("def should_give_up(self, attempts):\n    return attempts >= LIMIT  # grace")
    assert vocab.split() == ["should_give_up", "attempts", "LIMIT", "grace"]


def test_name_keys_and_defined_names(tmp_path: Path) -> None:
    root = _root(tmp_path)
    assert name_keys("DunningState.attempts and should_give_up() in __init__") == {"dunningstate", "shouldgiveup"}
    names = defined_names(root, "src/dunning.py")
    assert {"retryscheduledays", "dunningpolicy", "shouldgiveup", "unrelatedhelper"} <= set(names)
    assert defined_names(root, "src/missing.py") == []
    assert defined_names(root, "../etc/passwd") == []


def test_a_batch_parses_each_anchored_file_once(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`record_many` narrows each anchor when it takes it, and the store write that follows
    indexes the same code: the text is kept by the file's hash, so the write neither parses
    the file again (40 files: 80 parses before, as the symbols' cache of 32 had moved on) nor
    indexes anything else than a fresh read would."""
    import anchorfs
    from anchorfs.anchor import symbols

    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    for f in range(40):
        (root / "src" / f"m{f}.py").write_text(f"def handler_{f}(request):\n    return charge_invoice_{f}(request)\n")
    anchorfs.init(root)
    parsed: list[str] = []
    real = symbols._parse_symbols

    def counting(path: str, source: bytes):  # type: ignore[no-untyped-def]
        parsed.append(path)
        return real(path, source)

    with anchorfs.open(root) as ws:
        ws.record("warm the store up")
        symbols._cached_symbols.cache_clear()
        monkeypatch.setattr(symbols, "_parse_symbols", counting)
        ws.record_many([{"content": f"handler {f} bills", "anchors": [f"src/m{f}.py#handler_{f}"]} for f in range(40)])
        assert sorted(parsed) == sorted(f"src/m{f}.py" for f in range(40))
        monkeypatch.setattr(symbols, "_parse_symbols", real)
        hit = ws.query("charge_invoice_7", k=1)[0]
        assert hit.memory.content == "handler 7 bills"  # the code's words are in the index
    # and the kept text is what a fresh read gives
    m = hit.memory
    codetext._NARROWED.clear()  # kept in anchors, read here
    assert "charge_invoice_7" in anchored_text(os.path.realpath(root), m)
