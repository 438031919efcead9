"""Fixtures of the Neovim tests (the harness itself is nvim_harness.py, a unique module name)."""

from nvim_harness import editor_env, start_editor, workspace

__all__ = ["editor_env", "start_editor", "workspace"]
