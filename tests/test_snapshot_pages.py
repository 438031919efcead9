"""Packed snapshots (kernels/snapshot_pages.py): once the next snapshot is forked, an older one keeps only its
variables' pickle and the pages of its large buffers that differ from the next one's, and undo still brings
back exactly what it took. A real kernel with the snapshots' module installed as the server installs it;
values compared by crc32 inside the kernel."""

from __future__ import annotations

import ast
import itertools
import json
import random
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from interpreter_lsp.kernels import snapshots
from interpreter_lsp.kernels.specs import MEMORY_HISTORY

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="packing reads /proc (Linux)")


@pytest.fixture(scope="module")
def pages() -> types.ModuleType:
    module = types.ModuleType("_pages_under_test")
    exec(compile(snapshots._PAGES_SOURCE, "<interpreter-lsp snapshot pages>", "exec"), module.__dict__)
    return module


def test_page_range_arithmetic_agrees_with_sets_of_pages(pages: types.ModuleType) -> None:
    page = pages.PAGE
    rng = random.Random(20)

    def pages_of(runs: list[tuple[int, int]]) -> set[int]:
        return {p for start, end in runs for p in range(start, end, page)}

    for _ in range(300):
        a = pages.page_runs((rng.randrange(0, 64 * page), rng.randrange(0, 9 * page)) for _ in range(rng.randrange(6)))
        b = pages.page_runs((rng.randrange(0, 64 * page), rng.randrange(0, 9 * page)) for _ in range(rng.randrange(6)))
        for runs in (a, b):
            assert all(start % page == 0 and end % page == 0 and start < end for start, end in runs)
            assert all(x[1] < y[0] for x, y in itertools.pairwise(runs)), runs  # sorted, disjoint, merged
        assert pages_of(pages.union(a, b)) == pages_of(a) | pages_of(b)
        assert pages_of(pages.intersect(a, b)) == pages_of(a) & pages_of(b)
        assert pages_of(pages.subtract(a, b)) == pages_of(a) - pages_of(b)
    assert pages.page_runs([(page + 1, 1)]) == [(page, 2 * page)]  # a byte touches its page
    assert pages.page_runs([(page - 1, 2)]) == [(0, 2 * page)]


class Kernel:
    def __init__(self) -> None:
        self.manager, self.client = start_new_kernel(kernel_name="python3", extra_arguments=[MEMORY_HISTORY])
        self.run(snapshots.INSTALL)
        self.run("import zlib, json, os, signal\nM = __import__('sys').modules[" + repr(snapshots.MODULE) + "]")

    def run(self, code: str) -> str:
        out: list[str] = []
        errors: list[str] = []

        def hook(message: dict[str, Any]) -> None:
            if message["msg_type"] == "stream":
                out.append(message["content"]["text"])
            elif message["msg_type"] == "error":
                errors.append("\n".join(message["content"]["traceback"]))

        reply = self.client.execute_interactive(code, timeout=180, output_hook=hook)
        assert reply["content"]["status"] == "ok", errors
        return "".join(out)

    def value(self, expression: str) -> Any:
        return json.loads(self.run(f"print(json.dumps({expression}))").strip().splitlines()[-1])

    def call(self, function: str, argument: Any) -> dict[str, Any]:
        expression = f"__import__({snapshots.MODULE!r}).{function}({json.dumps(argument)})"
        reply = self.client.execute_interactive("", silent=True, user_expressions={"r": expression}, timeout=300,
                                                output_hook=lambda _m: None)
        result = reply["content"]["user_expressions"]["r"]
        assert result["status"] == "ok", result
        return json.loads(ast.literal_eval(result["data"]["text/plain"]))

    def snapshots_across(self, before: str, code: str, after: str) -> None:
        """Snapshot `before`, run `code`, snapshot `after` (as the server does after a run), and wait until
        `before` has packed itself (or declined)."""
        self.call("snap", before)
        self.run(code)
        self.call("snap", after)
        self.call("settle", 0)

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    k = Kernel()
    try:
        yield k
    finally:
        k.stop()


def test_a_packed_snapshot_holds_the_bytes_changed_and_brings_them_back(kernel: Kernel) -> None:
    """10 MB changed of a 100 MB array: as a fork the snapshot holds that plus the pages the kernel's own
    request cycle wrote (~7 MB); packed, about the 10 MB."""
    k = kernel
    k.run("import numpy as np\nbig = np.random.default_rng(3).random(12_500_000)\ntable = {i: str(i) for i in "
          "range(10_000)}\nbefore = zlib.crc32(big)")
    k.call("snap", "r1")
    k.run("big[:1_250_000] += 1\ntable[0] = 'x'")
    as_fork = k.call("sizes", 0)["r1"]
    k.call("snap", "r2")
    k.call("settle", 0)
    assert k.value("sorted(M._packs)") == ["r1"]
    packed = k.call("sizes", 0)["r1"]
    print(f"\nheld for 10 MB changed: {as_fork / 1e6:.1f} MB as a fork, {packed / 1e6:.1f} MB packed")
    assert 10e6 <= packed <= 11e6 < as_fork, (packed, as_fork)
    answer = k.call("restore", "r1")
    assert sorted(answer["restored"]) == ["big", "table"] and answer["lost"] == [], answer
    assert k.value("[zlib.crc32(big) == before, table[0]]") == [True, "0"]
    # The array put back together is the kernel's own memory, which the next forks copy on write (a shared
    # mapping would show them every later change): changed in place after a snapshot, it comes back.
    k.snapshots_across("r3", "big[-1_000_000:] = 0", "r4")
    assert k.call("restore", "r3")["restored"] == ["big"]
    assert k.value("zlib.crc32(big) == before")


