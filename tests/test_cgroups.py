"""Whether a kernel gets a cgroup of its own (kernels/cgroups.py), decided on a directory laid out like a
cgroup v2 tree; and what the server says about it on this machine, through the real server.

Only the decision is checked on a plain directory: moving processes and the limits themselves need a real
cgroup v2 tree with the memory and pids controllers delegated, which the machines the tests run on do not
offer (docs/security.md section 5 says why, and what was found)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels import cgroups
from interpreter_lsp.kernels import launcher as launcher_module

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
