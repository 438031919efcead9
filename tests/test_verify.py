"""Verified export (interpreter.exportNotebook with verify): through the server (a real LSP client, the real
server, the session's real kernel and a fresh real kernel on the same execution path), each code cell of the exported
notebook gets the verdict a reader should see, with the normalisation or cause named, and the command's
result carries the summary the editors show."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from lsprotocol import types as t
from pygls.exceptions import JsonRpcException

from harness import Session, assert_shape, descendants, start_session, stop_session, wait_exited
from interpreter_lsp import normalise
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels.sandbox import bwrap_available

VERIFY_WAIT = 240.0  # a fresh kernel and numpy/matplotlib imports on a busy 2-core machine

CELLS = [
    # 1: deterministic (a seeded generator)
    "import numpy as np\nrng = np.random.default_rng(0)\nprint(sum(range(10)), rng.integers(0, 100, 5).tolist())",
    # 2: a repr with 0x… and an object id
    "class Thing:\n    pass\nprint(Thing(), id(object()))",
    # 3: the clock and a uuid
    "import time, uuid\nprint(time.time(), uuid.uuid4())",
    # 4: unseeded stdlib randomness (numpy was seeded above: that does not seed `random`)
    "import random\nprint(random.random())",
    # 5: a plot, shown by the figure hook as a PNG
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
    # 6: reads a workspace file that cell 7 deletes
    "print(open('data.csv').read())",
    # 7
    "import os\nos.remove('data.csv')\nprint('removed')",
]


def _read(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def _stamps(nb: dict) -> list[dict]:
    return [c["metadata"]["interpreter_lsp"]["verify"] for c in nb["cells"] if c["cell_type"] == "code"]


async def test_verified_export_stamps_each_cell(session: Session) -> None:
    (session.root / "data.csv").write_text("a,b\n1,2\n")
    for code in CELLS:
        _run, status = await session.run_and_wait(code)
        assert status["state"] == "ok", (code, session.text(_run))
    plain = await session.command(p.EXPORT_NOTEBOOK, {"path": "plain.ipynb"})  # without verify: as before
    assert set(plain) == {"path"}

    result = await session.command(p.EXPORT_NOTEBOOK, {"path": "verified.ipynb", "verify": True}, VERIFY_WAIT)
    assert_shape(p.ExportNotebookResult, result)
    assert result["verification"] is not None

    summary = result["verification"]
    nb = _read(result["path"])
    stamps = _stamps(nb)
    verdicts = [s["verdict"] for s in stamps]
    assert verdicts[0] == "identical", stamps[0]
    assert verdicts[1] == "equivalent" and {"memory addresses", "object ids"} <= set(stamps[1]["normalisations"])
    assert verdicts[2] == "equivalent" and {"timestamps (epoch seconds)", "UUIDs"} <= set(stamps[2]["normalisations"])
    assert verdicts[3] == "differs: seed not set", stamps[3]
    assert verdicts[4] in ("identical", "equivalent"), stamps[4]
    assert any("image/png" in o.get("data", {}) for o in nb["cells"][4]["outputs"])  # a plot was compared
    assert verdicts[5] == "differs: missing input file data.csv", stamps[5]
    assert verdicts[6] == "not run"
    assert summary["cells"] == 7 and summary["identical"] + summary["equivalent"] == 4
    assert summary["differs"] == [
        {"cell": 4, "cause": "seed not set"},
        {"cell": 6, "cause": "missing input file data.csv"},
    ]
    assert summary["notRun"] == 1 and summary["id"].startswith("verify-")
    record = nb["metadata"]["interpreter_lsp"]["verify"]
    assert record["python"] and "numpy" in record["packages"] and "matplotlib" in record["packages"]
    assert record["seeds"] == ["np.random.default_rng(0)"]
    # data.csv was deleted by the session: no hash; nothing else the cells name exists in the workspace.
    assert record["inputFiles"] == {}
    assert record["summary"]["cells"] == 7
    # The model is told too: the user can ask it why cell 4 differs.
    note = [e for e in (await session.command(p.HISTORY, {}))["messages"] if e["type"] == "note"][-1]
    assert note["text"].startswith("Verified export ") and "does not fully reproduce (4 of 7" in note["text"]
    assert "cell 4 differs: seed not set" in note["forModel"], note["forModel"]
    assert "cell 6 differs: missing input file data.csv" in note["forModel"], note["forModel"]

    # Again, as a user does after reading the verdicts: this one takes the kernel started ahead
    # (kernels/spare.py), which was set up as the first one was: without the figures hook the plot cell would
    # show nothing and differ.
    again = await session.command(p.EXPORT_NOTEBOOK, {"path": "again.ipynb", "verify": True}, VERIFY_WAIT)
    stamps = _stamps(_read(again["path"]))
    assert [s["verdict"] for s in stamps] == verdicts, stamps


async def test_input_files_are_hashed_and_a_seeded_session_is_identical(session: Session) -> None:
    (session.root / "in put.txt").write_text("3\n")  # a path with a space
    for code in ("import random\nrandom.seed(7)\nprint(random.random())",
                 "n = int(open('in put.txt').read())\nprint([random.randint(0, 9) for _ in range(n)])",
                 # masked in the session's output: the fresh output is masked the same way before comparing
                 "print('postgres://app:' + 'Pg-Passw0rd' + '-4242@db/app', random.random())"):
        await session.run_and_wait(code)
    result = await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    assert result["verification"]["identical"] == 3 and result["verification"]["differs"] == [], result
    assert "Pg-Passw0rd-4242" not in Path(result["path"]).read_text()  # noqa: ASYNC240
    record = _read(result["path"])["metadata"]["interpreter_lsp"]["verify"]
    assert record["inputFiles"] == {"in put.txt": "sha256:" + hashlib.sha256(b"3\n").hexdigest()}
    assert record["seeds"] == ["random.seed(7)"]


async def test_interrupt_cancels_a_verification(session: Session) -> None:
    """Interrupted while the fresh kernel runs a cell: cancelled, its kernel shut down, the notebook kept."""
    await session.run_and_wait("import time\nopen('started.txt', 'w').write('1')\ntime.sleep(4)")
    started = session.root / "started.txt"
    started.unlink()
    export = asyncio.ensure_future(session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT))
    # The fresh kernel writes the file when it runs the cell (no notification says so: a bounded wait on it).
    for _ in range(3000):
        if started.exists() or export.done():
            break
        await asyncio.sleep(0.02)
    assert started.exists() and not export.done()
    await session.command(p.INTERRUPT, {})
    with pytest.raises(JsonRpcException, match="interrupted"):
        await export
    nb = _read(session.root / "v.ipynb")  # written, without verdicts
    assert "interpreter_lsp" not in nb["cells"][0]["metadata"]
    # The file the stopped re-run wrote is put back as it was before it (absent), once its kernel is gone.
    assert not started.exists()


async def test_the_re_run_leaves_the_workspace_as_it_found_it(session: Session) -> None:
    """Verification re-runs the session's code in the workspace itself; what that writes, creates or deletes
    there (through Python, a subprocess, a shell) is put back, and the user is told. Without that, an export
    would append to the user's log again and delete again a file the user has since recreated."""
    (session.root / "log.txt").write_text("start\n")
    (session.root / "old.txt").write_text("stale\n")
    for code in (
        "open('log.txt', 'a').write('appended\\n')",
        "import time\nopen('made.txt', 'w').write(repr(time.time()))",
        "import subprocess\nsubprocess.run(['sh', '-c', 'rm old.txt; echo shell > by_shell.txt'], check=True)",
        "import os\nfor d in ('made/out', 'keep'):\n"
        "    os.makedirs(d, exist_ok=True)\n    open(f'{d}/r.txt', 'w').write('x')",
    ):
        _run, status = await session.run_and_wait(code)
        assert status["state"] == "ok", session.text(_run)
    (session.root / "old.txt").write_text("precious: the user's new file\n")  # after the session deleted it
    shutil.rmtree(session.root / "made")  # the user cleaned up what the session built ...
    (session.root / "keep" / "r.txt").unlink()  # ... and kept a directory of theirs, empty
    before = {f.name: f.read_text() for f in session.root.iterdir() if f.suffix == ".txt"}

    result = await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    verification = result["verification"]
    assert {f.name: f.read_text() for f in session.root.iterdir() if f.suffix == ".txt"} == before
    # The directories the re-run made go with its files; the user's own (empty) directory stays.
    assert not (session.root / "made").exists()
    assert (session.root / "keep").is_dir() and list((session.root / "keep").iterdir()) == []
    # by_shell.txt was written again with the same bytes (put back too when its time stamp moved).
    put_back = set(verification["filesPutBack"])
    assert {"log.txt", "made.txt", "old.txt", "made/out/r.txt", "keep/r.txt"} <= put_back <= {
        "log.txt", "made.txt", "old.txt", "made/out/r.txt", "keep/r.txt", "by_shell.txt"}
    assert verification["filesNotPutBack"] == []
    note = [e for e in (await session.command(p.HISTORY, {}))["messages"] if e["type"] == "note"][-1]
    assert f"The re-run changed {len(put_back)} workspace files: put back." in note["text"], note["text"]


