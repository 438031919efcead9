"""Undo restores the workspace files a run wrote, created or deleted, whoever wrote them (python, `!cmd`,
the shell kernel, a subprocess), and names before it commits what it cannot bring back: end to end over
LSP, with real kernels and the scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from harness import Session, assert_shape, needs_bwrap, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel
from test_loop import model_settings, next_proposal, py, turn_end

ORIGINAL_A = b"first line\nsecond line x\n"
ORIGINAL_B = bytes(range(256)) * 4 + b"\nxxx\n"  # binary: restored byte for byte
ORIGINAL_C = b"to be deleted\n"


def seed(root: Path) -> None:
    (root / "a.txt").write_bytes(ORIGINAL_A)
    (root / "sub dir").mkdir()
    (root / "sub dir" / "b.bin").write_bytes(ORIGINAL_B)
    (root / "c.txt").write_bytes(ORIGINAL_C)


ORIGINAL = {"a.txt": ORIGINAL_A, "sub dir/b.bin": ORIGINAL_B, "c.txt": ORIGINAL_C}


def contents(root: Path) -> dict[str, bytes]:
    """Every file of the workspace, by relative path (the tracker's barrier files aside)."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and not path.name.startswith(".interpreter-lsp-sync-")
    }


def assert_original(root: Path) -> None:
    assert contents(root) == ORIGINAL


@pytest.fixture
async def seeded(workspace_root: Path, home: Path) -> AsyncIterator[Session]:
    seed(workspace_root)
    s = await start_session(workspace_root, home)
    try:
        yield s
    finally:
        await stop_session(s)


CASES = {
    "python open(..., 'w')": ("open('a.txt', 'w').write('clobbered')", "python", {"restored": ["a.txt"]}),
    "python !sed -i": ("!sed -i 's/x/y/g' 'sub dir/b.bin'", "python", {"restored": ["sub dir/b.bin"]}),
    "shell sed -i": ("sed -i 's/line/LINE/' a.txt", "shell", {"restored": ["a.txt"]}),
    "python deletes a file": ("import os; os.remove('c.txt')", "python", {"restored": ["c.txt"]}),
    "a subprocess writes and creates": (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', "
        "\"open('a.txt', 'wb').write(b'by a child'); open('d.txt', 'w').write('new')\"], check=True)",
        "python",
        {"restored": ["a.txt"], "removed": ["d.txt"]},
    ),
    "shell rm and a background child": (
        "rm c.txt; (echo child > d.txt) & wait", "shell", {"restored": ["c.txt"], "removed": ["d.txt"]}
    ),
    "new directories with files, and a file in one that was there": (
        "import os\nos.makedirs('out/deep')\nopen('out/deep/e.txt', 'w').write('new')\n"
        "open('sub dir/f.txt', 'w').write('new')",
        "python",
        {"removed": ["out/deep/e.txt", "sub dir/f.txt"]},
    ),
}


async def test_undo_of_a_users_run_restores_each_file_byte_for_byte(seeded: Session) -> None:
    s, root = seeded, seeded.root
    for name, (code, language, expected) in CASES.items():
        _run_id, status = await s.run_and_wait(code, language)
        assert status["state"] == "ok", (name, s.text(_run_id))
        changed = contents(root)
        assert changed != ORIGINAL, name  # the run did change something
        preview = await s.command(p.UNDO, {"dryRun": True})
        assert_shape(p.UndoResult, preview)
        assert preview["dryRun"] is True and preview["request"] is None
        assert preview["restore"] + preview["remove"] == expected.get("restored", []) + expected.get("removed", [])
        assert contents(root) == changed  # a dry run changes nothing
        result = await s.command(p.UNDO, {})
        assert_shape(p.UndoResult, result)
        assert result["restored"] == expected.get("restored", []), name
        assert result["removed"] == expected.get("removed", []), name
        assert_original(root)
        # The directories the run made go with its files; those that were there stay.
        assert not (root / "out").exists() and (root / "sub dir").is_dir(), name
        # Variables undo is there (test_undo_variables.py): nothing of the kernel is named as lost here.
        assert not [item for item in result["notRestorable"] if "variable" in item["name"]], result
    # Every run was taken back: the conversation holds only the undo notes.
    events = (await s.command(p.HISTORY, {}))["messages"]
    assert [e["type"] for e in events] == ["note"] * len(CASES)
    with pytest.raises(JsonRpcException, match="Nothing to undo"):
        await s.command(p.UNDO, {})


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


