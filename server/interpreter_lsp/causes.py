"""What the history and the cells' source say about a verified export (verify.py): the seeds the cells set,
the modules they import, the workspace files they name (and their sha-256), the runs undo or reset took out
of the conversation, and why a cell that differs differs. Pure functions over text and files (the file
reads run in a worker thread)."""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import Any

from .normalise import Comparison

_SEED = re.compile(
    r"\b(?:(?:np|numpy)\.random\.seed|random\.seed|(?:np\.random\.)?default_rng|torch\.manual_seed"
    r"|tf\.random\.set_seed|set_seed)\(\s*[^)\s][^)]*\)"
)
# Unseeded draws, per generator family, and the seed call that would fix each.
_UNSEEDED = (
    (re.compile(r"(?<![\w.])random\.(?!seed\b|Random\()\w+\(|(?<![\w.])from random import"),
     re.compile(r"(?<![\w.])random\.seed\(\s*[^)\s]")),
    (re.compile(r"\b(?:np|numpy)\.random\.(?!seed\b|default_rng\b|RandomState\b|Generator\b)\w+\("),
     re.compile(r"\b(?:np|numpy)\.random\.seed\(\s*[^)\s]")),
    (re.compile(r"\bdefault_rng\(\s*\)|\bRandomState\(\s*\)|\btorch\.rand"), re.compile(r"(?!x)x")),
)
_CLOCK = re.compile(r"\b(?:time\.(?:time|perf_counter|monotonic|time_ns)|datetime\.(?:now|today|utcnow)|date\.today)\(")
_NETWORK = re.compile(r"\b(?:requests|urllib|httpx|socket|aiohttp|urlopen)\b")
_NAME_ERROR_CAUSE = "NameError"


def dropped_runs(history_path: Path) -> list[dict[str, Any]]:
    """Runs the conversation no longer shows (undone or reset) since the python kernel last restarted or
    died: their variables may still have been in the session's kernel when later cells ran."""
    from .history import History, replay

    raw = History(history_path).load()
    kept = {e.get("runId") for e in replay(list(raw)) if e.get("type") == "run"}
    dropped: list[dict[str, Any]] = []
    for event in raw:
        if event.get("type") == "kernel" and event.get("language") == "python":
            dropped = []
        elif event.get("type") == "run" and event.get("runId") not in kept:
            dropped.append(event)
    return dropped


def seeds(sources: list[str]) -> list[str]:
    return [m.group(0) for src in sources for m in _SEED.finditer(src)]


def imported_modules(sources: list[str]) -> list[str]:
    found: set[str] = set()
    for src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return sorted(found)


def named_files(source: str, root: Path) -> list[str]:
    """Workspace paths named as string literals in a cell (relative to the root), existing or not: what it
    may read. A literal that is not a plausible path (spaces and newlines, too long) is skipped."""
    names: list[str] = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if not text or len(text) > 400 or "\n" in text or "." not in Path(text).name:
                continue
            path = Path(text) if Path(text).is_absolute() else root / text
            try:
                rel = path.resolve().relative_to(root.resolve())
            except (ValueError, OSError):
                continue
            names.append(str(rel))
    return sorted(set(names))


def _hash(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def cause(index: int, comparison: Comparison, sources: list[str], session: Any, root: Path) -> str:
    """Why cell `index` (0-based among code cells) differs, as precisely as the history lets us say."""
    source, earlier = sources[index], sources[: index + 1]
    run = session.runs[index] if index < len(session.runs) else {}
    new_error = comparison.new_error or {}
    for name in named_files(source, root):
        if not (root / name).exists():
            return f"missing input file {name}"
        for later in session.runs[index + 1 :]:
            if any(f.get("path") == name and f.get("change") != "created" for f in later.get("files", [])):
                return f"changed input file {name} (a later run changed it after this cell read it)"
    if new_error.get("ename") in ("FileNotFoundError", "IsADirectoryError"):
        return f"missing input file ({new_error.get('evalue', '')})"[:200]
    if new_error.get("ename") == _NAME_ERROR_CAUSE and session.dropped_runs:
        return f"hidden state from an undone run ({new_error.get('evalue', '')})"[:200]
    if comparison.error_change:
        return comparison.error_change
    if any(draw.search(source) and not any(seed.search(s) for s in earlier) for draw, seed in _UNSEEDED):
        return "seed not set"
    if _CLOCK.search(source):
        return "clock"
    if _NETWORK.search("\n".join(earlier)):
        return "network"
    if session.dropped_runs:
        return "hidden state from an undone run"
    if run.get("origin") == "agent":
        return f"an outside agent's run ({run.get('agent') or 'agent'}): output {comparison.diff}".rstrip(": ")
    agents = [r for r in session.runs[:index] if r.get("origin") == "agent"]
    if agents:
        return f"an outside agent's run before it ({agents[-1].get('agent') or 'agent'}): output {comparison.diff}"
    return f"output: {comparison.diff}" if comparison.diff else "output"


def input_hashes(sources: list[str], root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for source in sources:
        for name in named_files(source, root):
            path = root / name
            if path.is_file() and name not in found and (digest := _hash(path)) is not None:
                found[name] = f"sha256:{digest}"
    return found
