"""The conversation as a Jupyter notebook: text as Markdown cells, code that ran as code cells with
their outputs (nbformat v4). Written by safety/paths.write_inside (atomically, without following links)."""

from __future__ import annotations

from typing import Any

_OUTPUT_KEYS = {
    "stream": ("name", "text"),
    "execute_result": ("data", "metadata"),
    "display_data": ("data", "metadata"),
    "error": ("ename", "evalue", "traceback"),
}


def build(events: list[dict[str, Any]], language: str = "python") -> Any:
    import nbformat
    from nbformat import v4

    cells = []
    count = 0
    for event in events:
        kind = event.get("type")
        if kind == "user":
            cells.append(v4.new_markdown_cell(f"**You:** {event.get('text', '')}"))
        elif kind == "assistant" and event.get("text"):
            cells.append(v4.new_markdown_cell(event["text"]))
        elif kind == "note" and event.get("text"):
            cells.append(v4.new_markdown_cell(f"*{event['text']}*"))
        elif kind == "run":
            count += 1
            outputs = []
            for out in event.get("outputs", []):
                output_type = out.get("output_type")
                if output_type not in _OUTPUT_KEYS:
                    continue
                fields = {k: out[k] for k in _OUTPUT_KEYS[output_type] if k in out}
                if output_type == "execute_result":
                    fields["execution_count"] = count
                outputs.append(nbformat.from_dict({"output_type": output_type, **fields}))
            cell = v4.new_code_cell(event.get("code", ""), execution_count=count, outputs=outputs)
            if event.get("language") and event["language"] != language:
                cell.metadata["language"] = event["language"]
                cell.source = _magic(event["language"]) + cell.source
            if event.get("origin") == "user":
                cell.metadata["tags"] = ["run-by-user"]
            cells.append(cell)
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.validate(nb)
    return nb


def _magic(language: str) -> str:
    return "%%bash\n" if language == "shell" else f"# language: {language}\n"


def dumps(nb: Any) -> bytes:
    import nbformat

    return (nbformat.writes(nb) + "\n").encode("utf-8")
