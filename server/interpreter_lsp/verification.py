"""Verified exports as a workspace runs them (Workspace.export_verified delegates here): one asyncio task per
verification, by id, that interpreter.interrupt, `verifyTimeout` and the server's shutdown cancel; its fresh
kernel (the spare started ahead for the same settings, else a new one: kernels/spare.py); the re-run itself
(verify.py); and the workspace put back as the re-run found it.

The re-run runs in the workspace itself, so whatever it writes, creates or deletes there (Python, a
subprocess, a shell) is put back once it ends, as an undo of a run would: its changes are watched by the
files tracker and its pre-images taken as a run's (undo.py), and a stat diff against that snapshot catches
what the tracker attributes away (a poll that began before the re-run). A path a run of the session
changed meanwhile, or a document the editor saved, is the user's: kept as it is, and named. Without this
an export appended to the user's log again and deleted again a file the user had since recreated.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .errors import UserError
from .files import FileChanges
from .history import history_file
from .kernels.pool import KernelPool
from .kernels.spare import Fresh, Spares
from .languages import PYTHON
from .undo import FileUndo
from .undo_notes import named

log = logging.getLogger(__name__)

STOP_WAIT = 30.0  # a stopped re-run's kernel: how long its shutdown may take before anything is put back


class Verifications:
    def __init__(
        self,
        root: Path,
        pool: KernelPool,
        file_changes: FileChanges,
        file_undo: FileUndo,
        *,
        runtime_dir: Callable[[], Path],
        key: Callable[[], object],
        run_timeout: Callable[[], float | None],
        mask: Callable[[Any], Any],
    ) -> None:
        """`key`: what a fresh kernel depends on (settings, interpreter, trust): a spare serves only its own.
        `mask`: what the session's outputs went through (secrets), applied to the fresh ones too."""
        self.root = root
        self._pool = pool
        self._files = file_changes
        self._undo = file_undo
        self._runtime_dir = runtime_dir
        self._key = key
        self._run_timeout = run_timeout
        self._mask = mask
        self.spares = Spares()  # the next verification's fresh kernel, started ahead (kernels/spare.py)
        self._tasks: dict[str, asyncio.Task[dict[str, Any]]] = {}  # running, by id
        # Per verification running: the paths the session's own runs changed or the editor saved meanwhile
        # (never put back as the re-run's); per verification ended, what putting its writes back left as it is.
        self._session_paths: dict[str, set[str]] = {}
        self._not_put_back: dict[str, list[dict[str, str]]] = {}

    async def run(self, nb: Any, runs: list[dict[str, Any]], written: Path, timeout: float) -> dict[str, Any]:
        """Re-run `nb` (stamped in place) and answer its summary with its id; UserError, with a sentence
        that names `written` (the notebook without verdicts), when it is stopped or interrupted."""
        verification_id = f"verify-{uuid.uuid4().hex[:8]}"
        task = asyncio.ensure_future(self._verify(nb, verification_id, runs))
        self._tasks[verification_id] = task  # before any await: an interrupt sent next finds it
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:  # the request itself was cancelled ($/cancelRequest, shutdown)
            task.cancel()
            raise
        finally:
            self._tasks.pop(verification_id, None)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_WAIT)  # its kernel is shut down before the answer
            raise UserError(f"Verification took more than {timeout:g} s and was stopped; {written} was written "
                            f"without verdicts.{self._left_as_is(verification_id)} Export again with a longer "
                            "verifyTimeout.")
        if task.cancelled():
            raise UserError(f"Verification was interrupted; {written} was written without verdicts."
                            f"{self._left_as_is(verification_id)}")
        self._not_put_back.pop(verification_id, None)  # in the summary
        return {"id": verification_id, **task.result()}

    def cancel(self) -> int:
        """Cancel every verification running (interpreter.interrupt); how many there were."""
        for task in self._tasks.values():
            task.cancel()
        return len(self._tasks)

    def keep(self, paths: Iterable[str]) -> None:
        """Workspace paths (relative) the user or a run of the session changed: the verifications running now
        never put them back as their re-run's. (Every run's end calls this: nothing is read without one.)"""
        if not self._session_paths:
            return
        paths = set(paths)
        for kept in self._session_paths.values():
            kept |= paths

    async def close(self) -> None:
        """The server's shutdown: the verifications cancelled and ended, then every kernel they started."""
        running = list(self._tasks.values())
        self.cancel()
        # Their kernels go to the spares' shutdown as they end: awaited before it closes.
        await asyncio.gather(*running, return_exceptions=True)
        await self.spares.close()

    # ---- one verification ---------------------------------------------------------------------------------

    async def _verify(self, nb: Any, verification_id: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
        """The task: the spare fresh kernel if it was started for these settings (else a new one), the re-run,
        the workspace put back, and once it answered, the next verification's spare."""
        from . import verify

        began = time.monotonic()
        key = self._key()
        fresh = await self.spares.take(key) or self._fresh(verification_id)
        session = verify.Session(
            root=self.root, runs=runs, kernel=fresh.kernel, runtime_dir=fresh.runtime_dir, sandbox=fresh.sandbox,
            timeout=self._run_timeout() or None, mask=self._mask, started=fresh.started, began=began,
        )
        await self._files.begin(verification_id)  # its changes are watched, and pre-images taken, as a run's
        self._session_paths[verification_id] = set()
        finished = False
        try:
            await self._undo.before_run(verification_id)
            summary = await verify.verify(nb, session, history_file(self.root))
            finished = True
        finally:
            # Shut down and its directory removed in the background, whatever happened: the answer does not
            # wait for it (~0.1 s), and the server's shutdown does (Spares.close). A re-run stopped midway
            # (interrupt, timeout) may still be writing: its kernel is gone before anything is put back.
            stopping = self.spares.retire(fresh)
            if not finished:
                await asyncio.wait({stopping}, timeout=STOP_WAIT)
            put_back, lost = await self._put_back(verification_id, runs)
        self.spares.prepare(key, lambda: self._fresh(f"verify-{uuid.uuid4().hex[:8]}"))
        return {**summary, "filesPutBack": put_back, "filesNotPutBack": lost}

    async def _put_back(
        self, verification_id: str, runs: list[dict[str, Any]]
    ) -> tuple[list[str], list[dict[str, str]]]:
        """The workspace files the re-run changed, put back as they were: (the paths, what was not and why)."""
        keep = self._session_paths.pop(verification_id, set())
        try:
            await self._files.settle()
            touched = self._files.end(verification_id)
            keep |= self._files.others(verification_id)
            # The tracker's list, and what differs from the snapshot before: a poll that began before the
            # re-run counts that poll's earlier changes as the re-run's too (files.py), which can cancel out
            # one the re-run made (a file the user recreated, then the re-run deleted).
            files = list(touched.files)
            listed = {f.get("path") for f in files}
            net = await self._undo.net_changes(verification_id)
            files += [{"path": path, "change": change} for path, change in sorted(net.items()) if path not in listed]
            self._undo.run_finished(verification_id, files, touched.note)
            code = "\n".join(str(run.get("code", "")) for run in runs)
            put_back, lost = await self._undo.put_back(verification_id, code, keep)
        except Exception as exc:  # the answer still comes; what is left is said
            log.exception("putting back the files verification %s changed failed", verification_id)
            self._undo.forget([verification_id])
            put_back, lost = [], [{"name": "the files the re-run changed", "why": f"putting them back failed: {exc}"}]
        if put_back or lost:
            log.info("verification %s: %d workspace files put back, %d not", verification_id, len(put_back), len(lost))
        self._not_put_back[verification_id] = lost
        return put_back, lost

    def _left_as_is(self, verification_id: str) -> str:
        lost = self._not_put_back.pop(verification_id, None)
        if not lost:
            return ""
        return f" What its re-run changed was put back, except: {named(lost)}."

    def _fresh(self, name: str) -> Fresh:
        runtime_dir = self._runtime_dir() / name
        kernel, sandbox = self._pool.fresh(PYTHON, runtime_dir)
        return Fresh(kernel, runtime_dir, sandbox)
