"""A real LSP client over stdio driving a real server process (pytest-lsp's client), plus a record of
every interpreter/* notification, with bounded waits on events (never sleeps)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import pytest
from lsprotocol import types as t
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, default_converter
from pytest_lsp import client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, LanguageClient, register_lsp_features

from interpreter_lsp import code_cache
from interpreter_lsp import protocol as p
from interpreter_lsp.safety.secrets import is_secret_name

DEFAULT_WAIT = 60.0  # generous: a kernel start or the litellm import on a busy 2-core machine


def _plain(value: Any) -> Any:
    """Notifications of custom methods arrive as namedtuples: turn them back into JSON-like values."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Session:
    """One editor session: the client, the workspace folder, and what the server told the editor."""

    def __init__(self, client: LanguageClient, root: Path) -> None:
        self.client = client
        self.root = root
        self.notes: dict[str, list[dict[str, Any]]] = defaultdict(list)
        # Called synchronously on each notification (before it is recorded), for lean waiting.
        self.listeners: dict[str, list[Callable[[dict[str, Any]], None]]] = defaultdict(list)
        self._changed = asyncio.Condition()
        self.input_answers: list[str | None] = []
        self.input_prompts: list[dict[str, Any]] = []
        self.edits: list[t.ApplyWorkspaceEditParams] = []
        self.apply_edits = True
        self.code_cache: Path | None = None  # the server's cache of generated code (harness: shared)
        # window/showMessageRequest: what the server asked, and the title of the action to answer with.
        self.message_requests: list[t.ShowMessageRequestParams] = []
        self.message_answer: str | None = None
        self.shown_before_request: list[list[str]] = []  # window/showMessage texts when each question came
        self.init_result: t.InitializeResult | None = None
        for method in p.ALL_NOTIFICATIONS:
            client.feature(method)(self._recorder(method))
        client.on_progress = [lambda: asyncio.get_running_loop().create_task(self._notify())]  # type: ignore[attr-defined]

        async def answer_input(params: Any) -> dict[str, Any] | None:
            return await self._answer_input(params)

        def apply_edit(params: t.ApplyWorkspaceEditParams) -> t.ApplyWorkspaceEditResult:
            return self._apply_edit(params)

        def message_request(params: t.ShowMessageRequestParams) -> t.MessageActionItem | None:
            self.message_requests.append(params)
            self.shown_before_request.append([m.message for m in client.messages])
            asyncio.get_running_loop().create_task(self._notify())
            return None if self.message_answer is None else t.MessageActionItem(title=self.message_answer)

        client.feature(p.INPUT)(answer_input)
        client.feature(t.WORKSPACE_APPLY_EDIT)(apply_edit)
        client.feature(t.WINDOW_SHOW_MESSAGE_REQUEST)(message_request)

    def _recorder(self, method: str) -> Callable[[Any], None]:
        def record(params: Any) -> None:
            params = _plain(params)
            for listener in self.listeners[method]:
                listener(params)
            self.notes[method].append(params)
            asyncio.get_running_loop().create_task(self._notify())

        return record

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _answer_input(self, params: Any) -> dict[str, Any] | None:
        self.input_prompts.append(_plain(params))
        answer = self.input_answers.pop(0) if self.input_answers else None
        return None if answer is None else {"value": answer}

    def _apply_edit(self, params: t.ApplyWorkspaceEditParams) -> t.ApplyWorkspaceEditResult:
        self.edits.append(params)
        return t.ApplyWorkspaceEditResult(applied=self.apply_edits)

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = DEFAULT_WAIT, what: str = "") -> Any:
        """Wait until predicate() is truthy (re-checked on every notification), bounded."""

        async def check() -> Any:
            async with self._changed:
                while not (result := predicate()):
                    await self._changed.wait()
                return result

        try:
            return await asyncio.wait_for(check(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what or predicate}") from None

    # ---- commands ---------------------------------------------------------------------------------------

    async def command(self, name: str, args: Any = None, timeout: float = DEFAULT_WAIT) -> Any:
        arguments = [] if args is None else [args]
        result = await asyncio.wait_for(
            self.client.workspace_execute_command_async(t.ExecuteCommandParams(command=name, arguments=arguments)),
            timeout,
        )
        return _plain(result)

    async def run(self, code: str, language: str | None = None, **extra: Any) -> str:
        args: dict[str, Any] = {"code": code, **extra}
        if language:
            args["language"] = language
        return (await self.command(p.RUN, args))["runId"]

    def statuses(self, run_id: str) -> list[dict[str, Any]]:
        return [n for n in self.notes[p.RUN_STATUS] if n["runId"] == run_id]

    def outputs(self, run_id: str) -> list[dict[str, Any]]:
        return [n for n in self.notes[p.OUTPUT] if n["runId"] == run_id]

    def text(self, run_id: str, kinds: tuple[str, ...] = ("stdout", "stderr", "result", "error")) -> str:
        return "".join(o.get("text", "") or "" for o in self.outputs(run_id) if o["kind"] in kinds)

    async def finished(self, run_id: str, timeout: float = DEFAULT_WAIT) -> dict[str, Any]:
        """The run's final runStatus, once it arrives."""

        def final() -> dict[str, Any] | None:
            for status in self.statuses(run_id):
                if status["state"] in p.FINAL_RUN_STATES:
                    return status
            return None

        return await self.wait_for(final, timeout, f"run {run_id} to finish")

    async def run_and_wait(self, code: str, language: str | None = None, timeout: float = DEFAULT_WAIT, **extra: Any):
        run_id = await self.run(code, language, **extra)
        status = await self.finished(run_id, timeout)
        return run_id, status

    # ---- documents -----------------------------------------------------------------------------------------

    def open(self, name: str, text: str, language_id: str = "python") -> str:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        uri = path.as_uri()
        self.client.text_document_did_open(
            t.DidOpenTextDocumentParams(
                text_document=t.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text)
            )
        )
        return uri


