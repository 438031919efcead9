"""Risk rules for shell code, read through a real parser (bashlex) with a word-by-word fallback.

parse.py turns a script into pipelines of simple commands (words, redirects, here-documents); check.py
checks every command by what it does and every pipeline by how its stages feed each other (a download
piped into an interpreter, the environment piped to the network), with the command handlers grouped by
family: files.py, network.py, execution.py, system.py.
"""

from interpreter_lsp.safety.shell.check import assess_shell

__all__ = ["assess_shell"]
