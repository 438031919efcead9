"""The barrier files of the file-change watcher (`.interpreter-lsp-sync-*`, files.py) never stay in the
workspace: code a run executes (and the model reading what it printed) must not find them. With a native
observer the file is created and removed in the same call (its creation's event is the barrier); with
polling there is no file at all."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from interpreter_lsp.files import PROBE_PREFIX, FileChanges


@pytest.mark.parametrize("polling", [False, True], ids=["native", "polling"])
async def test_no_barrier_file_is_ever_found_by_code_listing_the_folder(tmp_path: Path, polling: bool) -> None:
    root = tmp_path / "work space"
    root.mkdir()
    watcher = FileChanges(root, polling=polling)
    seen: set[str] = set()
    stop = threading.Event()

    def lister() -> None:  # what `os.listdir('.')` in a run, or `ls -a`, would show, as often as it can
        while not stop.is_set():
            seen.update(p.name for p in root.iterdir() if p.name.startswith(PROBE_PREFIX))

    thread = threading.Thread(target=lister, daemon=True)
    if polling:
        thread.start()
    try:
        for i in range(20 if polling else 200):
            await watcher.begin(f"r{i}")
            assert not [p for p in root.iterdir() if p.name.startswith(PROBE_PREFIX)], "left after begin"
            (root / f"out{i % 3}.txt").write_text(str(i))
            await watcher.settle()
            assert [f["path"] for f in watcher.end(f"r{i}").files] == [f"out{i % 3}.txt"]
            assert not [p for p in root.iterdir() if p.name.startswith(PROBE_PREFIX)], "left after settle"
        await asyncio.sleep(0)
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(10)
        watcher.close()
    if polling:
        assert seen == set(), f"polling needs no barrier file, yet code saw {seen}"
    # Native: the file lives only inside `begin` / `settle` (created and removed in one call), and a run's
    # code starts after `begin` returned and ends before `settle` is called (runs.py): it never finds one.
    # (A listing in another thread, racing that very call, could: not asserted.)


async def test_with_polling_a_barrier_starts_a_poll_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's `begin` and `settle` each wait for a whole poll: the poll they ask for starts at once, not at
    the end of the period (which added up to two periods, ~1 s, to every run on the polling path). With a
    20 s period, ten runs' barriers would take minutes if they waited for it; they take well under 10 s."""
    monkeypatch.setattr("interpreter_lsp.files.POLL_INTERVAL", 20.0)
    root = tmp_path / "work space"
    root.mkdir()
    watcher = FileChanges(root, polling=True)
    try:

        async def rounds() -> None:
            for i in range(10):
                await watcher.begin(f"r{i}")
                (root / f"out{i % 3}.txt").write_text(str(i))
                await watcher.settle()
                touched = watcher.end(f"r{i}")
                assert ([f["path"] for f in touched.files], touched.note) == ([f"out{i % 3}.txt"], None)

        await asyncio.wait_for(rounds(), 10)
    finally:
        watcher.close()
