"""History and drift agree on a moved function (issue 37, item 4): moved unchanged to another
file while its old file stays, into a new file or into one that was already there (the common
refactor: a helper moved into an existing module). `drift`, `bisect`, `log` and `at` give the
same verdict at HEAD, on the cases below and on random histories built by the property test."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git

import anchorfs
from anchorfs.core.model import Drift, Verdict
from anchorfs.sdk.workspace import Workspace

HELPER = "def helper(values, scale):\n    total = sum(v * scale for v in values)\n    return total / max(len(values), 1)\n"
A_PY = f"import os\n\n\ndef keep():\n    return os.getcwd()\n\n\n{HELPER}\n\ndef other():\n    return 2\n"
B_PY = "def existing():\n    return 1\n"


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A", ".")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def verdicts(ws: Workspace, memory_id: str) -> tuple[Verdict, Verdict, Verdict, Verdict | None]:
    """What drift, bisect, at HEAD and the last step of log say of the memory's one anchor."""
    drift = next(c for m in ws.drift().memories if m.memory.id == memory_id for c in m.checks)
    hist = ws.bisect(memory_id).anchors[0]
    at = next(r for r in ws.at("HEAD").results if r.memory.id == memory_id).checks[0]
    steps = ws.log(memory_id).steps
    return drift.verdict, hist.verdict, at.verdict, steps[-1].verdict if steps else None


@pytest.mark.parametrize("target", ["new", "existing", "existing, uncommitted"])
@pytest.mark.parametrize("anchor", ["a.py#helper", "a.py:8-10"])
def test_a_function_moved_unchanged_to_another_file_is_moved_everywhere(
        git_repo: Path, target: str, anchor: str) -> None:
    repo = git_repo
    files = {"a.py": A_PY} if target == "new" else {"a.py": A_PY, "b.py": B_PY}
    commit(repo, "start", files)
    anchorfs.init(repo)
    ws = anchorfs.open(repo)
    memory = ws.record("helper averages scaled values", anchors=[anchor])
    commit(repo, "unrelated", {"c.txt": "x\n"})
    moved = {"a.py": A_PY.replace(HELPER + "\n\n", ""), "b.py": (B_PY + "\n\n" if target != "new" else "") + HELPER}
    if target == "existing, uncommitted":
        for rel, text in moved.items():
            (repo / rel).write_text(text)
    else:
        commit(repo, "move helper into b", moved)
    drift, hist, at, last = verdicts(ws, memory.id)
    assert drift is Verdict.MOVED, ws.drift().memories
    assert hist is Verdict.MOVED and ws.bisect(memory.id).holds, ws.bisect(memory.id).describe()
    assert ws.bisect(memory.id).anchors[0].path_now == "b.py"
    if target != "existing, uncommitted":
        assert at is Verdict.MOVED and last is Verdict.MOVED
    assert ws.check(memory).drift is Drift.FRESH


def test_a_copy_left_beside_the_original_is_no_move(git_repo: Path) -> None:
    """The function changed in place while an old copy already sat in another file: `changed`,
    in drift and in history (a file already holding the text before is no evidence of a move)."""
    repo = git_repo
    commit(repo, "start", {"a.py": A_PY, "b.py": B_PY + "\n\n" + HELPER})
    anchorfs.init(repo)
    ws = anchorfs.open(repo)
    memory = ws.record("helper averages scaled values", anchors=["a.py#helper"])
    edit = commit(repo, "edit helper", {"a.py": A_PY.replace("max(len(values), 1)", "len(values) or 1")})
    assert verdicts(ws, memory.id)[:3] == (Verdict.CHANGED, Verdict.CHANGED, Verdict.CHANGED)
    culprit = ws.bisect(memory.id).culprit
    assert culprit is not None and culprit.commit == edit


def test_a_common_line_in_an_existing_file_is_no_move(git_repo: Path) -> None:
    repo = git_repo
    commit(repo, "start", {"a.py": "import os\nimport sys\n\nX = os.sep\n", "b.py": B_PY})
    anchorfs.init(repo)
    ws = anchorfs.open(repo)
    memory = ws.record("a uses sys", anchors=["a.py:2"])
    commit(repo, "a stops importing sys; b starts", {"a.py": "import os\n\nX = os.sep\n",
                                                     "b.py": "import sys\n" + B_PY})
    drift, hist, at, _ = verdicts(ws, memory.id)
    assert (drift, hist, at) == (Verdict.CHANGED, Verdict.CHANGED, Verdict.CHANGED)


# -- the property: random histories, judged plainly ------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from anchorfs.core.errors import AnchorfsError  # noqa: E402