async def test_undo_of_a_turn_lists_before_it_commits_and_tells_the_model(
    workspace_root: Path, home: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    seed(workspace_root)
    outside = tmp_path / "outside dir" / "notes.txt"
    outside.parent.mkdir()
    outside.write_text("outside before\n")
    s = await start_session(workspace_root, home, configuration=model_settings(model))
    try:
        code = (
            "open('a.txt', 'w').write('model was here')\n"
            "import os; os.remove('c.txt')\n"
            f"open({str(outside)!r}, 'w').write('outside after')"
        )
        model.reply(py(code))
        model.reply("Done.")
        turn = (await s.command(p.CHAT, {"text": "mess with my files"}))["turnId"]
        proposal = await next_proposal(s, turn)
        await s.command(p.APPROVE, {"proposalId": proposal["proposalId"]})
        await turn_end(s, turn)
        assert (workspace_root / "a.txt").read_bytes() == b"model was here"

        preview = await s.command(p.UNDO, {"dryRun": True})
        assert preview["request"] == "mess with my files"
        assert preview["restore"] == ["a.txt", "c.txt"] and preview["remove"] == []
        lost = {item["name"]: item["why"] for item in preview["notRestorable"]}
        assert any(str(outside) in name for name in lost), lost
        # Nothing happened yet: the files, the outside file and the conversation are as the turn left them.
        assert (workspace_root / "a.txt").read_bytes() == b"model was here"
        assert not (workspace_root / "c.txt").exists()
        assert any(e["type"] == "user" for e in (await s.command(p.HISTORY, {}))["messages"])

        result = await s.command(p.UNDO, {"confirm": True})
        assert result["restored"] == ["a.txt", "c.txt"]
        assert_original(workspace_root)
        assert outside.read_text() == "outside after"  # named, never touched
        events = (await s.command(p.HISTORY, {}))["messages"]
        assert [e["type"] for e in events] == ["note"]
        assert str(outside) in events[0]["text"]

        model.reply("Understood.")
        turn = (await s.command(p.CHAT, {"text": "what happened?"}))["turnId"]
        await turn_end(s, turn)
        sent = json.dumps(model.wait_requests(3, 60)[2]["messages"])
        assert "The user undid the last request" in sent and "restored a.txt, c.txt" in sent
        assert str(outside) in sent and "mess with my files" not in sent
    finally:
        await stop_session(s)


async def test_a_file_changed_again_after_the_run_is_kept_unless_confirmed(seeded: Session) -> None:
    s, root = seeded, seeded.root
    await s.run_and_wait("open('a.txt', 'w').write('by the run')")
    (root / "a.txt").write_bytes(b"the user's later edit")
    preview = await s.command(p.UNDO, {"dryRun": True})
    assert preview["changedSince"] == ["a.txt"] and preview["restore"] == ["a.txt"]
    result = await s.command(p.UNDO, {})
    assert result["restored"] == []
    assert any(item["name"] == "a.txt" and "changed again" in item["why"] for item in result["notRestorable"])
    assert (root / "a.txt").read_bytes() == b"the user's later edit"

    await s.run_and_wait("open('a.txt', 'w').write('by the run')")
    (root / "a.txt").write_bytes(b"another later edit")
    result = await s.command(p.UNDO, {"confirm": True})
    assert result["restored"] == ["a.txt"]
    assert (root / "a.txt").read_bytes() == b"the user's later edit"  # the second run's pre-image


async def test_undo_arguments_are_checked(seeded: Session) -> None:
    with pytest.raises(JsonRpcException, match="either 'dryRun'"):
        await seeded.command(p.UNDO, {"dryRun": True, "confirm": True})
    with pytest.raises(JsonRpcException, match="'dryRun' must be true or false"):
        await seeded.command(p.UNDO, {"dryRun": "yes"})
    with pytest.raises(JsonRpcException, match="Nothing to undo"):
        await seeded.command(p.UNDO, {"dryRun": True})


def test_undo_of_a_users_run_is_replayed_from_the_log(tmp_path: Path) -> None:
    from interpreter_lsp.agent.conversation import Conversation
    from interpreter_lsp.history import History

    def run(run_id: str, turn_id: str | None = None) -> p.RunEvent:
        return p.RunEvent(run_id=run_id, origin="user" if turn_id is None else "model", language="python",
                          code="1", state="ok", duration_ms=1, output_for_model="", turn_id=turn_id)

    c = Conversation(History(tmp_path / "h.jsonl"))
    c.add(p.UserEvent("t-1", "a", "a"))
    c.add(run("r-model", "t-1"))  # the model's run belongs to its turn
    c.add(run("r-mine"))  # the user's own run after it: its own unit
    c.add(run("r-again"))
    dropped = c.undo()
    assert [e.get("runId") for e in dropped or []] == ["r-again"]
    assert [e.get("runId") for e in c.undo() or []] == ["r-mine"]
    assert [e["type"] for e in c.events] == ["user", "run"]
    c.close()
    replayed = Conversation(History(tmp_path / "h.jsonl")).events
    assert [(e["type"], e.get("runId")) for e in replayed] == [("user", None), ("run", "r-model")]


@needs_bwrap
async def test_undo_restores_what_a_sandboxed_run_wrote(workspace_root: Path, home: Path) -> None:
    seed(workspace_root)
    s = await start_session(workspace_root, home, configuration={"sandbox": "bubblewrap"})
    try:
        run_id, status = await s.run_and_wait(
            "!sed -i 's/line/LINE/' a.txt && rm c.txt && echo new > d.txt\n"
            "import subprocess; subprocess.run(['sh', '-c', 'printf x >> \"sub dir/b.bin\"'], check=True)"
        )
        assert status["state"] == "ok", s.text(run_id)
        assert contents(workspace_root) != ORIGINAL
        result = await s.command(p.UNDO, {})
        assert (result["restored"], result["removed"]) == (["a.txt", "c.txt", "sub dir/b.bin"], ["d.txt"])
        assert_original(workspace_root)
    finally:
        await stop_session(s)


async def test_undo_stops_a_run_in_progress_and_takes_it_back(seeded: Session) -> None:
    s, root = seeded, seeded.root
    run_id = await s.run("import time\nopen('a.txt', 'w').write('half done')\nprint('written', flush=True)\n"
                         "time.sleep(120)")
    await s.wait_for(lambda: "written" in s.text(run_id), what="the run's first write")
    preview = await s.command(p.UNDO, {"dryRun": True})
    assert preview["running"] == [run_id]
    result = await s.command(p.UNDO, {})
    assert (await s.finished(run_id))["state"] == "interrupted"
    assert result["runs"] == [run_id] and result["restored"] == ["a.txt"]
    assert_original(root)


async def test_a_change_made_between_runs_is_the_next_runs_pre_image(session: Session) -> None:
    """A run that changed nothing leaves the workspace's copy as it was, and the next run reuses it without
    walking the workspace again, but only while the files tracker saw no change: the user's own edit between
    runs (a file, a new directory with a file in it) is what undo of the next run brings back."""
    s = session
    (s.root / "f.txt").write_text("v1")
    for _ in range(3):  # runs that change nothing: the copy is reused from here on
        await s.run_and_wait("pass")
    (s.root / "f.txt").write_text("v2 (the user's edit)")
    (s.root / "new dir").mkdir()
    (s.root / "new dir" / "g.txt").write_text("u1")
    (s.root / "empty dir").mkdir()  # the user's too: no file in it says it is there
    _run, status = await s.run_and_wait(
        "open('f.txt', 'w').write('v3')\nopen('new dir/g.txt', 'w').write('u2')\nopen('empty dir/h.txt', 'w')"
    )
    assert status["state"] == "ok"
    result = await s.command(p.UNDO, {})
    assert result["restored"] == ["f.txt", "new dir/g.txt"] and result["removed"] == ["empty dir/h.txt"], result
    assert (s.root / "f.txt").read_text() == "v2 (the user's edit)"
    assert (s.root / "new dir" / "g.txt").read_text() == "u1"
    assert (s.root / "empty dir").is_dir()  # it was there before the run: it stays


async def test_undo_after_undo_of_runs_that_wrote_the_same_file_goes_on_back(session: Session) -> None:
    """Undo twice: the first puts the file back as the earlier run left it (in a new inode); the second must
    not take that for a change made after the earlier run (it kept the file and said "changed again")."""
    s = session
    (s.root / "a.txt").write_text("zero")
    for code in ("open('a.txt', 'w').write('one'); n = 1", "open('a.txt', 'w').write('two'); n = 2",
                 "import os; os.remove('a.txt'); n = 3"):
        _run, status = await s.run_and_wait(code)
        assert status["state"] == "ok", s.text(_run)
    for expected, variables in (("two", (["n"], ["os"])), ("one", (["n"], [])), ("zero", ([], ["n"]))):
        result = await s.command(p.UNDO, {})
        assert result["restored"] == ["a.txt"] and not result["notRestorable"], (expected, result)
        assert (s.root / "a.txt").read_text() == expected
        # The variables too, three steps back (each undo's redo point is no extra snapshot in the kernel).
        assert (result["variablesRestored"], result["variablesRemoved"]) == variables, result
    result = await s.command(p.REDO, {})
    assert result["restored"] == ["a.txt"] and not result["notRestorable"], result
    assert (s.root / "a.txt").read_text() == "one"


async def test_two_undos_sent_at_once_are_two_steps_back(session: Session) -> None:
    """An impatient double press: both undos arrive before the first is done. Each must plan against what the
    one before it left: the second said it took back the first run while the file it created and its
    variable stayed (the conversation and the state no longer agreed)."""
    s = session
    for code in ("open('a.txt', 'w').write('one'); x = 1", "open('a.txt', 'w').write('two'); x = 2"):
        _run, status = await s.run_and_wait(code)
        assert status["state"] == "ok", s.text(_run)
    first, second = await asyncio.gather(s.command(p.UNDO, {}), s.command(p.UNDO, {}))
    assert (first["restored"], first["variablesRestored"]) == (["a.txt"], ["x"]), first
    assert (second["removed"], second["variablesRemoved"]) == (["a.txt"], ["x"]), second
    assert not (s.root / "a.txt").exists()
    assert "x" not in [v["name"] for v in (await s.command(p.VARIABLES, {}))["variables"]]
    # An undo and a redo at once: one after the other, whichever comes first; the state is the one their
    # order says (undo of nothing left refuses; or the redo brings back the second run, then undo takes it).
    results = await asyncio.gather(s.command(p.REDO, {}), s.command(p.UNDO, {}), return_exceptions=True)
    assert not isinstance(results[0], BaseException), results
    assert (s.root / "a.txt").exists() == isinstance(results[1], BaseException), results


@pytest.mark.parametrize("sandbox", ["off", pytest.param("bubblewrap", marks=needs_bwrap)])
async def test_writes_only_through_a_memory_map_are_the_runs_and_undo_brings_them_back(
    workspace_root: Path, home: Path, sandbox: str
) -> None:
    """A run that writes a workspace file only through a map opened by an earlier run raises no file event;
    a write to a page already dirty does not even change the file's times. The server reads the kernel's
    writable maps after each run (in the sandbox too: the kernel's tree below bubblewrap) and compares such a
    file by content: undo of each run puts back what that run found, one step at a time."""
    (workspace_root / "data.bin").write_bytes(b"\0" * 4096)
    s = await start_session(workspace_root, home, configuration={"sandbox": sandbox})
    try:
        for code in (
            "import mmap\nf = open('data.bin', 'r+b')\nm = mmap.mmap(f.fileno(), 0)",
            "m[0:4] = b'ONE!'",
            "m[0:4] = b'TWO!'",  # the same page, dirty since the run before: the file's mtime stays
        ):
            _run, status = await s.run_and_wait(code)
            assert status["state"] == "ok", s.text(_run)
        assert (s.root / "data.bin").read_bytes()[:4] == b"TWO!"
        result = await s.command(p.UNDO, {})
        assert result["restored"] == ["data.bin"], result
        assert (s.root / "data.bin").read_bytes() == b"ONE!" + b"\0" * 4092
        result = await s.command(p.UNDO, {})
        assert result["restored"] == ["data.bin"], result
        assert (s.root / "data.bin").read_bytes() == b"\0" * 4096
    finally:
        await stop_session(s)


async def test_a_write_through_a_memory_map_is_in_the_next_runs_pre_image(session: Session) -> None:
    """numpy.memmap, mmap: writes through a mapping raise no file event, so the tracker cannot name the file;
    the walk after a run that changed anything sees its new signature. Undo of the next run then brings back
    what the mapping wrote, not what was there before it."""
    s = session
    (s.root / "data.bin").write_bytes(b"\0" * 4096)
    for code in (
        "import mmap\nf = open('data.bin', 'r+b')\nm = mmap.mmap(f.fileno(), 0)",
        "m[0:4] = b'MMAP'\nm.flush()\nopen('other.txt', 'w').write('x')",
        "open('data.bin', 'wb').write(b'clobbered')",
    ):
        _run, status = await s.run_and_wait(code)
        assert status["state"] == "ok", s.text(_run)
    result = await s.command(p.UNDO, {})
    assert result["restored"] == ["data.bin"], result
    assert (s.root / "data.bin").read_bytes() == b"MMAP" + b"\0" * 4092


async def test_nothing_starts_while_an_undo_puts_state_back(session: Session) -> None:
    """A run sent while an undo restores a large file was taken back in the place of the run the undo had
    planned: the conversation lost the new run, kept the old one, and the files and variables said the
    opposite. Now a run or a chat sent meanwhile is refused with a sentence, and the undo takes back what it
    planned; sent again after, the run runs."""
    s = session
    await s.run_and_wait("open('big.bin', 'wb').write(b'a' * 150_000_000); x = 1")
    second, _ = await s.run_and_wait("open('big.bin', 'wb').write(b'b' * 150_000_000); x = 2")
    undoing = asyncio.ensure_future(s.command(p.UNDO, {}))
    await asyncio.sleep(0)  # the undo's request is written first
    refusals: list[str] = []
    started: list[str] = []  # accepted after the undo ended, its answer still on its way to the editor
    while not undoing.done():  # whatever moment of the undo the requests land in
        for command, args in ((p.RUN, {"code": "late = 1"}), (p.CHAT, {"text": "hello"}), (p.COMPACT, {})):
            try:
                answer = await s.command(command, args)
            except JsonRpcException as exc:
                refusals.append(str(exc))
            else:
                started.append(answer.get("runId") or answer.get("turnId") or "compacted")
    result = await undoing
    assert result["runs"] == [second] and result["restored"] == ["big.bin"], result
    # Refused while the undo ran; after it (its answer still on its way), refused for reasons of their own.
    held = "undo is putting the files and variables back"
    assert refusals and held in refusals[0], refusals[:3]
    after = ("Nothing to compact", "A turn is in progress")
    assert all(held in r or r.startswith(after) for r in refusals), refusals
    assert (s.root / "big.bin").read_bytes()[:1] == b"a"
    for run_id in [i for i in started if i.startswith("r-")]:  # came after the undo: kept, and ran
        assert (await s.finished(run_id))["state"] == "ok"
    run_id, status = await s.run_and_wait("print(x)")
    assert status["state"] == "ok" and s.text(run_id) == "1\n"
