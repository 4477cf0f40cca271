"""Issue 40: near-duplicates and contradictions named at write time and across the store, never
retired by themselves; a leaked text purged from the ledger, the store and a merged branch."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from conftest import git

import anchorfs
from anchorfs.agents.digest import digest
from anchorfs.agents.mcp import build_server
from anchorfs.core.errors import AnchorfsError
from anchorfs.ledger.log import REDACTED, Entry, fold, redact_lines
from anchorfs.sdk import team
from anchorfs.sdk.tidy import Claim, compare

AUTH = "class Token:\n    def issue(self, user):\n        return sign(user, hours=24)\n\n    def check(self, token):\n        return verify(token, retries=3)\n"
ON = ["src/auth.py#Token.issue"]


@pytest.fixture
def ws(git_repo: Path) -> anchorfs.Workspace:
    (git_repo / "src").mkdir()
    (git_repo / "src" / "auth.py").write_text(AUTH)
    (git_repo / "README.md").write_text("hello\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "c")
    anchorfs.init(git_repo)
    return anchorfs.open(git_repo)


@pytest.mark.parametrize(("a", "b", "kind", "why"), [
    ("Token expiry is 24h", "Tokens expire after 7 days", "conflicts", "24h vs 7 days"),
    ("The request timeout is 30 seconds", "The request timeout is 30 minutes", "conflicts", "30 seconds vs 30 minutes"),
    ("Auth uses JWTs for sessions", "Auth no longer uses JWTs for sessions", "conflicts", "one says it, one denies it"),
    ("Passwords are hashed with bcrypt", "Passwords are hashed with argon2", "conflicts", "bcrypt vs argon2"),
    ("CI pins httpx 3.2.2 for the proxy tests", "CI pins httpx 3.2.3 for the proxy tests", "conflicts", "3.2.2 vs 3.2.3"),
    ("Python 3.11 is the minimum", "Python 3.12 is the minimum", "conflicts", "3.11 vs 3.12"),
    ("The refresh cookie is SameSite=Strict.", "_set_refresh_cookie sets SameSite=Lax so links from email work",
     "conflicts", "samesite=strict vs samesite=lax"),  # one setting given two values, however the rest is worded
    ("price_for_seats quotes monthly unless annual=True is passed", "price_for_seats bills annually; pass annual=False",
     "conflicts", "annual=true vs annual=false"),
    ("Token expiry is 24h", "token expiry is 24 hours", "similar", "of their terms shared"),
    ("Fact 12: the cache code of app.py is load-bearing", "Fact 13: the cache code of app.py is load-bearing",
     "similar", "100% of their terms"),  # a label's number is no value
])
def test_compare_names_the_kind_and_why(a: str, b: str, kind: str, why: str) -> None:
    found = compare(a, b)
    assert found is not None and found[0] == kind and why in found[1]


@pytest.mark.parametrize(("a", "b"), [
    ("Token.check retries 3 times before it gives up", "Token.check times out after 30 seconds"),  # two facts
    ("The request timeout is 60 seconds", "The request timeout is one minute, the same as upstream"),  # refined
    ("Access tokens expire after 24 hours", "Access tokens expire after 24 hours; refresh tokens after 30 days"),
    ("Token.issue signs with the newest key", "Token.issue logs every issued token at debug level"),
    ("The client uses timeout=5 for connects", "The client sets PYTHONPATH=src for its tests"),  # two settings
])
def test_compare_leaves_different_facts_and_refinements_alone(a: str, b: str) -> None:
    assert compare(a, b) is None


def test_a_setting_is_a_name_given_a_value_not_a_comparison() -> None:
    assert Claim.of("x == 3, y >= 2, z != 1 and a <= 0").settings == {}
    assert Claim.of("Stripe runs with max_network_retries=2.").settings == {"max_network_retries": {"2"}}
    assert Claim.of("cookie.SameSite = 'Lax' and PYTHONPATH=src").settings == {"samesite": {"lax"}, "pythonpath": {"src"}}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789.,_ -:/#`abcdefhmsxyzNOT%='\"")), max_size=40), st.text(max_size=40))
def test_any_two_texts_compare_without_an_error(a: str, b: str) -> None:
    for x, y in ((a, b), (a + " 1.2.3.4 1,5 0.5 2_000", b), (b, a)):  # numbers, versions, odd separators
        found = compare(x, y)
        assert found is None or found[0] in ("similar", "conflicts")


def test_the_second_write_names_the_conflict_in_sdk_cli_and_mcp(ws: anchorfs.Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    first = ws.record("token expiry is 24h", anchors=ON)
    assert first.candidates == ()
    second = ws.record("tokens expire after 7 days", anchors=ON)
    assert [(c.kind, c.id) for c in second.candidates] == [("conflicts", first.id)]
    assert second.candidates[0].why == "same anchor src/auth.py#Token.issue; 24h vs 7 days"
    assert "tidy --keep" in second.candidates[0].settle and "retract" in second.candidates[0].settle
    assert ws.get(first.id).status == ws.get(second.id).status == "active"  # nothing retired by itself
    assert ws.open_conflicts() == [tuple(sorted((first.id, second.id)))]
    # an unrelated fact on the same anchor, and a memory elsewhere: no candidate
    assert ws.record("Token.issue signs with the newest key", anchors=ON).candidates == ()
    assert ws.record("the readme greets the reader", anchors=["README.md"]).candidates == ()

    from anchorfs.cli.commands import main
    with pytest.raises(SystemExit):
        main(["--root", str(ws.root), "record", "tokens expire after 30 days", "--anchor", ON[0]])
    out = capsys.readouterr().out
    short = ws.short_ids([first.id])[first.id]
    assert f"conflicts with {short}: same anchor src/auth.py#Token.issue; 24h vs 30 days" in out
    with pytest.raises(SystemExit):
        main(["--root", str(ws.root), "--json", "record", "tokens expire after 90 days", "--anchor", ON[0]])
    got = json.loads(capsys.readouterr().out)
    assert {c["id"] for c in got["conflicts"]} >= {first.id, second.id} and "similar" not in got

    async def remember() -> dict:
        async with Client(build_server(ws.root)) as client:
            result = await client.call_tool("remember", {"content": "token expiry is 12h", "anchors": ON})
            assert not result.is_error
            return result.structured_content  # type: ignore[return-value]

    data = asyncio.run(remember())
    assert first.id in {c["id"] for c in data["conflicts"]}
    assert all("supersede" in c["settle"] and "retract" in c["settle"] for c in data["conflicts"])


def test_two_symbols_of_one_file_are_two_subjects(ws: anchorfs.Workspace) -> None:
    """On one file but different symbols, a name swapped, or an opposite inside names, is two
    memories about two symbols (the budgets' templated memories stored thousands of such 'conflicts')."""
    ws.record("the Token.issue code is load-bearing", anchors=["src/auth.py#Token.issue"])
    assert ws.record("the Token.check code is load-bearing", anchors=["src/auth.py#Token.check"]).candidates == ()
    ws.record("Token.issue calls sign with retries=1", anchors=["src/auth.py#Token.issue"])
    assert ws.record("Token.check calls verify with retries=3", anchors=["src/auth.py#Token.check"]).candidates == ()
    assert ws.open_conflicts() == []


def test_supersede_names_what_its_successor_contradicts_but_not_its_predecessor(ws: anchorfs.Workspace) -> None:
    old = ws.record("token expiry is 24h", anchors=ON)
    other = ws.record("Token.issue signs tokens valid for 12 hours", anchors=ON)
    assert [c.id for c in other.candidates] == [old.id]
    new = ws.supersede(old.id, "token expiry is 48h")
    assert [c.id for c in new.candidates] == [other.id]  # not its predecessor, which it retires
    assert ws.open_conflicts() == [tuple(sorted((other.id, new.id)))]  # old's conflict closed with it


def test_tidy_merges_near_duplicates_only_and_keep_settles_a_conflict(ws: anchorfs.Workspace) -> None:
    a = ws.record("token expiry is 24h", anchors=ON, tags=["auth"])
    b = ws.record("Token expiry is 24 hours", anchors=ON, tags=["tokens"])
    c = ws.record("tokens expire after 7 days", anchors=ON)
    report = ws.tidy()
    assert [cl.ids for cl in report.similar] == [[a.id, b.id]]
    assert {tuple(cl.ids) for cl in report.conflicts} == {(a.id, c.id), (b.id, c.id)}
    done = ws.tidy(apply=True)
    assert done.merged == [a.id]
    assert ws.get(a.id).status == "superseded" and ws.get(a.id).superseded_by == b.id
    assert ws.get(b.id).tags == ("tokens", "auth") and ws.get(c.id).status == "active"  # a conflict waits
    assert "tidy" in {e.op for e in ws.ledger_entries()}
    with pytest.raises(AnchorfsError, match="keep or apply"):
        ws.tidy(apply=True, keep=c.id)
    assert ws.tidy(keep=c.id).merged == [b.id]
    assert ws.get(b.id).superseded_by == c.id and ws.tidy().conflicts == []
    assert ws.open_conflicts() == []
    # undoing a merge brings the memory back and leaves the survivor standing
    ws.revert(a.id)
    assert ws.get(a.id).status == "active" and ws.get(b.id).status == "superseded" and ws.get(c.id).status == "active"


def test_the_session_digest_and_check_drift_count_open_conflicts(ws: anchorfs.Workspace) -> None:
    a = ws.record("token expiry is 24h", anchors=ON)
    b = ws.record("tokens expire after 7 days", anchors=ON)
    text = digest(anchorfs.open(ws.root))
    assert "1 open conflict " in text and "anchorfs tidy" in text

    async def check() -> dict:
        async with Client(build_server(ws.root)) as client:
            return (await client.call_tool("check_drift", {})).structured_content  # type: ignore[return-value]

    assert asyncio.run(check())["conflicts"] == 1
    ws.retract(b.id)
    assert "open conflict" not in digest(anchorfs.open(ws.root))


def test_tidy_finds_the_conflict_among_10000_memories(ws: anchorfs.Workspace) -> None:
    files = [f"src/m{i}.py" for i in range(400)]
    for f in files:
        (ws.root / f).write_text(f"def f{f[5:-3]}():\n    return {f[5:-3]}\n")
    words = "cache retry token invoice email webhook ledger export import session".split()
    items = [{"content": f"the {words[i % 10]} code is load-bearing for {words[i // 10 % 10]}s, say the notes of week {i}"}
             for i in range(9_000)]
    items += [{"content": f"the {words[i % 10]} code of {files[i % 400]} is load-bearing for {words[i // 10 % 10]}s "
                          f"and {words[i // 400]}s",
               "anchors": [files[i % 400]]} for i in range(1_000)]
    ws.record_many(items)
    a = ws.record("token expiry is 24h", anchors=ON)
    b = anchorfs.open(ws.root).record("tokens expire after 7 days", anchors=ON)
    assert [c.id for c in b.candidates] == [a.id]
    report = anchorfs.open(ws.root).tidy()
    assert report.checked == 10_002
    assert (a.id, b.id) in {tuple(cl.ids) for cl in report.conflicts}


# -- redact ------------------------------------------------------------------------------------

SECRET = "hunter2-deploy-key-SECRET"


def _grep(state: Path, text: str) -> list[str]:
    return [str(p) for p in state.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_redact_purges_the_text_from_every_file_and_keeps_that_it_was_there(ws: anchorfs.Workspace) -> None:
    m = ws.record(f"the deploy key is {SECRET}", anchors=ON)
    keep = ws.record("token expiry is 24h", anchors=ON)
    ws.query("deploy key")  # the store and its full-text index hold the text now
    (ws.root / "src" / "auth.py").write_text(AUTH.replace("hours=24", "hours=12"))
    from anchorfs.agents.watch import record_transitions
    record_transitions(ws, ["src/auth.py"], source="post-edit")  # events.jsonl names it, with its text
    assert SECRET.encode() in (ws.state / "events.jsonl").read_bytes()
    ws.supersede(m.id, "the deploy key lives in the vault")
    assert _grep(ws.state, SECRET)
    before = [line for line in (ws.state / "ledger.jsonl").read_bytes().splitlines() if m.id.encode() not in line]
    gone = ws.redact(m.id, reason="a leaked secret")
    assert _grep(ws.state, SECRET) == []
    assert gone.content == REDACTED and "a leaked secret" in (gone.reason or "")
    import hashlib
    assert hashlib.sha256(f"the deploy key is {SECRET}".encode()).hexdigest() in (gone.reason or "")
    after = (ws.state / "ledger.jsonl").read_bytes().splitlines()
    assert [line for line in after if m.id.encode() not in line] == before  # every other line byte for byte
    again = anchorfs.open(ws.root)
    assert again.get(m.id).content == REDACTED and again.get(keep.id).content == "token expiry is 24h"
    assert [e.op for e in again.history(m.id)][-1] == "redact"
    assert all(SECRET not in h.memory.content for h in again.query("deploy key", include_superseded=True))
    with pytest.raises(AnchorfsError, match="already redacted"):
        again.redact(m.id, reason="twice")
    with pytest.raises(AnchorfsError, match="reason"):
        again.redact(keep.id, reason=" ")


def test_redact_lines_and_the_fold_keep_a_merged_branchs_copy_out_in_any_order(ws: anchorfs.Workspace) -> None:
    m = ws.record(f"the deploy key is {SECRET}", anchors=ON)
    old_lines = (ws.state / "ledger.jsonl").read_bytes().splitlines()
    ws.redact(m.id, reason="leak", anchors=True)
    redacted = (ws.state / "ledger.jsonl").read_bytes().splitlines()
    for lines in ([*old_lines, *redacted], [*redacted, *old_lines], [*redacted[::-1], *old_lines]):
        state = fold(Entry.from_dict(json.loads(line)) for line in lines)
        assert state[m.id].content == REDACTED and state[m.id].anchors == ()
        assert all(SECRET.encode() not in line for line in redact_lines(lines))


def test_a_merge_with_a_branch_that_still_holds_the_text_keeps_it_redacted(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(a))
    (a / "app.py").write_text("def handler():\n    return 8080\n")
    anchorfs.init(a)
    team.set_mode(a, True)
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "shared")
    leak = anchorfs.open(a).record(f"the key is {SECRET}", anchors=["app.py#handler"], allow_secret=True)
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "leak")
    git(a, "push", "-q", "origin", "HEAD:main")
    git(tmp_path, "clone", "-q", str(remote), str(b))
    anchorfs.init(b)
    team.install_merge(b)
    anchorfs.open(b).record("bob's note", anchors=["app.py"])  # bob's branch still holds the text
    git(b, "add", "-A")
    git(b, "commit", "-q", "-m", "bob")
    anchorfs.open(a).redact(leak.id, reason="leaked key")
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "redact")
    git(a, "push", "-q", "origin", "HEAD:main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")  # anchorfs's merge driver
    assert SECRET not in (b / ".anchorfs" / "ledger.jsonl").read_text()
    wsb = anchorfs.open(b)
    assert wsb.get(leak.id).content == REDACTED and wsb.query("key", include_superseded=True) is not None
    assert _grep(b / ".anchorfs", SECRET) == []


def test_a_store_that_never_held_the_text_is_not_rebuilt_for_an_old_redact(ws: anchorfs.Workspace,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Catch-up rebuilds the store only when a redacted text was in it, not on every rewrite of a
    ledger that once saw a redact (a rebuild embeds every memory again)."""
    from anchorfs.sdk import storesync

    m = ws.record(f"the key is {SECRET}", anchors=ON)
    ws.record("token expiry is 24h", anchors=ON)
    ws.query("key")
    ws.redact(m.id, reason="leak")
    rebuilt: list[int] = []
    real = storesync._rebuild
    monkeypatch.setattr(storesync, "_rebuild", lambda w, progress=None: rebuilt.append(1) or real(w, progress))
    ledger = ws.state / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join([lines[1], lines[0], *lines[2:]]))  # a rebase's order: the fold is the same
    assert anchorfs.open(ws.root).query("token expiry")[0].memory.content == "token expiry is 24h"
    assert rebuilt == []
    assert _grep(ws.state, SECRET) == []