SPLIT = ("    total = sum(v * scale for v in values)\n",
         "    total = sum(\n        v * scale for v in values\n    )\n")
"""One line of `helper` as written and as a formatter re-lays it: the same tokens on 1 or 3 lines."""
BLOCKS = {"imp": "import os\n", "helper": HELPER, "keep": "def keep():\n    return os.getcwd()\n",
          "other": "def other():\n    return 2\n"}
ANCHORS = {"symbol": "a.py#helper", "function lines": "a.py:4-6", "one distinctive line": "a.py:5",
           "a common one-liner": "a.py:1"}
OPS = ("insert above", "edit inside", "move to a new file", "move to an existing file", "re-lay",
       "edit elsewhere")


class Tree:
    """The workspace as the test knows it: files as lists of blocks, and the plain judgement of
    the anchored block (`intact`: never edited; `home`: still in the file it was taken in)."""

    def __init__(self) -> None:
        self.files = {"a.py": ["imp", "helper", "other"], "b.py": ["keep"]}
        self.text = dict(BLOCKS)
        self.intact, self.made = True, 0

    def where(self, block: str) -> str:
        return next(path for path, blocks in self.files.items() if block in blocks)

    def render(self) -> dict[str, str]:
        return {path: "\n\n".join(self.text[b] for b in blocks) for path, blocks in self.files.items()}

    def apply(self, op: str, block: str) -> None:
        path = self.where(block)
        self.made += 1
        if op == "insert above":
            self.text[f"note{self.made}"] = f"# note {self.made}\n"
            self.files[path].insert(0, f"note{self.made}")
        elif op == "edit inside":
            self.text[block] = self.text[block].replace("import os", "import sys").replace("* scale", "* scale * 2")
            self.intact = False
        elif op == "re-lay" and block == "helper":
            a, b = SPLIT if SPLIT[0] in self.text[block] else SPLIT[::-1]
            self.text[block] = self.text[block].replace(a, b)
        elif op.startswith("move"):
            self.files[path].remove(block)
            to = f"m{self.made}.py" if op == "move to a new file" else "b.py" if path != "b.py" else "a.py"
            self.files.setdefault(to, []).append(block)
        elif op == "edit elsewhere":
            self.text["other"] = self.text["other"].replace("return ", "return 1 + ")

    def holds(self, block: str) -> bool:
        """The reference: the text is there unedited, and a common line only in its own file."""
        return self.intact and (block != "imp" or self.where(block) == "a.py")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(anchor=st.sampled_from(sorted(ANCHORS)),
       ops=st.lists(st.tuples(st.sampled_from(OPS), st.booleans()), min_size=1, max_size=4))
def test_random_histories_drift_and_history_agree_with_the_plain_judgement(
        tmp_path_factory: pytest.TempPathFactory, anchor: str, ops: list[tuple[str, bool]]) -> None:
    """Each op is committed when its flag says so, else it joins the next commit (the last one
    left in the working tree)."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    tree = Tree()
    block = "imp" if anchor == "a common one-liner" else "helper"
    commit(repo, "start", tree.render())
    anchorfs.init(repo)
    ws = anchorfs.open(repo)
    memory = ws.record("helper averages scaled values", anchors=[ANCHORS[anchor]])
    for op, now in ops:
        tree.apply(op, block)
        for path, text in tree.render().items():
            (repo / path).write_text(text)
        if now:
            commit(repo, op, {})
    uncommitted = not ops[-1][1]
    want = Drift.FRESH if tree.holds(block) else Drift.STALE
    story = f"{anchor}: {ops}"
    assert ws.check(memory).drift is want, story
    assert ws.bisect(memory.id).holds is (want is Drift.FRESH), f"{story}\n{ws.bisect(memory.id).describe()}"
    if not uncommitted:
        assert next(r for r in ws.at("HEAD").results if r.memory.id == memory.id).drift is want, story
    # item 1: a re-take lands on the block's text where it is now, or is refused in one line
    try:
        new = ws.supersede(memory.id, "helper averages scaled values, still")
    except AnchorfsError as exc:
        assert "\n" not in str(exc) and want is Drift.STALE, story
        return
    ref = new.anchors[0]
    assert ref.path == tree.where(block), story
    if ref.lines:
        lines = (repo / ref.path).read_text().splitlines()[ref.lines[0] - 1:ref.lines[1]]
        assert "\n".join(lines) + "\n" in tree.text[block], f"{story}: re-taken at {ref.spec}"
    assert ws.check(new).drift is Drift.FRESH, story
