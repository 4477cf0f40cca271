"""What the fast paths leave out, and that nothing is lost by leaving it out (issue 19).

- A one-shot `record` (a process that never opened the store) appends the ledger and stops:
  it never imports LanceDB, and the next read, in any process, finds the memory.
- LanceDB is loaded without its REST namespace client's `__init__`, and that package is still
  whole the moment anything asks for it.
- Past `store.index_rows` rows the store has a vector index, and queries use it.

Behaviour only, never timings (those are in scripts/bench_process.py and bench_store.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import anchorfs
from anchorfs.ledger.catchup import load


def run_py(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("def handler(event):\n    return event['body']\n")
    anchorfs.init(root)
    return root


RECORD_CHILD = """
    import sys
    from anchorfs.cli.commands import main
    try:
        main(["--root", sys.argv[1], "--json", "record", sys.argv[2], "--anchor", "app.py#handler"])
    except SystemExit as exc:
        assert not exc.code, exc.code
    mods = sys.modules
    print("LOADED", sorted(m for m in ("lancedb", "pyarrow", "lance", "numpy") if m in mods), file=sys.stderr)
"""


def test_a_one_shot_record_never_loads_lancedb_and_the_next_query_finds_it(root: Path) -> None:
    with anchorfs.open(root) as ws:  # a store that exists and holds something already
        first = ws.record("the handler returns the body", anchors=["app.py#handler"])
        assert [h.memory.id for h in ws.query("handler body", k=1)] == [first.id]
    before = load(root / ".anchorfs" / "applied")
    proc = run_py(RECORD_CHILD, str(root), "webhooks are retried three times by the handler")
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stderr  # not LanceDB, not even numpy or pyarrow
    written = json.loads(proc.stdout)
    after = load(root / ".anchorfs" / "applied")
    assert before is not None and after is not None and after.offset == before.offset  # the store was left alone
    proc = run_py("""
        import sys, anchorfs
        with anchorfs.open(sys.argv[1]) as ws:
            print(" ".join(h.memory.id for h in ws.query("how often are webhooks retried", k=2)))
    """, str(root))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == written["id"]
    with anchorfs.open(root) as ws:  # and the store holds every memory exactly once
        assert sorted(ws.store.docs()) == sorted([first.id, written["id"]])


def test_one_shot_records_in_a_row_are_all_found(root: Path) -> None:
    ids = []
    for i, text in enumerate(("the cache lives in redis", "invoices are sent on the first of the month",
                              "deploys run from CI only")):
        proc = run_py(RECORD_CHILD, str(root), text)
        assert proc.returncode == 0, proc.stderr
        # the first write of all creates the store (with the embedder chosen then); no later one loads it
        assert ("LOADED []" in proc.stderr) == (i > 0), proc.stderr
        ids.append(json.loads(proc.stdout)["id"])
    with anchorfs.open(root) as ws:
        assert [h.memory.id for h in ws.query("when are invoices sent", k=1)] == [ids[1]]
        assert sorted(ws.store.docs()) == sorted(ids)


def test_a_process_that_opened_the_store_writes_through(root: Path) -> None:
    with anchorfs.open(root) as ws:
        ws.query("anything")  # the store is open in this process (an MCP server, watch, the SDK)
        m = ws.record("the handler is the only entry point", anchors=["app.py#handler"])
        applied = load(root / ".anchorfs" / "applied")
        assert applied is not None and applied.offset == (root / ".anchorfs" / "ledger.jsonl").stat().st_size
        assert m.id in ws.store.docs()


def test_lancedb_loads_without_the_namespace_client_init_which_stays_whole() -> None:
    proc = run_py("""
        import sys
        from anchorfs.store.table import DEFERRED, defer_namespace_client
        assert defer_namespace_client()
        assert not defer_namespace_client()  # once
        import lancedb
        print("API", f"{DEFERRED}.api" in sys.modules, f"{DEFERRED}.api.table_api" in sys.modules)
        import overrides
        from anchorfs.store.table import import_lancedb
        assert import_lancedb() is lancedb
        assert overrides.override.__module__ == "overrides.overrides"  # the real decorator, as it was
        import lance_namespace_urllib3_client as client
        from lance_namespace_urllib3_client.api.table_api import TableApi
        print("WHOLE", client.TableApi is TableApi, client.ApiClient.__name__, client.__version__)
        try:
            client.no_such_name
        except AttributeError as exc:
            print("MISSING", exc)
    """)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["API"] == "False False"  # deferred through `import lancedb`
    assert lines["WHOLE"].startswith("True ApiClient ")  # and complete at its first use
    assert "no_such_name" in lines["MISSING"]


def test_a_query_process_never_runs_the_namespace_client_init(root: Path) -> None:
    with anchorfs.open(root) as ws:
        m = ws.record("the handler returns the body", anchors=["app.py#handler"])
    proc = run_py("""
        import sys, anchorfs
        with anchorfs.open(sys.argv[1]) as ws:
            hits = ws.query("handler body", k=1)
        print(hits[0].memory.id, "lancedb" in sys.modules, "lance_namespace_urllib3_client.api" in sys.modules)
    """, str(root))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [m.id, "True", "False"]


def test_lancedb_loaded_with_override_checks_skipped_still_enforces_nothing_else() -> None:
    proc = run_py("""
        import overrides
        real = overrides.override
        from anchorfs.store.table import import_lancedb
        lancedb = import_lancedb()
        from lancedb.db import LanceDBConnection as C
        print(overrides.override is real, C.serialize.__override__, C.list_namespaces.__override__)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "True"]  # marked as the real one marks; restored after


