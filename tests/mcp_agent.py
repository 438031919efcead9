"""Another agent, as a user has one: the MCP SDK's client with `interpreter-lsp mcp` started in the
workspace (docs/agents.md). It waits for the editor's server to open the workspace's socket, asks to run
one line of code, and writes the tool's answer to a file. The editor tests start it beside a real editor:

    python tests/mcp_agent.py WORKSPACE ANSWER_FILE AGENT_NAME
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import Implementation

from interpreter_lsp.kernels import runtime

CODE = "print('from the agent', 6 * 7)"


def wait_for_the_editor(workspace: Path) -> None:
    deadline = time.monotonic() + 60
    while not runtime.agent_socket(workspace).exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the editor's server opens the workspace's socket as it starts


async def main(workspace: Path, name: str) -> str:
    params = StdioServerParameters(command=sys.executable, args=["-m", "interpreter_lsp", "mcp"], cwd=str(workspace))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, client_info=Implementation(name=name, version="1")) as client:
            await client.initialize()
            result = await client.call_tool("run_code", {"code": CODE})
            return ("error: " if result.is_error else "") + result.content[0].text


if __name__ == "__main__":
    wait_for_the_editor(Path(sys.argv[1]))
    Path(sys.argv[2]).write_text(asyncio.run(main(Path(sys.argv[1]), sys.argv[3])))