async def test_putting_back_never_writes_through_a_link_the_re_run_planted(session: Session, tmp_path: Path) -> None:
    """Hostile code in the re-run swaps a workspace directory for a link to a folder outside it after writing
    into it: putting back writes nothing through the link (safety/paths.write_inside refuses it; the link,
    which the re-run made, is removed before the file is written back where it was)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (session.root / "sub").mkdir()
    (session.root / "sub" / "data.txt").write_text("original\n")
    for code in ("open('sub/data.txt', 'a').write('more\\n')",
                 f"import os\nif os.path.isdir('sub.bak'):\n    os.rename('sub', 'sub.old')\n"
                 f"else:\n    os.rename('sub', 'sub.bak')\n    os.symlink({str(outside)!r}, 'sub')\n    "
                 f"open('sub.bak/data.txt', 'w').write('moved\\n')"):
        _run, status = await session.run_and_wait(code)
        assert status["state"] == "ok", session.text(_run)
    # The session: sub/data.txt appended, then sub moved aside and a link to outside put in its place. Undo
    # that state for the export: sub is a plain directory again with the session's first content.
    os.unlink(session.root / "sub")
    os.rename(session.root / "sub.bak", session.root / "sub")
    (session.root / "sub" / "data.txt").write_text("original\n")
    result = await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    verification = result["verification"]
    assert list(outside.iterdir()) == [], "put back wrote through the link"
    # The link the re-run made goes first, then the file comes back where it was (never through the link).
    assert not (session.root / "sub").is_symlink()
    assert (session.root / "sub" / "data.txt").read_text() == "original\n"
    assert verification["filesNotPutBack"] == [], verification


async def test_a_file_the_session_changes_during_a_verification_stays_as_the_session_left_it(
    session: Session,
) -> None:
    """The user's own run while a verification runs (another kernel), and a document the user saves in the
    editor meanwhile: a file both the user and the re-run wrote is the user's, kept as it is and named, never
    put back under the user's feet."""
    go = session.root / "go.txt"

    async def released(work: asyncio.Future) -> None:
        """Wait until the cell wrote go.txt (it then waits for it to go), bounded; not yet ended."""
        for _ in range(3000):
            if go.exists() or work.done():
                break
            await asyncio.sleep(0.02)
        assert go.exists() and not work.done()

    # The cell appends, then waits until go.txt is removed: in the session, then in the re-run.
    code = ("open('shared.txt', 'a').write('session\\n')\nopen('notes.txt', 'w').write('session\\n')\n"
            "open('go.txt', 'w').write('1')\n"
            "import os, time\nwhile os.path.exists('go.txt'):\n    time.sleep(0.02)")
    run = asyncio.ensure_future(session.run_and_wait(code))
    await released(run)
    go.unlink()
    _run, status = await run
    assert status["state"] == "ok", session.text(_run)
    export = asyncio.ensure_future(session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT))
    await released(export)
    _run, status = await session.run_and_wait("open('shared.txt', 'a').write('mine\\n')")
    assert status["state"] == "ok"
    # The user saves notes.txt in the editor meanwhile (the re-run wrote it too): didSave says it is theirs.
    notes = session.root / "notes.txt"
    notes.write_text("edited in the editor\n")
    session.client.text_document_did_save(t.DidSaveTextDocumentParams(t.TextDocumentIdentifier(notes.as_uri())))
    await session.command(p.STATUS, {})  # a round trip: the notification was handled before the re-run ends
    go.unlink()  # the re-run goes on, and ends
    verification = (await export)["verification"]
    assert (session.root / "shared.txt").read_text() == "session\nsession\nmine\n"
    assert notes.read_text() == "edited in the editor\n"
    kept = {x["name"]: x["why"] for x in verification["filesNotPutBack"]}
    assert sorted(kept) == ["notes.txt", "shared.txt"], verification
    assert all("the user changed it meanwhile" in why for why in kept.values()), kept