def test_each_snapshot_of_a_chain_of_packs_comes_back_exactly(kernel: Kernel) -> None:
    """Each run changes another part of an array: every older snapshot keeps only its part and finds the rest
    in the ones after it; restored in any order, each is the array as its run found it."""
    k = kernel
    k.run("import numpy as np\narr = np.random.default_rng(5).random(2_000_000)\nseen = []")
    for step in range(4):
        k.run("seen.append(zlib.crc32(arr))")
        k.call("snap", f"c{step}")
        k.run(f"arr[{step} * 300_000:{step} * 300_000 + 200_000] = {step}")
    k.call("snap", "c4")
    k.call("settle", 0)
    assert k.value("sorted(M._packs)") == ["c0", "c1", "c2", "c3"]
    sizes = k.call("sizes", 0)
    assert all(1.6e6 <= sizes[f"c{step}"] <= 2.2e6 for step in range(4)), sizes  # 1.6 MB changed each
    for step in (1, 3, 0, 2):
        answer = k.call("restore", f"c{step}")
        assert "arr" in answer["restored"], answer
        assert k.value(f"zlib.crc32(arr) == seen[{step}]"), f"c{step} came back different"


def test_dropped_snapshots_an_older_pack_needs_are_kept_until_it_goes(kernel: Kernel) -> None:
    k = kernel
    k.run("import numpy as np\narr = np.random.default_rng(7).random(1_000_000)\nfirst = zlib.crc32(arr)")
    for step in range(3):
        k.call("snap", f"d{step}")
        k.run(f"arr[{step} * 100_000:{step} * 100_000 + 50_000] = -1")
    k.call("snap", "d3")
    k.call("settle", 0)
    k.call("drop", ["d1", "d2"])  # undone runs' snapshots: d0 still finds its pages through them
    held = k.call("sizes", 0)
    assert set(held) == {"d0", "d3", ""} and held[""] > 0, held
    assert k.call("restore", "d0")["restored"] == ["arr"]
    assert k.value("zlib.crc32(arr) == first")
    k.call("drop", ["d0"])
    assert k.call("sizes", 0)[""] == 0  # no pack before them: gone
    assert k.value("sorted(M._chain)") == ["d3"]


def test_a_pack_whose_pages_cannot_all_be_found_says_so_and_changes_nothing(kernel: Kernel) -> None:
    """The fork after a pack holds the pages the pack did not keep. Killed, the pack cannot be put back
    together: restore answers an error and the variables stay as they are, never a wrong value."""
    k = kernel
    k.run("import numpy as np\narr = np.random.default_rng(9).random(1_000_000)")
    k.snapshots_across("e1", "arr[:1000] = 0\nnow = zlib.crc32(arr)", "e2")
    assert k.value("sorted(M._packs)") == ["e1"]
    k.run("os.kill(M._kids['e2'][0], signal.SIGKILL)\nos.waitpid(M._kids['e2'][0], 0)")
    answer = k.call("restore", "e1")
    assert "error" in answer, answer
    assert k.value("zlib.crc32(arr) == now")


def test_a_namespace_whose_pickle_outweighs_the_fork_stays_a_fork(kernel: Kernel) -> None:
    """A pack that would hold more than the fork does (millions of small objects, pickled in band) is not made:
    the snapshot stays a fork and undo works as before."""
    k = kernel
    k.run("numbers = list(range(3_000_000))")
    k.call("snap", "f1")
    k.run("numbers[0] = -1")
    # The next snapshot decides whether to fork without taking the list's items (which writes each one's
    # reference count: the fork then held a copy of every page they are on, ~100 MB).
    k.call("snap", "f2")
    assert k.call("sizes", 0)["f1"] < 20e6
    k.call("settle", 0)
    assert k.value("[sorted(M._packs), sorted(M._declined), 'f1' in M._kids]") == [[], ["f1"], True]
    assert k.call("restore", "f1")["restored"] == ["numbers"]
    assert k.value("numbers[0]") == 0


