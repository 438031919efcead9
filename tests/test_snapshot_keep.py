"""Which namespaces a variables snapshot keeps as a pickle in the kernel instead of forking
(kernels/snapshot_kernel.py `_plain`): an allowlist of exact types, within bounds, decided without running any
code of the user's. The kernel's module is its very source, executed here as the kernel executes it."""

from __future__ import annotations

import collections
import json
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from interpreter_lsp.kernels import snapshots


@pytest.fixture(scope="module")
def kernel_side() -> Iterator[types.ModuleType]:
    module = types.ModuleType("_interpreter_lsp_snapshots_under_test")
    exec(compile(snapshots._SOURCE, "<interpreter-lsp snapshots>", "exec"), module.__dict__)
    sys.modules[module.__name__] = module  # as installed in a kernel: its functions pickle by reference
    yield module
    del sys.modules[module.__name__]


def in_main(source: str) -> dict[str, Any]:
    """Names defined as a kernel's cell defines them (functions of `__main__`)."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(source, namespace)
    return namespace


def test_plain_data_is_kept(kernel_side: types.ModuleType) -> None:
    made = in_main("def scale(x, by=[2]):\n    return x * by[0] * k\nk = 3\ndef outer():\n    n = 4\n"
                   "    return lambda: n\ninner = outer()\n")
    loop: list[Any] = []
    loop.append(loop)  # holds itself
    shared = [1, 2]
    namespace = {
        "n": 1, "f": 2.5, "c": 1j, "t": True, "s": "text", "b": b"raw", "ba": bytearray(b"x"), "none": None,
        "nested": [1, (2, 3), {"k": {4, 5}, 6: frozenset({7})}], "loop": loop, "a": shared, "b2": shared,
        "array": np.arange(100), "grid": np.zeros((3, 3), dtype=[("x", "f8"), ("y", "i4")]), "module": json,
        "scale": made["scale"], "inner": made["inner"],
    }
    assert kernel_side._plain(namespace)
    assert kernel_side._plain({})


@pytest.mark.parametrize(
    "value",
    [
        object(),
        np.array([object()], dtype=object),
        np.ma.masked_array([1, 2]),  # a subclass of ndarray
        collections.OrderedDict(a=1),  # a subclass of dict
        type("D", (dict,), {})(),
        type("I", (int,), {})(5),
        [1, [2, {"deep": object()}]],
        json.dumps,  # a function of another module
        (x for x in range(3)),
        len,
        int,  # a class
    ],
    ids=["object", "object array", "masked array", "OrderedDict", "dict subclass", "int subclass", "nested object",
         "function elsewhere", "generator", "builtin", "class"],
)
def test_anything_else_forks(kernel_side: types.ModuleType, value: Any) -> None:
    assert not kernel_side._plain({"v": value})
    assert not kernel_side._plain({"fine": [1, 2], "v": value})


def test_a_kernel_function_is_plain_only_with_plain_parts(kernel_side: types.ModuleType) -> None:
    made = in_main("import threading\ndef f(x=threading.Lock()):\n    return x\ndef outer():\n"
                   "    held = object()\n    return lambda: held\ng = outer()\ndef h():\n    pass\nh.note = object()\n")
    for name in ("f", "g", "h"):
        assert not kernel_side._plain({name: made[name]}), name


def test_the_bounds(kernel_side: types.ModuleType) -> None:
    limit, objects = kernel_side.KEEP_BYTES, kernel_side.KEEP_OBJECTS
    assert kernel_side._plain({"s": "x" * (limit // 2)})
    assert not kernel_side._plain({"s": "x" * (limit + 1)})
    assert not kernel_side._plain({"a": np.zeros(limit // 8 + 1)})
    assert kernel_side._plain({"l": list(range(objects // 2))})
    assert not kernel_side._plain({"l": list(range(objects + 1))})
    assert not kernel_side._plain({f"v{i}": "x" * 1000 for i in range(limit // 1000 + 1)})


def test_deciding_runs_no_code_of_the_users(kernel_side: types.ModuleType) -> None:
    """A metaclass's ==, a class's __hash__, __eq__, __reduce__, __getattr__: none is called to decide."""
    calls: list[str] = []
    made = in_main(
        "class Meta(type):\n"
        "    def __eq__(cls, other):\n        calls.append('meta eq')\n        return False\n"
        "    def __hash__(cls):\n        calls.append('meta hash')\n        return 1\n"
        "class Sneaky(metaclass=Meta):\n"
        "    def __eq__(self, other):\n        calls.append('eq')\n        return False\n"
        "    def __hash__(self):\n        calls.append('hash')\n        return 1\n"
        "    def __reduce__(self):\n        calls.append('reduce')\n        return (int, ())\n"
        "    def __getattr__(self, name):\n        calls.append('getattr ' + name)\n"
        "        raise AttributeError(name)\n"
    )
    made["calls"] = calls
    sneaky = made["Sneaky"]()
    function = in_main("def g():\n    pass\n")["g"]
    function.__module__ = sneaky  # a function's module can be anything: its == is the user's
    namespaces = [{"v": sneaky}, {"d": {1: [sneaky]}}, {"k": {sneaky: 1}}, {"c": made["Sneaky"]}, {"g": function}]
    calls.clear()
    for namespace in namespaces:
        assert not kernel_side._plain(namespace)
    assert calls == []


def test_what_is_kept_answers_as_a_forks_copy_would(kernel_side: types.ModuleType) -> None:
    """The fingerprints are the same the kernel computes for its own variables, and the pickle brings back
    the values as they were when kept (in band: a later change in place does not reach it), shared as they
    were shared."""
    shared = [1, 2]
    array = np.arange(5)
    namespace = {"a": shared, "b": shared, "array": array, "text": "t", "module": json}
    kept = kernel_side._keep(namespace)
    assert kept is not None
    facts, data = kept
    assert facts["prints"] == {name: kernel_side._fingerprint(value) for name, value in namespace.items()}
    assert facts["classes"] == {}
    array[0] = 99
    shared.append(3)
    back = kernel_side.pickle.loads(data)
    assert back["a"] == [1, 2] and back["a"] is back["b"]
    assert back["array"].tolist() == [0, 1, 2, 3, 4]
    assert back["module"] is json
    assert kernel_side._keep({"v": object()}) is None


def test_a_set_that_comes_back_in_another_order_is_faithful(kernel_side: types.ModuleType) -> None:
    """Two elements whose hashes collide come back from pickle swapped, and swapped again from the next round
    trip: the copy holds what the original held (undo once named such a set "its copy would differ"). A copy
    that really loses something is still named."""
    ids = {3, 11}
    nested = {"ids": ids, "frozen": frozenset({frozenset({3, 11}), "x", (1, 2)}), "list": [ids]}
    for value in (ids, nested):
        original = kernel_side._fingerprint(value)
        copy = kernel_side.pickle.loads(kernel_side.pickle.dumps(value))
        assert copy == value
        if value is ids:  # the premise: the copy's order is another (so a fingerprint in order differs)
            assert list(copy) != list(value) and kernel_side._fingerprint(copy) != original
        assert kernel_side._faithful(copy, original)
        assert kernel_side._fingerprint(copy, sets=True) == kernel_side._fingerprint(value, sets=True)
    assert kernel_side._fingerprint({3, 11}, sets=True) != kernel_side._fingerprint({3, 12}, sets=True)
    assert kernel_side._fingerprint({3, 11}, sets=True) != kernel_side._fingerprint(frozenset({3, 11}), sets=True)

    drifting = {"d": [Drifts()], "s": {1, 2}}
    original = kernel_side._fingerprint(drifting)
    assert not kernel_side._faithful(kernel_side.pickle.loads(kernel_side.pickle.dumps(drifting)), original)


class Drifts:
    """Each pickle round trip changes it: a copy that loses something."""

    def __init__(self, n: int = 0) -> None:
        self.n = n

    def __reduce__(self) -> tuple[Any, ...]:
        return Drifts, (self.n + 1,)