async def test_bad_verify_arguments_are_refused(session: Session) -> None:
    with pytest.raises(JsonRpcException, match="'verify' must be true or false"):
        await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": "yes"})
    with pytest.raises(JsonRpcException, match="'verifyTimeout' must be a number"):
        await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True, "verifyTimeout": 0})
    assert not (session.root / "v.ipynb").exists()
    with pytest.raises(JsonRpcException, match="nothing to verify"):
        await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True})


async def test_a_cell_past_the_run_timeout_differs_and_ends_the_run(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home, configuration={"runTimeout": 3})
    try:
        await s.run_and_wait("import os, time\nif os.path.exists('slow'):\n    time.sleep(60)\nprint('quick')")
        await s.run_and_wait("print('next')")
        (workspace_root / "slow").write_text("")  # the fresh run finds it: the cell now runs past runTimeout
        result = await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    finally:
        await stop_session(s)
    assert [x["verdict"] for x in _stamps(_read(result["path"]))] == ["differs: timeout (past runTimeout)", "not run"]


async def test_a_fresh_kernel_that_dies_is_said_and_the_rest_is_not_run(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home)
    try:
        await s.run_and_wait("import os\nif os.path.exists('crash'):\n    os._exit(1)\nprint('alive')")
        await s.run_and_wait("print('next')")
        (workspace_root / "crash").write_text("")  # the fresh run finds it: its kernel dies in the first cell
        result = await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    finally:
        await stop_session(s)
    assert [x["verdict"] for x in _stamps(_read(result["path"]))] == ["differs: the fresh kernel died", "not run"]
    assert result["verification"]["notRun"] == 1


