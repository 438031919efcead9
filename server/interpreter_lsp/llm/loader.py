"""Lazy, off-loop import of litellm.

Importing litellm takes seconds and ~200 MB, so it never happens at module import or on the path of
`initialize`. `start_warm_up()` (called after `initialized`) imports it in one daemon thread, the one
sanctioned import thread; `await get_litellm()` waits for that import without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
import threading
from types import ModuleType

from interpreter_lsp.llm.errors import UNAVAILABLE, ModelError

log = logging.getLogger(__name__)

_lock = threading.Lock()
_future: concurrent.futures.Future[ModuleType] | None = None

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


async def get_litellm() -> ModuleType:
    """The configured litellm module, importing it first if needed (without blocking the loop)."""
    start_warm_up()
    future = _future
    assert future is not None
    if not future.done():
        await asyncio.wrap_future(future)
    try:
        return future.result()
    except Exception as exc:
        raise ModelError(
            f"Could not load litellm ({type(exc).__name__}: {exc}): reinstall interpreter-lsp "
            "(pip install --force-reinstall interpreter-lsp).",
            UNAVAILABLE,
        ) from exc


def is_loaded() -> bool:
    """Whether litellm is imported already (a question that never waits for it)."""
    future = _future
    return future is not None and future.done() and future.exception() is None


def _import_into(future: concurrent.futures.Future[ModuleType]) -> None:
    try:
        module = _import_litellm()
    except BaseException as exc:  # the awaiting side turns it into a ModelError
        log.error("importing litellm failed: %s", exc)
        future.set_exception(exc)
    else:
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
