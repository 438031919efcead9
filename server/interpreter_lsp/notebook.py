"""The conversation as a Jupyter notebook: text as Markdown cells, code that ran as code cells with
their outputs (nbformat v4). Written by safety/paths.write_inside (atomically, without following links).

Also what an execution's outputs are kept as (`OutputRecords`): a session's runs (runs.py) and
verification's fresh kernel (verify.py) record them the same way, so what verification compares was kept
alike on both sides."""

from __future__ import annotations

from typing import Any

_OUTPUT_KEYS = {
    "stream": ("name", "text"),
    "execute_result": ("data", "metadata"),
    "display_data": ("data", "metadata"),
    "error": ("ename", "evalue", "traceback"),
}
STREAM_MAX = 100_000  # characters of one stream kept per output (the history stays small)


class OutputRecords:
    """One execution's outputs in nbformat's shape, from its iopub messages: consecutive text of one stream
    joined (bounded), results, displays and errors as they came."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add(self, msg_type: str, content: dict[str, Any]) -> None:
        if msg_type == "stream":
            text = str(content.get("text", ""))
            last = self.records[-1] if self.records else None
            if last and last.get("output_type") == "stream" and last.get("name") == content.get("name"):
                if len(last["text"]) < STREAM_MAX:
                    last["text"] += text[: STREAM_MAX - len(last["text"])]
                return
            self.records.append({"output_type": "stream", "name": content.get("name", "stdout"), "text": text})
        elif msg_type in ("execute_result", "display_data"):
            self.records.append(
                {"output_type": msg_type, "data": content.get("data", {}), "metadata": content.get("metadata", {})}
            )
        elif msg_type == "error":
            self.error(str(content.get("ename", "")), str(content.get("evalue", "")), content.get("traceback", []))

    def error(self, ename: str, evalue: str, traceback: list[str]) -> None:
        self.records.append({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": traceback})


def outputs_of(records: list[dict[str, Any]], count: int) -> list[Any]:
    """nbformat outputs of recorded ones (an execute_result numbered `count`); unknown kinds left out."""
    import nbformat

    outputs = []
    for out in records:
        output_type = out.get("output_type")
        if output_type not in _OUTPUT_KEYS:
            continue
        fields = {k: out[k] for k in _OUTPUT_KEYS[output_type] if k in out}
        if output_type == "execute_result":
            fields["execution_count"] = count
        outputs.append(nbformat.from_dict({"output_type": output_type, **fields}))
    return outputs


def build(events: list[dict[str, Any]], language: str = "python") -> Any:
    """The notebook of `events`, validated once as a whole. Cells are made here, not by nbformat's
    new_*_cell, which validate each cell against the schema on its own (~0.3 ms a cell: a conversation of
    weeks took seconds); what is made is checked all the same, in one pass at the end."""
    import nbformat
    from nbformat.corpus.words import generate_corpus_id
    from nbformat.notebooknode import NotebookNode

    def markdown(text: str) -> NotebookNode:
        return NotebookNode(id=generate_corpus_id(), cell_type="markdown", source=text, metadata=NotebookNode())

    cells = []
    count = 0
    for event in events:
        kind = event.get("type")
        if kind == "user":
            cells.append(markdown(f"**You:** {event.get('text', '')}"))
        elif kind == "assistant" and event.get("text"):
            cells.append(markdown(event["text"]))
        elif kind == "note" and event.get("text"):
            cells.append(markdown(f"*{event['text']}*"))
        elif kind == "run":
            count += 1
            cell = NotebookNode(
                id=generate_corpus_id(), cell_type="code", metadata=NotebookNode(), execution_count=count,
                source=event.get("code", ""), outputs=outputs_of(event.get("outputs", []), count),
            )
            if event.get("language") and event["language"] != language:
                cell.metadata["language"] = event["language"]
                cell.source = _magic(event["language"]) + cell.source
            if event.get("origin") == "user":
                cell.metadata["tags"] = ["run-by-user"]
            cells.append(cell)
    metadata = NotebookNode(
        kernelspec=NotebookNode(name="python3", display_name="Python 3", language="python"),
        language_info=NotebookNode(name="python"),
    )
    return nbformat.v4.new_notebook(cells=cells, metadata=metadata)  # it validates the whole notebook


def _magic(language: str) -> str:
    return "%%bash\n" if language == "shell" else f"# language: {language}\n"


def dumps(nb: Any) -> bytes:
    import nbformat

    return (nbformat.writes(nb) + "\n").encode("utf-8")