async def test_verification_takes_the_portable_path_too(workspace_root: Path, home: Path) -> None:
    """Forced here as on macOS and Windows (kernels over TCP with the connection key, death seen by polling):
    the fresh kernel is started like the session's, so it works where the session's does."""
    transport = "import json\nfrom ipykernel.connect import get_connection_info\n" \
        "print(json.loads(get_connection_info())['transport'])"
    s = await start_session(workspace_root, home, env={"INTERPRETER_LSP_PORTABLE": "1"})
    try:
        run_id, status = await s.run_and_wait(transport)
        assert status["state"] == "ok" and s.text(run_id) == "tcp\n", s.text(run_id)
        run_id, status = await s.run_and_wait("x = 6 * 7\nprint(x + 1)")
        assert status["state"] == "ok", s.text(run_id)
        result = await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    finally:
        await stop_session(s)
    # "identical" for the first cell: the fresh kernel printed "tcp" too.
    assert [x["verdict"] for x in _stamps(_read(result["path"]))] == ["identical", "identical"]


def _png(pixels: list[tuple[int, int, int]], level: int) -> str:
    from PIL import Image

    image = Image.new("RGB", (len(pixels), 1))
    image.putdata(pixels)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=level)
    return base64.b64encode(buffer.getvalue()).decode()


