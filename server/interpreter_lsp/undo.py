"""Undo of files: what each local run changed in the workspace (its pre-images, preimages.py) and putting it
back, with everything that cannot come back named before anything is changed.

`before_run` snapshots the workspace before a run's code reaches the kernel (runs.py awaits it);
`run_finished` learns from the files tracker which files the run created, wrote or deleted. `plan` says,
for the runs an undo takes back, which files would be written back or removed and what is not restorable
and why (a file it could not copy, a file changed again after the run, a run on a remote kernel, a run of
an earlier session, paths outside the workspace its code names); `apply` carries out a plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import FileChanges
from .preimages import PreimageStore, Signature, Snapshot

log = logging.getLogger(__name__)

# A path written in a run's code, absolute or under ~: quoted (spaces allowed), or bare up to a space or a
# shell operator.
_QUOTED = re.compile(r"""(['"])(~?/[^'"\n]*)\1""")
_BARE = re.compile(r"""(?:^|(?<=[\s=(,>]))(~?/[^\s'"`;|&<>(),]+)""")
_HARMLESS = ("/dev/", "/proc/", "/sys/")
RACY_WAIT = 0.1  # seconds: past preimages.RACY_NS
SNAPSHOT_WAIT = 10.0  # seconds a run waits at most for its pre-images (before_run)


@dataclass
class _RunFiles:
    before: Snapshot
    changes: dict[str, str] = field(default_factory=dict)  # relative path -> created | modified | deleted
    after: dict[str, Signature | None] = field(default_factory=dict)
    incomplete: str | None = None
    broken: str | None = None  # why there is no snapshot of this run
    # Changed through a writable shared map (file_maps.py), found by content: its size and times may be as
    # they were, so "as it was before the run" is asked of its content, not of its signature.
    by_map: set[str] = field(default_factory=set)


@dataclass
class Plan:
    write: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (sha256, mode)
    remove: list[str] = field(default_factory=list)
    changed_since: list[str] = field(default_factory=list)  # changed after the run: overwritten only if forced
    lost: list[dict[str, str]] = field(default_factory=list)  # [{name, why}]
    # The workspace's directories before the earliest run undone (None: not known): a directory not among them
    # that its removals leave empty goes too.
    dirs_before: frozenset[str] | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "restore": sorted(self.write),
            "remove": sorted(self.remove),
            "changedSince": sorted(self.changed_since),
            "notRestorable": self.lost,
        }


@dataclass
class RedoFiles:
    """What a redo of one undo needs for the files: the workspace as the undo found it, the paths the undo
    wrote or removed, and how it left them (a path changed since is kept as it is, and named)."""

    before: Snapshot | None
    why: str | None  # why there is no `before` (the copy failed or took too long)
    paths: list[str] = field(default_factory=list)
    after: dict[str, Signature | None] = field(default_factory=dict)


