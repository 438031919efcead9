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
        for i in range(6 if polling else 200):  # polling: each settle waits a poll or two (~1 s)
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
