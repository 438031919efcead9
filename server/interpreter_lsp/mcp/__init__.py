"""Other agents in the workspace kernel, over MCP (docs/agents.md): bridge.py is `interpreter-lsp mcp`,
the MCP server (the official SDK, stdio) an agent starts; listener.py is the language server's end of the
per-workspace socket it talks to; wire.py is that socket's small protocol. Nothing here imports the SDK
but bridge.py, which only the `mcp` process loads."""
