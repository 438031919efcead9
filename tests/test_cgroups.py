"""Whether a kernel gets a cgroup of its own (kernels/cgroups.py), decided on a directory laid out like a
cgroup v2 tree; and what the server says about it on this machine, through the real server.

The decision is checked on a plain directory. Where this process may create cgroups in a real cgroup v2
hierarchy (root on the test machines), a real kernel is put in a real cgroup: its whole tree joins it, in and
out of the sandbox, and the cgroup goes with the kernel. The limits themselves (memory.max, pids.max) need
the memory and pids controllers in that hierarchy, which the test machines do not offer (docs/security.md
section 5 says why, and what was found): there the kernel falls back to rlimits, and that is checked."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from fakes import TextSink
from harness import start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels import cgroups
from interpreter_lsp.kernels import launcher as launcher_module
from interpreter_lsp.kernels.kernel import Kernel
from interpreter_lsp.kernels.sandbox import SandboxConfig, bwrap_available, wrap_command
from interpreter_lsp.kernels.specs import choose_kernel

PID = 4242


def _mountinfo(mount: Path, subtree: str = "/") -> str:
    return (
        "22 1 0:21 / / rw,relatime - ext4 /dev/vda rw\n"
        f"35 22 0:30 {subtree} {mount} rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
    )


def _cgroup(
    root: Path, path: str, controllers: str = "cpuset cpu io memory pids", procs: tuple[int, ...] = (PID,)
) -> Path:
    here = root / path.lstrip("/")
    here.mkdir(parents=True, exist_ok=True)
    (here / "cgroup.controllers").write_text(controllers + "\n")
    (here / "cgroup.subtree_control").write_text("")
    (here / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in procs))
    return here


SCOPE = "/user.slice/user-1000.slice/user@1000.service/app.slice/ilsp.scope"


def test_a_delegated_cgroup_the_server_has_to_itself_is_used(tmp_path: Path) -> None:
    here = _cgroup(tmp_path, SCOPE)
    assert cgroups.decide(_mountinfo(tmp_path), f"0::{SCOPE}\n", PID) == cgroups.Delegation(here)


def test_the_server_already_in_its_leaf_uses_the_cgroup_above(tmp_path: Path) -> None:
    here = _cgroup(tmp_path, SCOPE, procs=())
    _cgroup(tmp_path, f"{SCOPE}/ilsp-server")
    assert cgroups.decide(_mountinfo(tmp_path), f"0::{SCOPE}/ilsp-server\n", PID).root == here


def test_a_container_mounting_a_subtree(tmp_path: Path) -> None:
    here = _cgroup(tmp_path, "/")
    decided = cgroups.decide(_mountinfo(tmp_path, "/docker/abc"), "0::/docker/abc\n", PID)
    assert decided.root == here
    decided = cgroups.decide(_mountinfo(tmp_path, "/docker/abc"), "0::/elsewhere\n", PID)
    assert decided.reason == "this process's cgroup /elsewhere is not under the mounted /docker/abc"


@pytest.mark.parametrize(
    ("mountinfo", "cgroup", "reason"),
    [
        ("22 1 0:21 / / rw - ext4 /dev/vda rw\n", f"0::{SCOPE}\n", "no cgroup v2 hierarchy (cgroup v1 or none)"),
        (None, "4:memory:/x\n1:name=systemd:/x\n", "no cgroup v2 hierarchy (cgroup v1 or none)"),
        (None, f"0::{SCOPE} (deleted)\n", "this process's cgroup was removed"),
    ],
    ids=["no-cgroup2-mount", "v1-only", "deleted"],
)
def test_no_unified_hierarchy(tmp_path: Path, mountinfo: str | None, cgroup: str, reason: str) -> None:
    _cgroup(tmp_path, SCOPE)
    assert cgroups.decide(mountinfo or _mountinfo(tmp_path), cgroup, PID) == cgroups.Delegation(None, reason)


def test_controllers_bound_elsewhere_are_said(tmp_path: Path) -> None:
    """This machine's case: a hybrid layout, memory and pids on cgroup v1, only hugetlb left to v2."""
    _cgroup(tmp_path, "/", controllers="hugetlb", procs=(1, 2, PID))
    decided = cgroups.decide(_mountinfo(tmp_path), "0::/\n", PID)
    assert decided.reason == f"the cgroup / (in {tmp_path}) does not offer memory and pids (only: hugetlb)"


def test_a_cgroup_shared_with_other_processes_is_left_alone(tmp_path: Path) -> None:
    """An editor's scope: the server would have to move the editor's processes to enable controllers."""
    _cgroup(tmp_path, SCOPE, procs=(1000, PID))
    decided = cgroups.decide(_mountinfo(tmp_path), f"0::{SCOPE}\n", PID)
    assert decided.reason == f"the cgroup {SCOPE} holds other processes than the server"