def test_images_compare_by_decoded_pixels() -> None:
    pixels = [(i * 3 % 256, i * 7 % 256, i * 11 % 256) for i in range(300)]
    a, b = _png(pixels, 0), _png(pixels, 9)
    assert a != b  # different bytes, same pixels
    shown = lambda png: [{"output_type": "display_data", "data": {"image/png": png, "text/plain": "<Figure>"}}]  # noqa: E731
    same = normalise.compare(shown(a), shown(b))
    assert same.verdict == "equivalent" and same.normalisations == ["images by decoded pixels"]
    other = normalise.compare(shown(a), shown(_png([(255, 255, 255), *pixels[1:]], 9)))
    assert other.verdict == "differs" and "pixels differ" in other.diff


def test_floats_report_the_tolerance_that_took() -> None:
    out = lambda text: [{"output_type": "stream", "name": "stdout", "text": text}]  # noqa: E731
    assert normalise.compare(out("0.1234567891\n"), out("0.1234567892\n")).normalisations == ["floats (rtol 1e-9)"]
    assert normalise.compare(out("0.12345671\n"), out("0.12345672\n")).normalisations == ["floats (rtol 1e-6)"]
    assert normalise.compare(out("0.2\n"), out("0.7\n")).verdict == "differs"
    assert normalise.compare(out("9%\r50%\r100%\n"), out("10%\r100%\n")).normalisations == ["progress-bar redraws"]


_BWRAP = bwrap_available()


@pytest.mark.skipif(_BWRAP is not None and "not installed" in _BWRAP, reason=f"{_BWRAP}")
async def test_a_sandboxed_session_is_verified_in_the_sandbox(workspace_root: Path, home: Path) -> None:
    """The fresh kernel runs through the session's bubblewrap wrapper: a file outside the workspace that the
    sandbox hides stays hidden (unsandboxed, the cell would print True and differ)."""
    outside = home / "outside.txt"
    outside.write_text("visible only unsandboxed")
    s = await start_session(workspace_root, home, configuration={"sandbox": "bubblewrap"})
    try:
        run_id, status = await s.run_and_wait(f"import os\nprint(os.path.exists({str(outside)!r}))")
        assert status["state"] == "ok" and s.text(run_id).strip() == "False"
        result = await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    finally:
        await stop_session(s)
    assert result["verification"]["sandbox"].startswith("bubblewrap")
    assert result["verification"]["identical"] == 1, result


async def test_a_cell_that_needed_an_undone_turn_differs_with_that_cause(workspace_root: Path, home: Path) -> None:
    """Undo takes the turn out of the conversation (and so of the export) and its variables out of the
    kernel, but not what it changed in a module (here: builtins): a later cell that used it ran in the session
    and fails in the fresh kernel, and the verdict says why."""
    from scripted_model import ScriptedModel

    with ScriptedModel() as model:
        model.reply("Setting it.\n```python\nimport builtins\nbuiltins.hidden = 41\n```\n")
        model.reply("Done.")
        s = await start_session(
            workspace_root, home,
            configuration={"model": "openai/scripted", "apiBase": model.base_url, "maxRetries": 0},
        )
        try:
            turn = (await s.command(p.CHAT, {"text": "set hidden"}))["turnId"]
            shown = await s.wait_for(lambda: next(iter(s.notes[p.PROPOSAL]), None), VERIFY_WAIT, "the proposal")
            run_id = (await s.command(p.APPROVE, {"proposalId": shown["proposalId"]}))["runId"]
            assert (await s.finished(run_id))["state"] == "ok"
            await s.wait_for(
                lambda: any(n["turnId"] == turn and n["state"] in p.FINAL_TURN_STATES for n in s.notes[p.TURN_STATUS]),
                VERIFY_WAIT, "the turn to end",
            )
            await s.command(p.UNDO, {})
            run_id, _status = await s.run_and_wait("print(hidden + 1)")
            assert s.text(run_id).strip() == "42"
            result = await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
        finally:
            await stop_session(s)
    [differs] = result["verification"]["differs"]
    assert differs == {"cell": 1, "cause": "hidden state from an undone run (name 'hidden' is not defined)"}


