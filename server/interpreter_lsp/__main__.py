"""Command line: `interpreter-lsp` (stdio, the default), `--tcp HOST:PORT`, `--version`; and
`interpreter-lsp mcp [--workspace DIR]`, the MCP server other agents add (mcp/bridge.py, docs/agents.md).

Exit codes: 0 after `shutdown` then `exit`; 1 for an `exit` without `shutdown` (the LSP specification);
2 for a bad command line (an unknown option, a `--log-file` that cannot be written), in one line on stderr.

stdout is the LSP wire. Before anything else is imported, the real stdout is kept on a private file
descriptor for pygls, and fd 1 (inherited by every child process: kernels, shells) is pointed at
stderr, so nothing that prints can corrupt the wire. For `mcp`, stdout is the MCP wire instead: the SDK's
stdio server keeps it the same way while it serves (and that process starts no kernels)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO, NoReturn


def _protect_stdout() -> BinaryIO:
    wire = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return wire


def _protect_stdin() -> BinaryIO:
    """The wire's input, on a private descriptor; fd 0 becomes /dev/null so no child reads the wire."""
    wire = os.fdopen(os.dup(0), "rb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return wire


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="interpreter-lsp",
        description="A language server that runs a model's code, with your approval, in a workspace Jupyter kernel.",
    )
    parser.add_argument("--version", action="version", version=f"interpreter-lsp {__version__}")
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen for one client over TCP instead of stdio")
    parser.add_argument("--log-file", metavar="PATH", help="write the log here (default: stderr)")
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default WARNING"
    )
    return parser.parse_args(argv)


def _configure_logging(path: str | None, level: str) -> None:
    """Raises OSError when the log file cannot be opened for appending."""
    import logging

    handler: logging.Handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # pygls logs every message body at INFO: keep it quieter unless asked for DEBUG.
    logging.getLogger("pygls").setLevel(level if level == "DEBUG" else "WARNING")


def _mcp(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="interpreter-lsp mcp",
        description="An MCP server (stdio) that lets another agent run code in this workspace's kernel, each call "
        "approved by you in the editor that has the workspace open.",
    )
    parser.add_argument(
        "--workspace", metavar="DIR", help="the workspace folder (default: the current directory or a parent of it)"
    )
    parser.add_argument(
        "--max-wait",
        type=float,
        default=50.0,
        metavar="SECONDS",
        help="how long a call waits for the decision and the run before it returns a run id to poll (default 50)",
    )
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default WARNING"
    )
    args = parser.parse_args(argv)
    _configure_logging(None, args.log_level)
    try:
        from .mcp.bridge import main as serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        # The MCP SDK (and the web stack it brings) is the `agents` extra: a plain install stays light and
        # installs beside a project's own pins (docs/install.md).
        print(
            "interpreter-lsp mcp needs the MCP SDK, which is the 'agents' extra: install the server with it, "
            "e.g. pipx install './interpreter-lsp[agents]' (from a clone), or pip install mcp into the server's "
            "own environment (docs/agents.md).",
            file=sys.stderr,
        )
        return 2

    return serve(args.workspace, max(0.0, args.max_wait))


def main(argv: list[str] | None = None) -> int:  # returns only for a bad command line (2)
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["mcp"]:
        return _mcp(arguments[1:])
    args = _parse(argv)
    log_file = os.path.expanduser(args.log_file) if args.log_file else None
    try:
        _configure_logging(log_file, args.log_level)
    except OSError as exc:
        # One line, like argparse's own errors (exit code 2): the client shows stderr to the user.
        reason = exc.strerror or str(exc)
        print(
            f"interpreter-lsp: cannot write the log file {log_file}: {reason}; pass a writable --log-file "
            "path (its directory must exist) or leave it out to log to stderr",
            file=sys.stderr,
        )
        return 2
    stdio = not args.tcp
    wire_out = _protect_stdout() if stdio else None
    wire_in = _protect_stdin() if stdio else None

    from . import code_cache

    # Before pygls and lsprotocol: the ~550 classes lsprotocol makes at import compile from the cache.
    code_cache.install()
    from .safety.secrets import protect_server_environment
    from .server import create_server, kill_kernels_now

    code_cache.save()  # a first start's compiles (later starts find them all: nothing to write)

    # Kernels of the same user must not read the provider keys in our /proc/<pid>/environ.
    protect_server_environment()

    server = create_server()
    code = 0
    try:
        if args.tcp:
            host, _, port = args.tcp.rpartition(":")
            if not port.isdigit():
                print(f"--tcp wants HOST:PORT, e.g. 127.0.0.1:2087; got {args.tcp!r}", file=sys.stderr)
                return 2
            server.start_tcp(host or "127.0.0.1", int(port))
        else:
            from .transport import serve_stdio

            assert wire_in is not None and wire_out is not None
            code = serve_stdio(server, wire_in, wire_out)
    finally:
        kill_kernels_now(server)
    _exit_now(code)


def _exit_now(code: int) -> NoReturn:
    """Exit without the interpreter's finalization. With litellm loaded it spends 1-3 s of CPU tearing down
    modules and objects the process drops anyway, and the editor that is closing waits for the process
    (or kills it). What matters is done by now: the workspaces shut down (history closed, kernels ended),
    every kernel tree killed, the wire unbuffered; the log is flushed here."""
    import logging

    from . import code_cache

    code_cache.save()  # what cattrs compiled for the messages of this session, if new
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