def test_a_cgroup_not_delegated_to_the_user_is_left_alone(tmp_path: Path) -> None:
    here = _cgroup(tmp_path, SCOPE)
    for name in ("cgroup.subtree_control", "cgroup.procs"):
        (here / name).chmod(0o444)
    here.chmod(0o555)
    try:
        code = (
            "import sys; from interpreter_lsp.kernels import cgroups; "
            "print(cgroups.decide(sys.argv[1], sys.argv[2], 4242).reason)"
        )
        prefix: list[str] = []
        if os.geteuid() == 0:  # root may write anywhere: decide as an unprivileged user
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv (util-linux)")
            caps = "+dac_read_search"  # to reach the interpreter and this directory, not to write
            prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            prefix += [f"--inh-caps={caps}", f"--ambient-caps={caps}"]
        env = {**os.environ, "PYTHONPATH": str(Path(cgroups.__file__).parents[2])}
        result = subprocess.run(
            [*prefix, sys.executable, "-c", code, _mountinfo(tmp_path), f"0::{SCOPE}\n"],
            capture_output=True, text=True, timeout=60, check=True, env=env,
        )  # fmt: skip
        assert result.stdout.strip() == f"the cgroup {SCOPE} is not delegated to this user (not writable)"
    finally:
        here.chmod(0o755)