# -- the vector index past `store.index_rows` ---------------------------------------------------

WORDS = ("token expiry auth session cache invoice billing user account retry queue worker migration "
         "schema index config deploy region timeout limit header cookie jwt refresh payment webhook").split()


def many(n: int, seed: int = 3) -> list[dict[str, object]]:
    import random

    rng = random.Random(seed)
    return [{"content": f"{' '.join(rng.sample(WORDS, 6))} item{i}"} for i in range(n)]


QUERIES = ["token expiry session", "invoice billing retry", "webhook payment queue", "schema migration deploy"]


def test_reindex_past_the_threshold_builds_an_index_that_queries_use(root: Path) -> None:
    with anchorfs.open(root) as ws:
        ws.record_many(many(700))
        flat = {q: [h.memory.id for h in ws.query(q, k=10)] for q in QUERIES}
        assert ws.store.vector_index() is None  # 700 rows < 50,000: an exact scan
    (root / ".anchorfs.toml").write_text("[store]\nindex_rows = 600\n")
    with anchorfs.open(root) as ws:
        assert ws.reindex() == 700
        store = ws.store
        # older versions cleaned up: the rebuilt table, plus the one its index optimization adds
        assert len({v["version"] for v in store.table().list_versions()}) <= 2
        assert store.vector_index() == "IvfPq"
        plan = store.vector_query(store.embedder.embed_query("token expiry"), "status = 'active'").limit(10).explain_plan()
        assert "ANNSubIndex" in plan  # the index answers, not a flat scan
        assert {q: [h.memory.id for h in ws.query(q, k=10)] for q in QUERIES} == flat  # same answers


def test_a_write_past_the_threshold_builds_the_index_in_the_background(root: Path) -> None:
    (root / ".anchorfs.toml").write_text("[store]\nindex_rows = 600\n")
    with anchorfs.open(root) as ws:
        ws.record_many(many(400))
        assert ws.store._index_job is None  # under the threshold: nothing started
        written = ws.record_many(many(300, seed=4))  # crosses it: returns with the build under way
        store = ws.store
        assert store._index_job is not None
        assert [h.memory.id for h in ws.query(str(written[0].content), k=1)] == [written[0].id]  # meanwhile: flat
        assert store.wait_index() == 0
        assert store.vector_index() == "IvfPq"
        assert [h.memory.id for h in ws.query(str(written[0].content), k=1)] == [written[0].id]
        more = ws.record("a memory written after the index: searched too (unindexed rows are scanned)")
        assert [h.memory.id for h in ws.query("written after the index", k=1)] == [more.id]
        assert store._index_job is None  # an index exists: no second build