def test_a_dataframe_changed_in_place_comes_back_from_its_pack(kernel: Kernel) -> None:
    k = kernel
    k.run("import numpy as np, pandas as pd\nframe = pd.DataFrame(np.random.default_rng(2).random((500_000, 4)), "
          "columns=list('abcd'))\nframe['label'] = 'x'\nbefore = pd.util.hash_pandas_object(frame).sum()")
    k.snapshots_across("g1", "frame.iloc[:1000, 0] = 0.0\nframe.loc[5, 'label'] = 'changed'", "g2")
    assert k.value("sorted(M._packs)") == ["g1"]
    assert k.call("sizes", 0)["g1"] < 6e6  # 16 MB of floats, one page of them changed, and the labels
    assert k.call("restore", "g1")["restored"] == ["frame"]
    assert k.value("bool(pd.util.hash_pandas_object(frame).sum() == before)")


def test_buffers_too_large_for_what_packing_frees_stay_a_fork(kernel: Kernel) -> None:
    """Packing reads every page of the large buffers to free at most what the fork holds alone: past
    COST_LIMIT times that, it is not worth the CPU, and the snapshot stays a fork (here the limit is lowered,
    so that a 16 MB array beside a small change is past it)."""
    k = kernel
    k.run("import numpy as np\narr = np.random.default_rng(4).random(2_000_000)\nsmall = [0]\n"
          "__import__('sys').modules['_interpreter_lsp_snapshot_pages'].COST_LIMIT = 1\nfirst = zlib.crc32(arr)")
    k.snapshots_across("h1", "small = [1]\narr[:10] = -1", "h2")
    assert k.value("[sorted(M._packs), sorted(M._declined)]") == [[], ["h1"]]
    # From the fork: its large buffers read by the kernel from the fork's memory, not sent through the socket.
    assert k.call("restore", "h1")["restored"] == ["arr", "small"]
    assert k.value("zlib.crc32(arr) == first")
    k.run("__import__('sys').modules['_interpreter_lsp_snapshot_pages'].COST_LIMIT = 32")
    k.snapshots_across("h3", "small = [2]", "h4")
    assert "h3" in k.value("sorted(M._packs)")  # within the limit, the same namespace packs


def test_a_pickle_that_never_ends_leaves_the_snapshot_a_fork(kernel: Kernel) -> None:
    """An object whose pickling waits for ever (here: on a lock taken before the fork, which no thread of the
    fork will release) stops the pack after PACK_SECONDS, not the snapshots after it."""
    k = kernel
    k.run("import threading\nclass Stuck:\n    lock = threading.Lock()\n    def __reduce__(self):\n"
          "        Stuck.lock.acquire()\n        return (Stuck, ())\nstuck = Stuck()\nStuck.lock.acquire()\n"
          "n = 0\nM.PACK_SECONDS = 1")
    k.snapshots_across("s1", "n = 1", "s2")
    assert k.value("[sorted(M._packs), sorted(M._declined), 's1' in M._kids]") == [[], ["s1"], True]


def _a_slow_pack_under_way(k: Kernel, seed: int, seconds: int, key: str) -> None:
    """A 1,000,000-float `arr` (its crc32 in `first`), snapshot {key}1, a change, snapshot {key}2: {key}1 then
    packs itself, each pack waiting `seconds` before it starts."""
    k.run(f"import numpy as np, time\narr = np.random.default_rng({seed}).random(1_000_000)\nfirst = zlib.crc32(arr)\n"
          "P = __import__('sys').modules['_interpreter_lsp_snapshot_pages']\n_slow = P.pack\n"
          f"P.pack = lambda *a, **kw: (time.sleep({seconds}), _slow(*a, **kw))")
    k.call("snap", f"{key}1")
    k.run("arr[:10] = -1")
    k.call("snap", f"{key}2")


def test_an_undo_does_not_wait_for_a_pack_under_way(kernel: Kernel) -> None:
    """Packing a large namespace takes seconds (in the background): an undo that needs that snapshot gives the
    pack up, and restores from the fork at once."""
    k = kernel
    _a_slow_pack_under_way(k, 6, 60, "u")
    assert k.value("M._packing") == ["u1"]
    started = time.perf_counter()
    answer = k.call("restore", "u1")
    assert time.perf_counter() - started < 20, "the restore waited for the pack"
    assert answer["restored"] == ["arr"], answer
    assert k.value("[zlib.crc32(arr) == first, M._packing, sorted(M._declined)]") == [True, [], ["u1"]]


def test_a_pack_goes_on_when_its_snapshot_is_told_its_reader_is_done(kernel: Kernel) -> None:
    """The kernel tells a snapshot its reader is done ("sealed") whenever that happens, also while the snapshot
    packs itself: that message is not the kernel giving the pack up."""
    k = kernel
    _a_slow_pack_under_way(k, 8, 2, "v")
    k.run("M._send(M._live('v1')[1], [b'{\"op\": \"sealed\"}'])")
    k.call("settle", 0)
    assert k.value("[sorted(M._packs), sorted(M._declined)]") == [["v1"], []]
