"""The fold snapshot's plan is read without orjson (`snapplan`: its header, plan line and the
records it names, by the C scanner the standard `json` parses with): orjson's import pulls
`dataclasses`, `uuid` and `json` (93M instructions, 2.4x `python -c pass`), and an edit's or a
commit's hook reads the plan alone. The same memories as the full fold gives."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anchorfs
from anchorfs import catchup, foldsnap
from anchorfs.ledger import Ledger

_PROBE = ("import sys\n"
          "from pathlib import Path\n"
          "from anchorfs.ledger import Ledger\n"
          "from anchorfs.snapindex import on_paths\n"
          "got = on_paths(Ledger(Path(sys.argv[1])), ['src/a.py'])\n"
          "print(sorted(m.content for m in got) if got is not None else None)\n"
          "print('orjson' in sys.modules)\n")


def test_the_plan_and_its_records_read_without_orjson(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("def f():\n    return 1\n")
    (root / "src" / "b.py").write_text("x = 1\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record_many([{"content": "on a, caf\u00e9 \"quoted\"", "anchors": ["src/a.py#f"]},
                        {"content": "on b", "anchors": ["src/b.py"]}, {"content": "also on a", "anchors": ["src/a.py"]}])
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    ledger = Ledger(root / ".anchorfs")
    assert foldsnap.save(ledger, foldsnap.current(ledger, write=False))
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(root / ".anchorfs")], capture_output=True, text=True,
                          timeout=60, check=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert proc.stdout.splitlines() == [repr(["also on a", "on a, caf\u00e9 \"quoted\""]), "False"]