class FileUndo:
    def __init__(
        self,
        root: Path,
        store: PreimageStore | None = None,
        changes: FileChanges | None = None,
        kernel_pids: Callable[[], list[int]] | None = None,
    ) -> None:
        self.root = root
        self.store = store or PreimageStore(root)
        # The files tracker: when it saw no change since the last walk (and sees everything), that walk's
        # snapshot is the workspace still, and a run does not wait for another (~40 ms for 5,000 files).
        self._changes = changes
        self._last: tuple[int, Snapshot] | None = None  # (the tracker's generation when it began, the walk)
        self._runs: dict[str, _RunFiles] = {}
        self._redo: list[RedoFiles] = []  # the redo points kept: their copies are not collected
        self._lock = asyncio.Lock()
        self._warming: asyncio.Future[None] | None = None
        self._stale = False
        # Writes through a memory map raise no file event (file_maps.py): the local kernels' processes (their
        # pids, asked on the loop), the workspace files they map writable (read after each run), and the run
        # whose changes through them the next snapshot looks for.
        self._kernel_pids = kernel_pids
        self._mapped: set[str] = set()
        self._map_check: str | None = None
        self._maps_reading: tuple[str | None, asyncio.Future[None]] | None = None  # (after which run, the read)

    def warm(self) -> None:
        """Copy what changed now, off any run's path (after a run, when a local kernel is ready): the next
        run's own snapshot then only walks the workspace, unless something changed meanwhile."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a unit test): the next run's snapshot does it
        self._stale = True  # a copy under way may have started before this change: one more after it
        if self._warming is None or self._warming.done():
            self._warming = loop.create_task(self._warm())
            self._warming.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def _warm(self) -> None:
        while self._stale:
            self._stale = False
            await self._read_maps()
            await self._snapshot(walk=True)
            if self.store.racy and not self._stale:
                # Files written just before the walk are read again once their clock tick has passed
                # (preimages.RACY_NS), here rather than on the next run's path.
                await asyncio.sleep(RACY_WAIT)
                self._stale = True

    async def _snapshot(self, *, walk: bool = False) -> Snapshot:
        """The workspace now. `walk`: a walk whenever the tracker saw any change, as the warm-up after a run or an
        undo does (off every run's path): writes through a memory map raise no file event, and only a walk's
        signatures see them. A run's own snapshot brings the last one up to date with what the tracker saw
        instead (what the user saved since the warm-up: O(changes), not O(files))."""
        async with self._lock:  # one snapshot at a time: they share the store's index
            if self.store.used > self.store.limit * 0.8:
                await asyncio.to_thread(self.store.collect, self._needed())
            # After a run (the warm-up, or this run's own snapshot if it comes first), a mapped file is read
            # again whatever its signature says: a write through the map may leave its size and times.
            if self._map_check is not None and not walk:
                await self._read_maps()  # before the warm-up could: the maps as the last run left them
            maps = self._mapped if walk or self._map_check is not None else frozenset()
            self.store.read_again(maps)
            if (known := await self._since_last(update=not walk, also=maps)) is not None:
                self._found_through_maps(known)
                return known
            generation = self._changes.generation if self._changes is not None else None
            snapshot = await asyncio.to_thread(self.store.snapshot)
            # Kept to be brought up to date next time (instead of a walk) only while the tracker sees everything.
            if generation is not None and self._changes is not None and self._changes.sees_everything:
                self._last = (generation, snapshot)
            else:
                self._last = None
            result = snapshot.copy()
            self._found_through_maps(result)
            return result

    async def _read_maps(self) -> None:
        """The workspace files the local kernels map writable and shared now (after a run, off its path). The
        warm-up's read and a run's own one, sent right behind, share one read of the maps as the last run left
        them (both in threads on a 2-core machine: ~2.5 ms each for a kernel with pandas loaded)."""
        run = self._map_check
        reading = self._maps_reading
        # A read after this run, under way or done (`look_at_maps`, the warm-up's), is the maps as it left them.
        if run is None or reading is None or reading[0] != run or reading[1].cancelled():
            reading = (run, asyncio.ensure_future(self._read_maps_now()))
            self._maps_reading = reading
        await asyncio.shield(reading[1])

    def look_at_maps(self) -> None:
        """The maps as the run that just ended left them, read now where that is quick (file_maps.mapped_quickly),
        after its final status left and before the kernel is asked for its variables' snapshot: that snapshot
        forks the kernel, and a fork holds the lock of the kernel's memory map that reading its maps takes
        (measured: 0.22 ms a look beside an idle kernel, 0.37 ms beside one forking). Else the warm-up reads
        them (`_read_maps`)."""
        run = self._map_check
        if run is None or not (pids := self._pids()):
            return
        try:
            looked = self._looked_quickly(pids)
        except Exception:  # never in a run's way: the warm-up reads them
            log.exception("reading the kernels' memory maps failed")
            return
        if looked:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            self._maps_reading = (run, done)

    def _pids(self) -> list[int]:
        return [pid for pid in (self._kernel_pids() if self._kernel_pids is not None else []) if pid]

    def _looked_quickly(self, pids: list[int]) -> bool:
        """The maps read on the loop, where that is quick (a thread hop, beside an editor's messages, took ~3 ms
        of a run sent right behind); False when it is not (they are read in a thread then)."""
        from . import file_maps

        if (mapped := file_maps.mapped_quickly(pids, self.root)) is None:
            return False
        self._mapped = mapped
        return True

    async def _read_maps_now(self) -> None:
        pids = self._pids()
        if not pids and not self._mapped:
            return
        from . import file_maps

        try:
            if not pids:
                self._mapped = set()
            elif not self._looked_quickly(pids):
                self._mapped = await asyncio.to_thread(file_maps.mapped, pids, self.root)
        except Exception:  # never in a run's way; the maps are looked at again after the next run
            log.exception("reading the kernels' memory maps failed")

    async def settled(self) -> None:
        """Before a plan: the last run's changes through memory maps have been looked for (the warm-up after it
        does that, off its path; waited for here, bounded)."""
        if self._map_check is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._snapshot()), SNAPSHOT_WAIT)
        except Exception as exc:  # the plan goes ahead with what is known
            log.warning("looking for changes through memory maps failed: %s", exc)

    def _found_through_maps(self, now: Snapshot) -> None:
        """The first snapshot after a run: a mapped file whose content is not what the run found is that run's
        change (read right after it ended: nothing else wrote it meanwhile but through the map, or the tracker
        would have named it)."""
        run_id, self._map_check = self._map_check, None
        record = self._runs.get(run_id) if run_id is not None else None
        if record is None or record.broken:
            return
        for path in sorted(self._mapped - set(record.changes)):
            before, after = record.before.files.get(path), now.files.get(path)
            # A side not copied (past the store's bounds) cannot be compared: the run may have changed it, and
            # an undo names it (with why it has no copy) rather than say nothing.
            if before is not None and after is not None and (None in (before[1], after[1]) or before[1] != after[1]):
                record.changes[path] = "modified"
                record.after[path] = after[0]
                record.by_map.add(path)

    async def _since_last(self, *, update: bool, also: set[str] | frozenset[str] = frozenset()) -> Snapshot | None:
        """The last snapshot brought up to date without a walk, if the tracker proves what changed since it
        began: its barrier has come out (every change made before now has been seen), no directory came, went
        or moved and no event was missed. Only the files it saw change (and those read too close to the last
        look, or not copied) are looked at again, and `also` (the mapped files): the same snapshot as a walk's, in
        O(changes), not O(files). None: walk."""
        changes, last = self._changes, self._last
        if changes is None or last is None or not changes.sees_everything:
            return None
        if not await changes.caught_up() or not changes.sees_everything:
            return None
        generation = changes.generation
        paths = changes.changed_since(last[0])
        if paths is None or (paths and not update):
            return None
        if paths or also or self.store.racy or last[1].uncopied:
            snapshot = await asyncio.to_thread(self.store.update, last[1], paths | also)
        else:
            snapshot = last[1]  # nothing changed: as it was
        self._last = (generation, snapshot)
        return snapshot.copy()

    def _unchanged_now(self) -> Snapshot | None:
        """The run's pre-images found in this step, when the tracker proves at once that nothing changed since
        the last snapshot (`_since_last`'s case with no path to look at, its barrier read right away): the last
        snapshot as it is. No task, no wait: the run's request goes to the kernel before anything else the loop
        has to do (its start: ~1 ms on a 2-core VM). None: `_snapshot` says, as before."""
        changes, last = self._changes, self._last
        if (
            changes is None or last is None or self._lock.locked() or self._map_check is not None
            or self.store.used > self.store.limit * 0.8 or self.store.racy or last[1].uncopied
        ):
            return None
        if not changes.sees_everything or not changes.caught_up_now() or not changes.sees_everything:
            return None
        generation = changes.generation
        if changes.changed_since(last[0]) != set():
            return None
        self._last = (generation, last[1])
        return last[1].copy()

    def _needed(self) -> set[str]:
        """Blobs an undo may still ask for: the pre-images of the changes of the runs still known, and what a
        redo would write back."""
        return {
            digest
            for record in self._runs.values()
            for path in record.changes
            if (entry := record.before.files.get(path)) is not None and (digest := entry[1]) is not None
        } | {
            digest
            for point in self._redo
            if point.before is not None
            for path in point.paths
            if (entry := point.before.files.get(path)) is not None and (digest := entry[1]) is not None
        }

    # ---- redo ----------------------------------------------------------------------------------------

    async def redo_point(self) -> RedoFiles:
        """Before an undo writes anything: the workspace as it is (copied like a run's pre-images)."""
        try:
            before = await asyncio.wait_for(asyncio.shield(self._snapshot()), SNAPSHOT_WAIT)
        except asyncio.TimeoutError:
            return RedoFiles(None, f"the workspace copy before the undo took over {SNAPSHOT_WAIT:g} s")
        except Exception as exc:
            return RedoFiles(None, f"the workspace could not be copied before the undo ({exc})")
        return RedoFiles(before, None)

    def undone(self, point: RedoFiles, run_ids: list[str], restored: list[str], removed: list[str]) -> RedoFiles:
        """The undo of `run_ids` wrote `restored` and removed `removed`: what a redo puts back, kept until
        `release`. Where that is exactly what an earlier run left (nothing changed the file between that run
        and the first one undone), the file is as the earlier run left it, in another inode: an undo of that
        run next must not take it for a change made after it (it would keep it and say so)."""
        self._written_back(run_ids, {*restored, *removed})
        point.paths = sorted({*restored, *removed})
        point.after = {path: self.store.current(path) for path in point.paths}
        self._redo.append(point)
        return point

    def _written_back(self, run_ids: list[str], paths: set[str]) -> None:
        undone = set(run_ids)
        before_them: list[_RunFiles] = []  # the runs known from before the first one undone, in order
        for run_id, record in self._runs.items():
            if run_id in undone:
                break
            before_them.append(record)
        for path in paths:
            first = next((self._runs[r] for r in run_ids if r in self._runs and path in self._runs[r].changes), None)
            earlier = [record for record in before_them if path in record.changes]
            if first is None or not earlier:
                continue
            entry = first.before.files.get(path)
            if earlier[-1].after.get(path) == (entry[0] if entry is not None else None):
                earlier[-1].after[path] = self.store.current(path)

    def redo_plan(self, point: RedoFiles) -> Plan:
        """Each path the undo changed back as the undo found it; one changed since is kept, and named."""
        plan = Plan()
        for path in point.paths:
            if point.before is None:
                plan.lost.append({"name": path, "why": str(point.why)})
                continue
            now = self.store.current(path)
            if now != point.after.get(path):
                plan.lost.append({"name": path, "why": "it changed after the undo (kept as it is now)"})
                continue
            entry = point.before.files.get(path)
            if entry is None:
                if path in point.before.uncopied:
                    plan.lost.append({"name": path, "why": point.before.uncopied[path]})
                elif now is not None:
                    plan.remove.append(path)  # the runs had deleted it; the undo put it back
            elif entry[1] is None:
                plan.lost.append({"name": path, "why": point.before.uncopied.get(path, "it was not copied")})
            else:
                plan.write[path] = (entry[1], stat.S_IMODE(entry[0][4]))
        return plan

    def redone(self, point: RedoFiles, run_ids: list[str]) -> None:
        """The redo wrote the runs' files back: an undo of those runs compares with these, not with the
        versions the runs wrote (same content, another inode and time)."""
        for run_id in run_ids:
            record = self._runs.get(run_id)
            if record is not None:
                for path in record.changes:
                    if path in point.paths:
                        record.after[path] = self.store.current(path)
        self.release(point)

    def release(self, point: RedoFiles) -> None:
        """No redo will use `point`: its copies may be collected."""
        with contextlib.suppress(ValueError):
            self._redo.remove(point)

    async def before_run(self, run_id: str) -> None:
        if (known := self._unchanged_now()) is not None:
            self._runs[run_id] = _RunFiles(known)
            return
        try:
            # Bounded: a run never waits long on its pre-images (a huge workspace, a copy stuck on a slow
            # disk); past the bound it goes ahead, the copy goes on, and undo names this run's files as lost.
            snapshot = await asyncio.wait_for(asyncio.shield(self._snapshot()), SNAPSHOT_WAIT)
        except asyncio.TimeoutError:
            log.warning("no pre-images for run %s: the workspace copy took over %g s", run_id, SNAPSHOT_WAIT)
            why = f"the workspace copy before the run took over {SNAPSHOT_WAIT:g} s"
            self._runs[run_id] = _RunFiles(Snapshot({}), broken=why)
            return
        except Exception as exc:  # the run goes ahead; undo names what it changed as not restorable
            log.warning("no pre-images for run %s: %s", run_id, exc)
            why = f"the workspace could not be copied before the run ({exc})"
            self._runs[run_id] = _RunFiles(Snapshot({}), broken=why)
            return
        self._runs[run_id] = _RunFiles(snapshot)

    def run_finished(self, run_id: str, files: list[dict[str, str]], note: str | None) -> list[dict[str, str]]:
        """Record what the run changed; returns its list of files, each named created only if it was not
        there when the run started (the run's own snapshot says: a file renamed over one that was there, an
        editor's or a library's safe save, reaches the watcher as a creation)."""
        record = self._runs.get(run_id)
        if record is None or record.broken:
            return files
        before = record.before
        files = [
            {**f, "change": "modified"}
            if f.get("change") == "created" and (f.get("path") in before.files or f.get("path") in before.uncopied)
            else f
            for f in files
        ]
        record.changes = {f["path"]: f["change"] for f in files if "path" in f}
        record.after = {path: self.store.current(path) for path in record.changes}
        if note and "may be incomplete" in note:
            record.incomplete = note
        self._map_check = run_id
        self.warm()
        return files

    def forget(self, run_ids: list[str] | None = None) -> None:
        """Runs no undo can reach any more (undone; all of them: the conversation was reset)."""
        for run_id in list(self._runs) if run_ids is None else run_ids:
            self._runs.pop(run_id, None)

    def plan(self, events: list[dict[str, Any]], *, remote: bool, force: bool) -> Plan:
        """What undoing `events` (the conversation's dropped events, in order) does to the files."""
        plan = Plan()
        runs = [e for e in events if e.get("type") == "run"]
        first: dict[str, tuple[_RunFiles, str]] = {}  # path -> the earliest run that changed it
        last: dict[str, _RunFiles] = {}
        earliest = self._runs.get(str(runs[0].get("runId"))) if runs else None
        if earliest is not None and not earliest.broken:
            plan.dirs_before = earliest.before.dirs
        for event in runs:
            run_id = str(event.get("runId"))
            record = self._runs.get(run_id)
            if record is None:
                if remote and event.get("language"):
                    plan.lost.append({
                        "name": f"files run {run_id} changed",
                        "why": "it ran on a remote kernel (a gateway): the server cannot see or restore that "
                        "machine's files",
                    })
                for touched in event.get("files") or []:
                    plan.lost.append({
                        "name": str(touched.get("path")),
                        "why": "its pre-image is not kept: the run was in an earlier session of the server",
                    })
                continue
            if record.incomplete:
                plan.lost.append({"name": f"files run {run_id} changed beyond those listed", "why": record.incomplete})
            for path in record.changes:
                if record.broken:
                    plan.lost.append({"name": path, "why": record.broken})
                    continue
                first.setdefault(path, (record, run_id))
                last[path] = record
        for path, (record, _run_id) in first.items():
            before = record.before.files.get(path)
            if before is None:
                if path in record.before.uncopied:
                    plan.lost.append({"name": path, "why": record.before.uncopied[path]})
                    continue
                target: tuple[str, int] | None = None  # did not exist: remove it
            elif before[1] is None:
                plan.lost.append({"name": path, "why": record.before.uncopied.get(path, "it was not copied")})
                continue
            else:
                target = (before[1], stat.S_IMODE(before[0][4]))
            now = self.store.current(path)
            if before is not None and now == before[0] and path not in record.by_map:
                continue  # as it was before the run (a change attributed to it that was not its own)
            if now != last[path].after.get(path):
                plan.changed_since.append(path)
                if not force:
                    plan.lost.append({
                        "name": path,
                        "why": "it changed again after the run (kept as it is now; undo with confirm: true "
                        "restores it anyway)",
                    })
                    continue
            if target is None:
                if now is not None:
                    plan.remove.append(path)
            else:
                plan.write[path] = target
        for shown in _outside_paths(runs, self.root):
            plan.lost.append({
                "name": shown,
                "why": f"outside the workspace: undo restores files in {self.root} only; if a run wrote it, "
                "it stays as the run left it",
            })
        return plan

    async def net_changes(self, run_id: str) -> dict[str, str]:
        """What differs in the workspace now from its snapshot before `run_id`, by a stat walk: what a files
        tracker may have missed or attributed away (a poll that saw a file made and removed, a queue that
        overflowed). {} without a snapshot."""
        record = self._runs.get(run_id)
        if record is None or record.broken:
            return {}
        return await asyncio.to_thread(self.store.changes_since, record.before)

    async def put_back(self, run_id: str, code: str, keep: set[str]) -> tuple[list[str], list[dict[str, str]]]:
        """Put back what `run_id` (run_finished already) wrote, created or deleted, as nobody asked for it: a
        verification's re-run. Paths in `keep` (a run of the session changed them meanwhile, or the editor saved
        them) stay as they are and are named. Returns (the paths put back, what was not and why); the run is
        forgotten."""
        await self.settled()
        plan = self.plan([{"type": "run", "runId": run_id, "code": code}], remote=False, force=False)
        for path in sorted(keep & (set(plan.write) | set(plan.remove))):
            plan.write.pop(path, None)
            with contextlib.suppress(ValueError):
                plan.remove.remove(path)
            plan.lost.append({"name": path, "why": "the user changed it meanwhile (a run of the session, or saved in "
                              "the editor): kept as it is"})
        restored, removed, failed = await self.apply(plan)
        self.forget([run_id])
        return sorted(restored + removed), plan.lost + failed

    async def apply(self, plan: Plan) -> tuple[list[str], list[str], list[dict[str, str]]]:
        """(restored, removed, failed) — blocking work in a worker thread."""
        return await asyncio.to_thread(self._apply, plan)

    def _apply(self, plan: Plan) -> tuple[list[str], list[str], list[dict[str, str]]]:
        from .safety.paths import remove_inside, write_inside

        restored: list[str] = []
        removed: list[str] = []
        failed: list[dict[str, str]] = []
        # Removals first: a link or file the runs made where a directory was goes before the files written
        # back under that directory (written first, they would be refused as going through the link).
        for path in sorted(plan.remove):
            try:
                # Never through a link: neither the file (unlink removes a link, not its target) nor any of its
                # directories (kernel code may swap one for a link to elsewhere meanwhile).
                remove_inside(self.root, path)
                removed.append(path)
            except FileNotFoundError:
                removed.append(path)  # gone already: what undo wanted
            except Exception as exc:
                failed.append({"name": path, "why": f"could not be removed: {exc}"})
        for path, (digest, mode) in sorted(plan.write.items()):
            try:
                write_inside(self.root, path, self.store.content(digest), overwrite=True, mode=mode)
                restored.append(path)
            except Exception as exc:  # UserError (a link in the way) or OSError: said, never silent
                failed.append({"name": path, "why": f"could not be written back: {exc}"})
        if plan.dirs_before is not None:
            self._remove_new_empty_dirs(removed, plan.dirs_before)
        return restored, removed, failed

    def _remove_new_empty_dirs(self, removed: list[str], before: frozenset[str]) -> None:
        """The directories above removed files that were not there before the runs and are empty now (`out/` of
        an undone `out/a.txt`), deepest first. rmdir removes neither a link nor a directory with anything in it,
        so whatever is there now (the user's new file, a link swapped in) stays."""
        from .safety.paths import rmdir_inside

        candidates: set[str] = set()
        for path in removed:
            parent = os.path.dirname(path)
            while parent and parent not in before:
                candidates.add(parent)
                parent = os.path.dirname(parent)
        for directory in sorted(candidates, key=lambda d: d.count("/"), reverse=True):
            with contextlib.suppress(Exception):  # not empty, gone, or a link in the way: it stays
                rmdir_inside(self.root, directory)


def _outside_paths(runs: list[dict[str, Any]], root: Path) -> list[str]:
    """Paths outside the workspace that the runs' code names (what they wrote there is not restorable).
    Only named: the server cannot see writes outside the workspace, and a path built at run time is not
    in the code (the note says so in general)."""
    real_root = os.path.realpath(root)
    found: list[str] = []
    for event in runs:
        code = str(event.get("code", ""))
        named = [m.group(2) for m in _QUOTED.finditer(code)] + _BARE.findall(_QUOTED.sub(" ", code))
        for text in named:
            path = os.path.realpath(os.path.expanduser(text))
            if path == real_root or path.startswith(real_root + os.sep) or path.startswith(_HARMLESS):
                continue
            if os.path.isdir(path) or text in found:
                continue
            found.append(text)
    return found
