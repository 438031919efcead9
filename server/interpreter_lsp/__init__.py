"""interpreter-lsp: a language server that runs a model's code in a workspace Jupyter kernel."""

__version__ = "0.1.0"