async def test_an_interrupted_cell_is_not_run_again(session: Session) -> None:
    run_id = await session.run("import time\nwhile True:\n    time.sleep(0.05)")
    await session.wait_for(
        lambda: any(st["state"] == "running" for st in session.statuses(run_id)), VERIFY_WAIT, "the loop to run"
    )
    await session.command(p.INTERRUPT, {})
    assert (await session.finished(run_id))["state"] == "interrupted"
    await session.run_and_wait("print('after')")
    result = await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    stamps = _stamps(_read(result["path"]))
    assert [s["verdict"] for s in stamps] == ["not run: the session's run ended interrupted", "identical"]
    assert result["verification"]["notRun"] == 1


async def test_an_outside_agents_cell_that_differs_names_the_agent(workspace_root: Path, home: Path) -> None:
    from test_mcp import agent, next_proposal, socket_ready

    s = await start_session(workspace_root, home)
    try:
        await socket_ready(workspace_root)
        async with agent(workspace_root, home, "Claude Code") as client:
            # Differs for no reason the history names (a hash of a fresh object's id, not an id itself).
            call = asyncio.create_task(client.call_tool("run_code", {"code": "print(hash(str(id(object()))) % 10**9)"}))
            card = await next_proposal(s, 0)
            await s.command(p.APPROVE, {"proposalId": card["proposalId"]})
            await asyncio.wait_for(call, VERIFY_WAIT)
        result = await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    finally:
        await stop_session(s)
    [differs] = result["verification"]["differs"]
    assert differs["cause"].startswith("an outside agent's run (Claude Code 1.0): output"), differs


async def test_versions_are_recorded_under_the_import_name(session: Session) -> None:
    """A module whose distribution has another name (sklearn: scikit-learn, PIL: pillow) is recorded with its
    distribution's version, as for the others."""
    import importlib.metadata as md

    _run, status = await session.run_and_wait("import sklearn, PIL, numpy\nprint('ok')")
    assert status["state"] == "ok", session.text(_run)
    result = await session.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT)
    packages = _read(result["path"])["metadata"]["interpreter_lsp"]["verify"]["packages"]
    assert packages == {"sklearn": md.version("scikit-learn"), "PIL": md.version("pillow"),
                        "numpy": md.version("numpy")}, packages


def _verification_kernels(server_pid: int) -> set[str]:
    """The server's fresh kernels for verification now, by their runtime directory (verify-…): a kernel may
    be more than one process (its launcher, bubblewrap)."""
    found = set()
    for pid in descendants(server_pid):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if "ipykernel" in command and (match := re.search(r"/(verify-[0-9a-f]+)/", command)):
                found.add(match.group(1))
    return found


async def _wait_kernels(server_pid: int, want: Callable[[set[str]], bool], what: str) -> set[str]:
    """Processes send no notification: /proc is looked at again every 50 ms, within a generous bound."""
    deadline = asyncio.get_running_loop().time() + VERIFY_WAIT
    while not want(kernels := _verification_kernels(server_pid)):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}: {kernels}"
        await asyncio.sleep(0.05)
    return kernels