def test_the_launcher_never_runs_a_kernel_outside_the_cgroup_it_was_given(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    prefix = launcher_module.command(launcher_module.Limits(), str(missing))
    result = subprocess.run([*prefix, "echo", "ran"], capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout) == (126, "")
    assert f"cannot join the cgroup {missing}" in result.stderr
    exec_prefix = launcher_module.join_command(str(missing))
    result = subprocess.run([*exec_prefix, "echo", "ran"], capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout) == (126, "")


async def test_status_says_which_limits_hold_here_and_why(workspace_root: Path, home: Path) -> None:
    """Through the real server on this machine: the kernel's limits, and why it has no cgroup (the test
    machines have no delegated cgroup v2 tree with memory and pids)."""
    # The server starts in this test's cgroup, which holds this test too: what the server decides, whatever
    # its pid (-1: no process is the server's here).
    mountinfo, cgroup = (Path(f"/proc/self/{name}").read_text() for name in ("mountinfo", "cgroup"))  # noqa: ASYNC240
    here = cgroups.decide(mountinfo, cgroup, -1)
    s = await start_session(workspace_root, home, configuration={"kernel": {"memoryLimit": 700, "cpuTimeLimit": 50}})
    try:
        await s.run_and_wait("print(1)")
        status = await s.command(p.STATUS, {})
        limits = next(k for k in status["kernels"] if k["language"] == "python")["limits"]
        assert limits.startswith("rlimits, each process: memory 700 MiB, CPU 50 s, processes ")
        assert here.root is None
        assert limits.endswith(f" (no cgroup: {here.reason})"), limits
    finally:
        await stop_session(s)


# ---- a real kernel in a real cgroup --------------------------------------------------------------------------


def _own_cgroup_dir() -> Path | None:
    mounted = cgroups._v2_mount(Path("/proc/self/mountinfo").read_text())
    path = cgroups._v2_path(Path("/proc/self/cgroup").read_text())
    if mounted is None or path is None:
        return None
    return mounted[0] / os.path.relpath(path, mounted[1])


@pytest.fixture
def real_cgroup() -> Iterator[Path]:
    """A fresh cgroup in the real v2 hierarchy, next to this process (skipped where none can be made)."""
    here = _own_cgroup_dir()
    if here is None or not os.access(here, os.W_OK):
        pytest.skip("no writable cgroup v2 directory here")
    made = here / f"ilsp-test-{uuid.uuid4().hex[:8]}"
    try:
        made.mkdir()
    except OSError as error:
        pytest.skip(f"cannot create a cgroup here: {error}")
    try:
        yield made
    finally:
        for child in made.glob("*/"):
            if (child / "cgroup.procs").exists():
                child.rmdir()
        made.rmdir()


def _tree(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        for child in launcher_module.children_of(pending.pop()):
            found.append(child)
            pending.append(child)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


def _cgroup_of(pid: int) -> str:
    return cgroups._v2_path(Path(f"/proc/{pid}/cgroup").read_text()) or ""


DETACH = "import subprocess\nsubprocess.Popen(['setsid', 'sleep', '300']); print('detached')"


def _name_in_hierarchy(path: Path) -> str:
    """`path` (a cgroup directory) as /proc/<pid>/cgroup names it."""
    mounted = cgroups._v2_mount(Path("/proc/self/mountinfo").read_text())
    assert mounted is not None
    return os.path.normpath(os.path.join(mounted[1], os.path.relpath(path, mounted[0])))


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
async def test_a_kernels_whole_tree_runs_in_its_cgroup_which_goes_with_it(
    tmp_path: Path, real_cgroup: Path, sandboxed: bool
) -> None:
    if sandboxed and bwrap_available() is not None:
        pytest.skip("bubblewrap is not usable here")
    root, runtime, specs = tmp_path / "ws", tmp_path / "rt", tmp_path / "specs"
    for d in (root, runtime, specs):
        d.mkdir()
    runtime.chmod(0o700)
    env = dict(os.environ)
    wrapper = None
    if sandboxed:
        config = SandboxConfig(workspace=root, runtime_dir=runtime)
        env = wrap_command([], env, config)[1]

        def wrapper(cmd: list[str], runtime_dir: Path, prefix: list[str]) -> list[str]:
            return wrap_command(cmd, dict(os.environ), replace(config, runtime_dir=runtime_dir), prefix)[0]

    kernel = Kernel(
        choose_kernel("python", root, specs),
        cwd=root,
        runtime_dir=runtime / "python-1",
        env=env,
        on_state=lambda state, message: None,
        command_wrapper=wrapper,
        cgroup_root=real_cgroup,
    )
    await kernel.start()
    try:
        assert kernel.cgroup is not None and kernel.cgroup.parent == real_cgroup, kernel.cgroup_problem
        sink = TextSink()
        reply = await kernel.execute(DETACH, sink)
        assert (reply.status, sink.text) == ("ok", "detached\n")
        pid = kernel.pid()
        assert pid is not None
        # Popen returns once its child has exec'd setsid; setsid's own exec of sleep may still be under way
        # (its /proc cmdline is empty meanwhile) on a busy machine: wait for it, with a generous bound.
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            tree = await asyncio.to_thread(_tree, pid)
            commands = [await asyncio.to_thread(_cmdline, p) for p in tree]
            if any(b"sleep\x00300" in c for c in commands) or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        assert any(b"sleep\x00300" in c for c in commands), commands
        expected = _name_in_hierarchy(kernel.cgroup)
        for member in [pid, *tree]:
            assert _cgroup_of(member) == expected, (member, _cgroup_of(member))
        members = (kernel.cgroup / "cgroup.procs").read_text().split()
        assert sorted(int(m) for m in members) == sorted([pid, *tree])
        if sandboxed:  # kernel code cannot leave its cgroup (nor change its limits): /sys is read-only there
            procs = str(real_cgroup / "cgroup.procs")
            escape = f"try:\n    open({procs!r}, 'w').write('0')\nexcept OSError as e:\n    print(e.strerror)"
            sink = TextSink()
            await kernel.execute(escape, sink)
            assert sink.text == "Read-only file system\n"
        path = kernel.cgroup
    finally:
        await kernel.shutdown()
    assert not path.exists()  # removed with the kernel: its processes are all gone


async def test_a_cgroup_without_the_controllers_falls_back_to_rlimits(tmp_path: Path, real_cgroup: Path) -> None:
    """This machine's v2 hierarchy has no memory controller: the kernel starts with its rlimits, says why,
    and leaves no cgroup behind."""
    if "memory" in (real_cgroup / "cgroup.controllers").read_text().split():
        pytest.skip("this cgroup has the memory controller")
    root, runtime, specs = tmp_path / "ws", tmp_path / "rt", tmp_path / "specs"
    for d in (root, runtime, specs):
        d.mkdir()
    kernel = Kernel(
        choose_kernel("python", root, specs),
        cwd=root,
        runtime_dir=runtime / "python-1",
        env=dict(os.environ),
        on_state=lambda state, message: None,
        limits=launcher_module.Limits(memory_mib=700),
        cgroup_root=real_cgroup,
    )
    await kernel.start()
    try:
        assert kernel.cgroup is None
        assert kernel.cgroup_problem.startswith("creating it failed: "), kernel.cgroup_problem
        assert list(real_cgroup.glob("ilsp-kernel-*")) == []  # noqa: ASYNC240
        pid = kernel.pid()
        assert pid is not None and _cgroup_of(pid) == _cgroup_of(os.getpid())
    finally:
        await kernel.shutdown()


def test_the_server_takes_its_cgroup_by_moving_into_a_leaf(real_cgroup: Path) -> None:
    """`take`, done by a process alone in a real cgroup: it moves into `ilsp-server` (so the cgroup has no
    processes of its own and may enable controllers for its children) and removes a kernel cgroup a killed
    server left. Without enabling controllers: this machine's v2 hierarchy has none of those needed."""
    (real_cgroup / "ilsp-kernel-python-1-stale").mkdir()
    code = (
        "import sys; from pathlib import Path; from interpreter_lsp.kernels import cgroups\n"
        "root = Path(sys.argv[1]); (root / 'cgroup.procs').write_text('0')\n"
        "cgroups.NEEDED = tuple(c for c in cgroups.NEEDED if c in (root / 'cgroup.controllers').read_text().split())\n"
        "cgroups.take(root)\n"
        "print(open('/proc/self/cgroup').read().splitlines()[-1], (root / 'cgroup.procs').read_text().split())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(real_cgroup)], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split(" ", 1) == [f"0::{_name_in_hierarchy(real_cgroup / 'ilsp-server')}", "[]\n"]
    assert not (real_cgroup / "ilsp-kernel-python-1-stale").exists()
