""":checkhealth interpreter_lsp on this machine: honest about what is there and what is missing."""

from __future__ import annotations

from nvim_harness import SERVER, Editor


def test_checkhealth_reports_ok_here(start_editor, monkeypatch) -> None:
    # As a user who put the venv on PATH and called setup() with no server command.
    monkeypatch.setenv("PATH", f"{SERVER.parent}:/usr/bin:/bin")
    ed: Editor = start_editor(cmd=None)
    ed.open("demo.py")
    lines = ed.helper("checkhealth")
    text = "\n".join(lines)
    assert "ERROR" not in text, text
    assert "interpreter-lsp 0.1.0" in text, text
    assert "python kernel: ipykernel" in text
    assert "shell kernel: bash_kernel" in text
    assert "running (client" in text
    # No model configured and nothing on the local model ports in a test: a warning that says how.
    assert "no model configured" in text or "model:" in text
    assert "bubblewrap available" in text


def test_checkhealth_says_how_to_fix_a_missing_server(start_editor, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    ed: Editor = start_editor(cmd=None)
    text = "\n".join(ed.helper("checkhealth"))
    assert "ERROR interpreter-lsp not found: run :InterpreterInstall (or set cmd)" in text, text
    assert ":InterpreterInstall installs it into" in text


def test_checkhealth_with_a_model_reports_it_reachable(start_editor) -> None:
    from scripted_model import ScriptedModel

    with ScriptedModel() as model:
        ed: Editor = start_editor(settings={"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test"})
        ed.open("demo.py")
        text = "\n".join(ed.helper("checkhealth"))
        assert "model: openai/scripted (as the server reports it)" in text, text
        assert f"model server reachable at {model.base_url}" in text
        assert "ERROR" not in text
