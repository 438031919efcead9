"""The server's cache of the code attrs and cattrs generate (code_cache.py): a second start takes lsprotocol's
generated methods from it, they are the very code compile() makes, a real server starts cold then warm and
works, and a cache file that is corrupt, of another shape, too large, or writable by someone else is never
run. Each case is a fresh interpreter (the cache is installed once per process, before lsprotocol)."""

from __future__ import annotations

import json
import marshal
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness import start_session, stop_session
from interpreter_lsp import code_cache

# A server's start, as __main__ does it, then a check that the generated methods of every lsprotocol class are
# what compile() makes of their source (attrs keeps each one's source in linecache under its file name).
START = r"""
import json, linecache, sys, types, __future__
from interpreter_lsp import code_cache
code_cache.install()
import interpreter_lsp.server
import lsprotocol.types as t
stats = code_cache.stats()
code_cache.save()
checked = differ = 0
for cls in vars(t).values():
    if not isinstance(cls, type) or not hasattr(cls, "__attrs_attrs__"):
        continue
    for function in vars(cls).values():
        code = getattr(function, "__code__", None)
        if code is None or not code.co_filename.startswith("<attrs generated"):
            continue
        source = "".join(linecache.cache[code.co_filename][2])
        module = compile(source, code.co_filename, "exec", __future__.annotations.compiler_flag, True)
        fresh = [c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == code.co_name]
        checked += 1
        differ += fresh != [code]
print(json.dumps({**stats, "checked": checked, "differ": differ, "marker": __import__("os").path.exists(sys.argv[1])}))
"""