def _json_converter():
    """pygls turns params of custom methods into namedtuples, renaming keys such as "text/plain":
    keep them as the JSON objects a real editor receives."""
    converter = default_converter()
    for cls in (JsonRPCNotification, JsonRPCRequestMessage):
        converter.register_structure_hook(cls, lambda obj, cls: cls(**obj))

    # lsprotocol 2025.0.0 reads every code action that has a `command` as a bare Command; editors tell
    # them apart by whether `command` is a string, and so do we.
    def code_action(obj: Any, _type: Any) -> t.Command | t.CodeAction:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, t.Command)
        return converter.structure(obj, t.CodeAction)

    converter.register_structure_hook(Union[t.Command, t.CodeAction], code_action)  # noqa: UP007
    return converter


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=_json_converter)
    keep_reports = DEFAULT_CLIENT_FEATURES[t.PROGRESS]

    def progress(client: LanguageClient, params: t.ProgressParams) -> None:
        """pytest-lsp's (client.progress_reports), and a session's waits re-check (Session.wait_for)."""
        keep_reports(client, params)
        for changed in getattr(client, "on_progress", ()):
            changed()

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, t.PROGRESS: progress})
    return client


def descendants(pid: int) -> set[int]:
    """Every process under `pid` now (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


async def wait_exited(pids: list[int], timeout: float, describe: Callable[[int], str]) -> None:
    """Wait for each process to exit, on its pidfd (readable once it exits), bounded; `describe(pid)` says
    what is wrong if one still runs."""
    loop = asyncio.get_running_loop()
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        exited = loop.create_future()
        loop.add_reader(fd, lambda f=exited: f.done() or f.set_result(None))
        try:
            await asyncio.wait_for(exited, timeout)
        except asyncio.TimeoutError:
            raise AssertionError(describe(pid)) from None
        finally:
            loop.remove_reader(fd)
            os.close(fd)


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def server_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: isolated user config/state, no model configured unless a test says so,
    no API key or token (as a user of a local model has none) and no pointer to a local model server: a
    test that needs one passes it in `extra`."""
    dropped = ("PYTEST_", "COV_", "OLLAMA_", "LM_STUDIO_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and not is_secret_name(k)}
    env.update(
        {
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    env.update(extra or {})
    return env


async def start_session(
    root: Path,
    home: Path,
    *,
    profile: str = "visual-studio-code",
    init_options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    server_args: tuple[str, ...] = (),
    command_prefix: tuple[str, ...] = (),
    trusted: bool | None = True,
    warm_code_cache: bool = True,
) -> Session:
    """`command_prefix`: what the server runs under (e.g. `setpriv` to run it as another user).
    `warm_code_cache`: the server finds its cache of generated code warm (`_warm_code_cache`), as a user's
    does after the first start; False: as at a first start.
    `trusted`: what the client says of the workspace's trust, as VS Code and Neovim do (a test workspace is
    the test's own: trusted); None says nothing, as a generic LSP editor does (the server then trusts
    nothing). `init_options` may say `trusted` too, and wins."""
    client = make_client()
    session = Session(client, root)
    if configuration is not None:
        client.set_configuration(configuration, section="interpreter")
    command = (*command_prefix, sys.executable, "-m", "interpreter_lsp", *server_args)
    environ = server_env(home, env)
    if warm_code_cache:
        session.code_cache = _warm_code_cache(environ)
    await client.start_io(command[0], *command[1:], env=environ, cwd=str(root))
    capabilities = client_capabilities(profile)
    session.init_result = await asyncio.wait_for(
        client.initialize_session(
            t.InitializeParams(
                capabilities=capabilities,
                root_uri=root.as_uri(),
                workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
                initialization_options={
                    "capabilities": {"input": True},
                    **({} if trusted is None else {"trusted": trusted}),
                    **(init_options or {}),
                },
            )
        ),
        DEFAULT_WAIT,
    )
    return session


async def stop_session(session: Session) -> None:
    try:
        await asyncio.wait_for(session.client.shutdown_session(), DEFAULT_WAIT)
    finally:
        await session.client.stop()
        if session.code_cache is not None:
            _share_code_cache(session.code_cache)


# One copy of the servers' cache of generated code (code_cache.py) for every test session of this user: each
# test's home (and so its XDG_CACHE_HOME) is its own, and a cold cache costs each server start ~200 ms of CPU.
SHARED_CODE_CACHE = Path(tempfile.gettempdir()) / f"interpreter-lsp-tests-{os.getuid()}"


def _shared_code_cache() -> Path | None:
    with contextlib.suppress(OSError):
        SHARED_CODE_CACHE.mkdir(mode=0o700, exist_ok=True)
        st = SHARED_CODE_CACHE.lstat()
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return SHARED_CODE_CACHE / code_cache.FILE_NAME
    return None  # not this user's own private directory: every server starts cold


def _warm_code_cache(environ: dict[str, str]) -> Path | None:
    """Copy the shared cache where this session's server looks for it (unless a test put one there); the
    session's own file, which stop_session shares back if it holds more."""
    own = code_cache.cache_file(environ)
    shared = _shared_code_cache()
    if own is not None and shared is not None and shared.exists() and not own.exists():
        with contextlib.suppress(OSError):
            own.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copyfile(shared, own)
            own.chmod(0o600)
    return own


def _share_code_cache(own: Path) -> None:
    shared = _shared_code_cache()
    with contextlib.suppress(OSError):
        if shared is not None and own.stat().st_size > (shared.stat().st_size if shared.exists() else 0):
            tmp = shared.with_name(f"{shared.name}.{os.getpid()}.tmp")
            shutil.copyfile(own, tmp)
            os.replace(tmp, shared)


def assert_shape(cls: type, value: Any, where: str = "") -> None:
    """`value` (a command's result, as the client received it) has exactly the shape protocol.py declares
    for it in `cls`: every required field, no field the class does not name, and each value of its type
    (nested classes and lists of them checked the same way). The contract, checked from the wire side."""
    import types
    import typing

    import attrs

    where = where or cls.__name__
    assert isinstance(value, dict), f"{where}: {value!r} is not an object"
    hints = typing.get_type_hints(cls)
    fields = {p_camel(f.name): f for f in attrs.fields(cls)}
    extra = set(value) - set(fields)
    assert not extra, f"{where}: fields the protocol does not declare: {sorted(extra)}"
    for key, field in fields.items():
        if key not in value:
            assert field.default is not attrs.NOTHING, f"{where}.{key}: missing"
            continue
        _check_type(hints[field.name], value[key], f"{where}.{key}", types, typing)


def _check_type(tp: Any, value: Any, where: str, types: Any, typing: Any) -> None:
    import attrs

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        (tp,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
    if attrs.has(tp):
        assert_shape(tp, value, where)
    elif origin is list:
        assert isinstance(value, list), f"{where}: {value!r} is not a list"
        for i, item in enumerate(value):
            _check_type(args[0], item, f"{where}[{i}]", types, typing)
    elif tp is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{where}: {value!r} is not a number"
    elif tp in (str, int, bool):
        assert isinstance(value, tp), f"{where}: {value!r} is not {tp.__name__}"


def p_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
