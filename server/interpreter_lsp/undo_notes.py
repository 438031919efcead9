"""What undo and redo say: the scope an undo takes back, and the notes the panel shows and the model reads
after an undo or a redo (files, variables, and by name what did not come back). Words only: undo.py and
variable_undo.py do the work."""

from __future__ import annotations

from typing import Any


def undo_scope(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What of the conversation an undo takes back: the request's text (or the user's run) and its runs."""
    first = events[0] if events else {}
    runs = [str(e.get("runId")) for e in events if e.get("type") == "run"]
    if first.get("type") == "user":
        return {"request": str(first.get("text", "")), "runs": runs}
    return {"request": None, "runs": runs}


def _state_said(
    restored: list[str], removed: list[str], removed_why: str, variables: list[str], removed_variables: list[str],
    removed_variables_why: str, lost: list[dict[str, str]],
) -> tuple[str, str, str]:
    """(the files, the variables, what did not come back) in words, for the notes of undo and redo; the files
    part is empty when none changed (each note says so its own way)."""
    files = []
    if restored:
        files.append(f"restored {', '.join(restored)}")
    if removed:
        files.append(f"removed {', '.join(removed)}{removed_why}")
    kernel = []
    if variables:
        kernel.append(f"restored {', '.join(variables)}")
    if removed_variables:
        kernel.append(f"removed {', '.join(removed_variables)}{removed_variables_why}")
    return "; ".join(files), "; ".join(kernel) or "none needed restoring", named(lost) or "nothing"


def named(lost: list[dict[str, str]]) -> str:
    """What did not come back, in words: "a.txt (why); b.txt (why)" ("" for nothing)."""
    return "; ".join(f"{item['name']} ({item['why']})" for item in lost)


def redo_note(
    restored: list[str],
    removed: list[str],
    lost: list[dict[str, str]],
    variables: list[str],
    removed_variables: list[str],
) -> tuple[str, str]:
    """The panel's note and what the model reads after a redo."""
    files, said, not_back = _state_said(
        restored, removed, " (deleted by the redone runs)", variables, removed_variables, "", lost
    )
    files = files or "none needed restoring"
    text = f"↷ Redone. Files: {files}. Variables: {said}. Not restored: {not_back}."
    for_model = (
        "The user redid what the last undo took back: the request and runs above are back, and so is the state "
        f"they left. Workspace files: {files}. Python variables: {said}. Not restored: {not_back}. "
        "Take this state as it is now."
    )
    return text, for_model


def undo_note(
    restored: list[str],
    removed: list[str],
    lost: list[dict[str, str]],
    variables: list[str] | None = None,
    created_variables: list[str] | None = None,
) -> tuple[str, str]:
    """The panel's note and what the model reads after an undo that took back runs."""
    created = " (created by the undone runs)"
    files, said, not_back = _state_said(
        restored, removed, created, variables or [], created_variables or [], created, lost
    )
    files = files or "no workspace file needed restoring"
    text = f"↶ Undone. Files: {files}. Variables: {said}. Not restored: {not_back}."
    for_model = (
        "The user undid the last request and the runs that followed it. Workspace files: "
        f"{files}. Python variables: {said}. Not restored: {not_back}. Files outside "
        "the workspace are never restored; the state of imported modules (random generators, settings) and the "
        "working directory are not either. Take this state as it is now."
    )
    return text, for_model