async def test_the_next_verification_takes_a_kernel_started_ahead_for_its_settings_only(
    workspace_root: Path, home: Path
) -> None:
    """After a verification, the next one's fresh kernel starts while the user reads (it runs nothing until then);
    the one used is shut down after the answer. A spare started for other settings is never used: turning the
    sandbox on ends it, and the next verification runs sandboxed. Nothing is left when the server stops."""
    if (problem := bwrap_available()) is not None:
        pytest.skip(problem)
    outside = home / "outside.txt"
    outside.write_text("visible only unsandboxed")
    s = await start_session(workspace_root, home)
    server_pid = s.client._server.pid  # type: ignore[union-attr]
    try:
        run_id, status = await s.run_and_wait(f"import os\nprint(os.path.exists({str(outside)!r}), 'spare' in dir())")
        assert status["state"] == "ok" and s.text(run_id).strip() == "True False"
        first = (await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True, "overwrite": True},
                                  VERIFY_WAIT))["verification"]
        assert first["identical"] == 1 and first["sandbox"].startswith("off"), first
        [spare] = await _wait_kernels(server_pid, lambda k: len(k) == 1, "one spare kernel, the used one gone")

        await s.run_and_wait("spare = 1")  # the session's kernel, not the spare: the spare stays fresh
        second = (await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True, "overwrite": True},
                                  VERIFY_WAIT))["verification"]
        assert second["identical"] == 2 and second["differs"] == [], second  # 'spare' in dir() is False there too
        [after] = await _wait_kernels(server_pid, lambda k: spare not in k and len(k) == 1,
                                     "the spare used, a new one started")

        s.client.set_configuration({"sandbox": "bubblewrap"}, section="interpreter")
        s.client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings=None))
        await _wait_kernels(server_pid, lambda k: not k, "the spare started unsandboxed to be shut down")
        third = (await s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True, "overwrite": True},
                                  VERIFY_WAIT))["verification"]
        assert third["sandbox"].startswith("bubblewrap"), third
        # Sandboxed, the fresh kernel cannot see the file the session (unsandboxed) saw.
        assert [d["cell"] for d in third["differs"]] == [1], third
        assert after not in _verification_kernels(server_pid)
        # The next spare, sandboxed (its bwrap process is its parent; the kernel inside is what counts).
        await _wait_kernels(server_pid, lambda k: len(k) == 1, "the sandboxed spare")
        processes = descendants(server_pid)
    finally:
        await stop_session(s)
    await wait_exited(sorted(processes), 60, lambda pid: f"process {pid} outlived the server")


async def test_the_server_stopping_mid_verification_leaves_no_kernel(workspace_root: Path, home: Path) -> None:
    """Shut down while the fresh kernel runs a cell: the verification ends, and its kernel and every other
    process of the server are gone with it."""
    s = await start_session(workspace_root, home)
    server_pid = s.client._server.pid  # type: ignore[union-attr]
    try:
        await s.run_and_wait("import time\nopen('started.txt', 'w').write('1')\ntime.sleep(4)")
        started = workspace_root / "started.txt"
        started.unlink()
        export = asyncio.ensure_future(s.command(p.EXPORT_NOTEBOOK, {"path": "v.ipynb", "verify": True}, VERIFY_WAIT))
        await _wait_kernels(server_pid, lambda k: len(k) == 1 and started.exists(), "the fresh kernel to run the cell")
        processes = descendants(server_pid)
    finally:
        await stop_session(s)
    with contextlib.suppress(Exception):
        await export  # the server went: the request ends with it
    await wait_exited(sorted(processes), 60, lambda pid: f"process {pid} outlived the server")


def test_a_long_conversation_becomes_a_valid_notebook_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversation of weeks (here 3,000 events): each cell is not validated on its own (nbformat's
    new_*_cell did, ~0.3 ms a cell: seconds for such a conversation), the whole notebook is, once; and it is
    valid, with unique cell ids, and reads back as written."""
    import nbformat

    from interpreter_lsp import notebook

    events: list[dict] = []
    for i in range(1000):
        events += [
            {"type": "user", "text": f"question {i}"},
            {"type": "assistant", "text": f"answer {i}"},
            {"type": "run", "code": f"print({i})", "language": "shell" if i % 7 == 0 else "python",
             "origin": "user" if i % 5 == 0 else "model",
             "outputs": [{"output_type": "stream", "name": "stdout", "text": f"{i}\n"}]},
        ]
    calls = []
    validate = nbformat.validate
    monkeypatch.setattr(nbformat, "validate", lambda *a, **k: (calls.append(a), validate(*a, **k)))
    monkeypatch.setattr(nbformat.v4.nbbase, "validate", lambda *a, **k: (calls.append(a), validate(*a, **k)))
    nb = notebook.build(events)
    assert len(calls) == 1
    monkeypatch.undo()
    back = nbformat.reads(notebook.dumps(nb).decode(), as_version=4)
    nbformat.validate(back)
    assert len({cell.id for cell in back.cells}) == len(back.cells) == 3000
    code = [cell for cell in back.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, 1001))
    assert code[0].source == "%%bash\nprint(0)" and code[0].metadata["tags"] == ["run-by-user"]
    assert code[1].outputs[0]["text"] == "1\n"