def _start(cache_home: Path, marker: Path, *, setup: str = "") -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["XDG_CACHE_HOME"] = str(cache_home)
    done = subprocess.run(
        [sys.executable, "-c", setup + START, str(marker)], env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _file(cache_home: Path) -> Path:
    cached = code_cache.cache_file({"XDG_CACHE_HOME": str(cache_home)})
    assert cached is not None
    return cached


def test_a_second_start_takes_the_generated_code_from_the_cache_and_it_is_what_compile_makes(tmp_path: Path) -> None:
    cache_home, marker = tmp_path / "cache home", tmp_path / "marker"
    first = _start(cache_home, marker)
    assert first["hits"] == 0 and first["new"] > 500, first  # lsprotocol's classes, compiled and kept
    cached = _file(cache_home)
    assert cached.stat().st_mode & 0o777 == 0o600 and cached.parent.stat().st_mode & 0o777 == 0o700
    second = _start(cache_home, marker)
    # Nothing left to compile but the few sources Python salts per process (a frozen class's __hash__).
    assert second["hits"] >= first["new"] - code_cache.SAVE_AFTER and second["new"] < code_cache.SAVE_AFTER, second
    assert second["checked"] > 500 and second["differ"] == 0, second
    assert first["differ"] == 0


async def test_a_server_starts_cold_then_warm_from_its_cache_and_works(workspace_root: Path, home: Path) -> None:
    """A user's first start writes the cache (at the end of its imports, and what cattrs made for the session's
    messages at exit); the next start takes its code from there (its log says how much), and runs code as
    ever."""
    cached = _file(home / "cache")
    for start in ("cold", "warm"):
        log = home / f"{start}.log"
        s = await start_session(
            workspace_root, home, warm_code_cache=False, server_args=("--log-level", "DEBUG", "--log-file", str(log))
        )
        try:
            run_id, status = await s.run_and_wait("print(6 * 7)")
            assert status["state"] == "ok" and s.text(run_id).strip() == "42"
        finally:
            await stop_session(s)
        said = re.findall(r"generated code: (\d+) code objects from the cache .*, (\d+) compiled", log.read_text())
        assert said, log.read_text()[-2000:]
        hits, compiled = map(int, said[-1])  # at exit: the whole session's
        if start == "cold":
            assert compiled > 500 and hits < 100 and cached.stat().st_size > 500_000
        else:
            assert hits > 500 and compiled < 100, said


def _planted(cache_home: Path, marker: Path) -> None:
    """A real cache whose every code object is replaced by one that writes `marker`."""
    head, entries = marshal.loads(_file(cache_home).read_bytes())
    evil = marshal.dumps(compile(f"open({str(marker)!r}, 'w').write('ran')", "<planted>", "exec"))
    _file(cache_home).write_bytes(marshal.dumps((head, dict.fromkeys(entries, evil))))


@pytest.mark.parametrize(
    "case",
    [
        "group-writable file",
        "world-writable directory",
        "a link to a file elsewhere",
        "a file with another name elsewhere",
        pytest.param(
            "another user's file",
            marks=pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root"),
        ),
    ],
)
def test_a_cache_someone_else_could_have_written_is_never_run(tmp_path: Path, case: str) -> None:
    cache_home, marker = tmp_path / "cache", tmp_path / "marker"
    _start(cache_home, marker)
    _planted(cache_home, marker)
    cached = _file(cache_home)
    planted = cached.read_bytes()
    if case == "group-writable file":
        cached.chmod(0o620)
    elif case == "world-writable directory":
        cached.parent.chmod(0o777)
    elif case == "a link to a file elsewhere":  # e.g. into a workspace, where sandboxed code can write
        elsewhere = tmp_path / "workspace" / "cache.marshal"
        elsewhere.parent.mkdir()
        cached.rename(elsewhere)
        cached.symlink_to(elsewhere)
    elif case == "a file with another name elsewhere":
        (tmp_path / "workspace").mkdir()
        os.link(cached, tmp_path / "workspace" / "cache.marshal")
    else:
        os.chown(cached, 65534, 65534)
    started = _start(cache_home, marker)
    assert not marker.exists() and not started["marker"]
    assert started["hits"] == 0 and started["differ"] == 0, started  # compiled as without a cache
    if case == "world-writable directory":
        assert cached.read_bytes() == planted  # nothing written where others can write either
        return
    # Written again, the user's own and private, with one name: the next start takes it.
    assert (tmp_path / "workspace" / "cache.marshal").read_bytes() == planted if "elsewhere" in case else True
    st = cached.lstat()
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o600 and stat.S_ISREG(st.st_mode) and st.st_nlink == 1
    assert _start(cache_home, marker)["hits"] > 500 and not marker.exists()


@pytest.mark.parametrize(
    "case", ["corrupt", "truncated", "another shape", "not code", "corrupt entries", "another Python", "too large"]
)
def test_a_cache_file_that_is_not_what_this_server_writes_is_ignored_and_written_again(
    tmp_path: Path, case: str
) -> None:
    cache_home, marker = tmp_path / "cache", tmp_path / "marker"
    _start(cache_home, marker)
    cached = _file(cache_home)
    data = cached.read_bytes()
    head, entries = marshal.loads(data)
    setup = ""
    if case == "corrupt":
        cached.write_bytes(os.urandom(4096))
    elif case == "truncated":
        cached.write_bytes(data[: len(data) // 2])
    elif case == "another shape":
        cached.write_bytes(marshal.dumps([head, list(entries.values())]))
    elif case == "not code":
        cached.write_bytes(marshal.dumps((head, dict.fromkeys(entries, marshal.dumps("print('not code')")))))
    elif case == "corrupt entries":
        cached.write_bytes(marshal.dumps((head, {key: blob[: len(blob) // 2] for key, blob in entries.items()})))
    elif case == "another Python":
        cached.write_bytes(marshal.dumps((b"\0\0\r\n" + head[4:], entries)))
    else:
        setup = f"import interpreter_lsp.code_cache as c; c.MAX_BYTES = {len(data) - 1}\n"
    started = _start(cache_home, marker, setup=setup)
    assert started["hits"] == 0 and started["differ"] == 0 and started["checked"] > 500, started
    if case != "too large":
        assert _start(cache_home, marker)["hits"] > 500  # written again, whole


def test_a_cache_directory_that_cannot_be_made_costs_nothing_but_the_cache(tmp_path: Path) -> None:
    """XDG_CACHE_HOME under a file (a read-only or odd home): the server starts as without a cache."""
    blocker = tmp_path / "a file"
    blocker.write_text("")
    started = _start(blocker / "cache", tmp_path / "marker")
    assert started["hits"] == 0 and started["checked"] > 500 and started["differ"] == 0


def test_without_an_absolute_place_for_it_there_is_no_cache_in_the_working_directory(tmp_path: Path) -> None:
    """A relative XDG_CACHE_HOME is ignored (the XDG specification says so), a home that is not a path gives
    no cache: never a directory of the working directory, which may be a workspace."""
    assert code_cache.cache_file({"XDG_CACHE_HOME": "cache", "HOME": str(tmp_path)}) == _file(tmp_path / ".cache")
    assert code_cache.cache_file({"XDG_CACHE_HOME": "", "HOME": "relative"}) is None
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(XDG_CACHE_HOME="cache", HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-c", START, str(tmp_path / "marker")], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "cache").exists() and (tmp_path / "home" / ".cache" / "interpreter-lsp").is_dir()
    env.update(XDG_CACHE_HOME="", HOME="relative")
    done = subprocess.run(
        [sys.executable, "-c", START, str(tmp_path / "marker")], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]  # started, as without a cache
    assert json.loads(done.stdout.strip().splitlines()[-1])["hits"] == 0 and not (tmp_path / "relative").exists()
