"""Lazy, off-loop imports of the model clients: litellm, and the direct one (llm/direct.py).

Importing litellm takes seconds and ~200 MB, so it never happens at module import or on the path of
`initialize`, and only for the providers that need it (llm/routes.py). `start_warm_up()` (called after
`initialized`) imports it in a daemon thread; `await get_litellm()` waits for that import without
blocking the event loop. The direct client (httpx, httpx-sse: ~60 ms) is imported the same way by
`start_direct_warm_up()` / `await get_direct()`, so a chat sent the instant the server is ready waits for
that alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sys
import threading
from types import ModuleType

from interpreter_lsp import heap
from interpreter_lsp.imports import retrying_deadlocks
from interpreter_lsp.llm.errors import UNAVAILABLE, ModelError

log = logging.getLogger(__name__)

_lock = threading.Lock()
_future: concurrent.futures.Future[ModuleType] | None = None
_direct: concurrent.futures.Future[ModuleType] | None = None

PROVIDERS_EXTRA = "pip install 'interpreter-lsp[providers]'"

# litellm's loggers; its own handler sends records below WARNING to sys.stdout (the LSP wire).
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def start_warm_up() -> None:
    """Start importing litellm in a background thread (once; later calls do nothing)."""
    global _future
    with _lock:
        if _future is not None:
            return
        future: concurrent.futures.Future[ModuleType] = concurrent.futures.Future()
        # RUNNING means a cancelled awaiter (asyncio.wrap_future cancels its source) cannot cancel the
        # import for everyone else.
        future.set_running_or_notify_cancel()
        _future = future
    threading.Thread(target=_import_into, args=(future,), name="litellm-warm-up", daemon=True).start()


def start_direct_warm_up() -> None:
    """Start importing the direct client (httpx, httpx-sse) in a background thread (once)."""
    global _direct
    with _lock:
        if _direct is not None:
            return
        future: concurrent.futures.Future[ModuleType] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        _direct = future
    threading.Thread(target=_import_direct_into, args=(future,), name="direct-warm-up", daemon=True).start()


async def get_direct() -> ModuleType:
    """llm/direct.py, imported off the loop (waits for the warm-up's import when one runs)."""
    start_direct_warm_up()
    future = _direct
    assert future is not None
    if not future.done():
        await asyncio.wait([asyncio.wrap_future(future)])
    try:
        return future.result()
    except Exception as exc:
        raise ModelError(
            f"Could not load the model client ({type(exc).__name__}: {exc}): reinstall interpreter-lsp "
            "(pip install --force-reinstall interpreter-lsp).",
            UNAVAILABLE,
        ) from exc


async def get_httpx() -> ModuleType:
    """httpx, imported off the loop: by the direct client's warm-up, which imports it (~70 ms, on the loop's
    thread, before anything else the loop had to do: a run sent as the editor starts)."""
    with contextlib.suppress(ModelError):  # a broken install: the import below says what is missing
        await get_direct()
    import httpx

    return httpx


def _load_direct() -> ModuleType:
    from interpreter_lsp.llm import direct

    direct.prepare()
    return direct


def _import_direct_into(future: concurrent.futures.Future[ModuleType]) -> None:
    try:
        direct = retrying_deadlocks(_load_direct)
    except BaseException as exc:
        log.error("importing the direct model client failed: %s", exc)
        future.set_exception(exc)
    else:
        heap.settle()  # what the import built lives as long as the server
        future.set_result(direct)


async def get_litellm() -> ModuleType:
    """The configured litellm module, importing it first if needed (without blocking the loop)."""
    start_warm_up()
    future = _future
    assert future is not None
    if not future.done():
        # Its failure is raised below, as a ModelError (wrap_future would raise the bare exception here).
        await asyncio.wait([asyncio.wrap_future(future)])
    try:
        return future.result()
    except ModuleNotFoundError as exc:
        if exc.name != "litellm":
            raise _unavailable(exc) from exc
        raise ModelError(
            "This model's provider is served through litellm, which is not installed: install the "
            f"providers extra ({PROVIDERS_EXTRA}, in the environment the server runs from; an editor's "
            "managed install adds it when it is run again with this model set: VS Code's Interpreter: Install "
            "or Update the Server, Neovim's :InterpreterInstall!), then restart the server. OpenAI-compatible "
            "servers, Anthropic and Ollama need no extra.",
            UNAVAILABLE,
        ) from exc
    except Exception as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: BaseException) -> ModelError:
    return ModelError(
        f"Could not load litellm ({type(exc).__name__}: {exc}): reinstall interpreter-lsp "
        f"({PROVIDERS_EXTRA.replace('pip install', 'pip install --force-reinstall')}).",
        UNAVAILABLE,
    )


def litellm_installed() -> bool:
    """Whether litellm can be imported (asked of the import system only: nothing is loaded)."""
    import importlib.util

    return importlib.util.find_spec("litellm") is not None


def is_loaded() -> bool:
    """Whether litellm is imported already (a question that never waits for it)."""
    future = _future
    return future is not None and future.done() and future.exception() is None


def _import_into(future: concurrent.futures.Future[ModuleType]) -> None:
    try:
        module = retrying_deadlocks(_import_litellm)
    except BaseException as exc:  # the awaiting side turns it into a ModelError
        log.error("importing litellm failed: %s", exc)
        future.set_exception(exc)
    else:
        heap.settle()  # litellm's modules and tables: the largest part of the heap, for the server's life
        future.set_result(module)


def _import_litellm() -> ModuleType:
    # Must precede the import: without the local cost map, importing litellm GETs it from GitHub (and
    # retries in a thread); ERROR keeps litellm's debug and info records quiet.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on stdout
    litellm.drop_params = True  # a provider that lacks a parameter drops it instead of failing
    litellm.num_retries = None  # retries are ours (llm.client), bounded and never after text was shown
    if hasattr(litellm, "disable_hf_tokenizer_download"):
        litellm.disable_hf_tokenizer_download = True  # token_counter never reaches the network
    _keep_logs_off_stdout()
    return litellm


def _keep_logs_off_stdout() -> None:
    """Swap litellm's stdout-routing handlers for stderr ones (same level, format and redaction filters)."""
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if not isinstance(handler, logging.StreamHandler) or isinstance(handler, logging.FileHandler):
                continue
            replacement = logging.StreamHandler(sys.stderr)
            replacement.setLevel(handler.level)
            replacement.setFormatter(handler.formatter)
            for log_filter in handler.filters:
                replacement.addFilter(log_filter)
            logger.removeHandler(handler)
            logger.addHandler(replacement)
