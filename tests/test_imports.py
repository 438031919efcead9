"""Imports in threads beside the event loop's (imports.py). The lock cycle Python breaks with "deadlock
detected by _ModuleLock" is made for real here, the way it met in CI (3.11's importlib.abc and
importlib.resources): one thread imports a package's submodule while another is still importing that
package's parent, and the package's own `__init__` then imports the submodule."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from interpreter_lsp.imports import ATTEMPTS, is_import_deadlock, retrying_deadlocks

# Imported by the generated parent package in thread B: it holds there (B owns the lock of
# `<outer>.pkg`, not yet in sys.modules) until thread A is seen waiting for that lock.
_CONTROL = '''
import threading, time
import importlib._bootstrap as bootstrap

holding = threading.Event()
waiter = []


def hold_until_waited_on():
    if threading.current_thread().name != "B" or holding.is_set():
        return
    holding.set()
    deadline = time.monotonic() + 60
    # _blocking_on: the lock each thread waits for (a list of them from Python 3.12)
    while not (waiter and bootstrap._blocking_on.get(waiter[0])):
        if time.monotonic() > deadline:
            raise TimeoutError("the other thread never waited for the package's lock")
        time.sleep(0.001)
'''


@dataclass
class Cycle:
    outer: str
    control: str


@pytest.fixture
def cycle(tmp_path: Path) -> Iterator[Cycle]:
    tag = uuid.uuid4().hex[:8]
    outer, control = f"outer_{tag}", f"control_{tag}"
    (tmp_path / outer / "pkg").mkdir(parents=True)
    (tmp_path / f"{control}.py").write_text(_CONTROL)
    (tmp_path / outer / "__init__.py").write_text(f"import {control}\n{control}.hold_until_waited_on()\n")
    (tmp_path / outer / "pkg" / "__init__.py").write_text("from . import sub\n")
    (tmp_path / outer / "pkg" / "sub.py").write_text("VALUE = 42\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield Cycle(outer, control)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith((outer, control))]:
            del sys.modules[name]


def _race(cycle: Cycle, wrap: Callable[[Callable[[], object]], object]) -> dict[str, BaseException]:
    """Thread B imports `<outer>.pkg` (holding in `<outer>`), thread A imports `<outer>.pkg.sub` meanwhile."""
    control = __import__(cycle.control)
    errors: dict[str, BaseException] = {}

    def b() -> None:
        try:
            wrap(lambda: __import__(f"{cycle.outer}.pkg"))
        except BaseException as exc:
            errors["B"] = exc

    def a() -> None:
        control.waiter.append(threading.get_ident())
        assert control.holding.wait(60)
        try:
            wrap(lambda: __import__(f"{cycle.outer}.pkg.sub"))
        except BaseException as exc:
            errors["A"] = exc

    threads = [threading.Thread(target=b, name="B"), threading.Thread(target=a, name="A")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "an import hung"
    return errors


def test_the_cycle_is_real_without_the_retry(cycle: Cycle) -> None:
    errors = _race(cycle, wrap=lambda load: load())
    assert set(errors) == {"B"} and is_import_deadlock(errors["B"]), errors


def test_with_the_retry_both_threads_import(cycle: Cycle) -> None:
    assert _race(cycle, wrap=retrying_deadlocks) == {}
    assert sys.modules[f"{cycle.outer}.pkg"].sub.VALUE == 42


def test_other_import_errors_are_raised_at_once() -> None:
    attempts: list[int] = []

    def missing() -> object:
        attempts.append(1)
        return __import__("no_such_module_here")

    with pytest.raises(ImportError, match="No module named"):
        retrying_deadlocks(missing)
    assert len(attempts) == 1


def test_a_deadlock_that_never_clears_is_raised_in_the_end() -> None:
    attempts: list[int] = []

    def stuck() -> object:
        attempts.append(1)
        raise ImportError("deadlock detected by _ModuleLock('importlib.resources') at 1")

    with pytest.raises(ImportError, match="deadlock detected"):
        retrying_deadlocks(stuck)
    assert len(attempts) == ATTEMPTS
