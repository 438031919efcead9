"""What a kernel must not hold or reach, through the real server (issue 18, point 4): no kernel keyring in the
sandbox, no descriptor of the server's (its stderr included), and no workspace module in place of the
kernel's own launcher module, with or without the sandbox."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import textwrap
import uuid
from pathlib import Path

import pytest

from harness import needs_bwrap, start_session, stop_session

SANDBOX = {"sandbox": "bubblewrap"}
TRUSTED = {"trusted": True}

# <linux/keyctl.h>; system call numbers of this machine (the test's own table, not the server's)
KEY_SPEC_USER_KEYRING = -4
KEYCTL_GET_KEYRING_ID, KEYCTL_UNLINK, KEYCTL_SEARCH, KEYCTL_READ = 0, 9, 10, 11
SYSCALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl

KEYRING_ATTACK = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD_KEY, REQUEST_KEY, KEYCTL = {numbers}
USER = ctypes.c_long(-4)
def call(*args):
    result = libc.syscall(*args)
    return result if result >= 0 else errno.errorcode[ctypes.get_errno()]
results = {{
    "user-keyring": call(KEYCTL, 0, USER, 0),
    "search": call(KEYCTL, 10, USER, b"user", {canary!r}.encode(), 0),
    "request_key": call(REQUEST_KEY, b"user", {canary!r}.encode(), None, 0),
    "add_key": call(ADD_KEY, b"user", {planted!r}.encode(), b"planted", 7, USER),
    "join": call(KEYCTL, 1, None),
}}
try:
    results["proc-keys"] = {canary!r} in open("/proc/keys").read()
except OSError as error:
    results["proc-keys"] = error.strerror
print(json.dumps(results))
"""


def _keyring() -> tuple[ctypes.CDLL, tuple[int, int, int]]:
    numbers = SYSCALLS.get(platform.machine())
    if numbers is None:
        pytest.skip(f"no system call table for {platform.machine()} in this test")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(numbers[2], KEYCTL_GET_KEYRING_ID, ctypes.c_long(KEY_SPEC_USER_KEYRING), 1) < 0:
        pytest.skip(f"no kernel keyring here: {os.strerror(ctypes.get_errno())}")
    return libc, numbers


def _find(libc: ctypes.CDLL, numbers: tuple[int, int, int], description: str) -> int:
    user = ctypes.c_long(KEY_SPEC_USER_KEYRING)
    return libc.syscall(numbers[2], KEYCTL_SEARCH, user, b"user", description.encode(), 0)


@needs_bwrap
async def test_a_sandboxed_kernel_reaches_no_keyring(workspace_root: Path, home: Path) -> None:
    """A secret in the user keyring (as `keyctl add user … @u` would store it): the sandboxed kernel can
    neither find it nor add a key beside it; every keyring system call fails with EPERM."""
    libc, numbers = _keyring()
    canary, planted = f"ilsp-canary-{uuid.uuid4().hex}", f"ilsp-planted-{uuid.uuid4().hex}"
    key = libc.syscall(numbers[0], b"user", canary.encode(), b"SECRET", 6, ctypes.c_long(KEY_SPEC_USER_KEYRING))
    assert key > 0, os.strerror(ctypes.get_errno())
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        code = KEYRING_ATTACK.format(numbers=numbers, canary=canary, planted=planted)
        run_id, status = await s.run_and_wait(code)
        assert status["state"] == "ok", s.text(run_id)
        results = json.loads(s.text(run_id, ("stdout",)))
        stray = _find(libc, numbers, planted)
        if stray > 0:
            libc.syscall(numbers[2], KEYCTL_UNLINK, ctypes.c_long(stray), ctypes.c_long(KEY_SPEC_USER_KEYRING))
        assert stray < 0, f"the kernel added a key to the user keyring: {results}"
        for call in ("user-keyring", "search", "request_key", "add_key", "join"):
            assert results[call] == "EPERM", (call, results)
        assert results["proc-keys"] is not True, results  # hidden (unreadable) or without the secret
        # Untouched: the secret is still there, as it was.
        buffer = ctypes.create_string_buffer(64)
        read = libc.syscall(numbers[2], KEYCTL_READ, ctypes.c_long(key), buffer, 64)
        assert buffer.raw[:read] == b"SECRET"
    finally:
        libc.syscall(numbers[2], KEYCTL_UNLINK, ctypes.c_long(key), ctypes.c_long(KEY_SPEC_USER_KEYRING))
        await stop_session(s)


DESCRIPTORS = """
import json, os
def links(pid):
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return found
seen = {}
for pid in [p for p in os.listdir("/proc") if p.isdigit()] if SANDBOXED else ["self", str(os.getppid())]:
    try:
        seen[pid] = links(pid)
    except OSError:
        pass
try:
    with open("/proc/1/fd/2" if SANDBOXED else "/proc/self/fd/2", "w") as handle:
        handle.write("KERNEL-WAS-HERE\\n")
    wrote = "DONE"
except OSError as error:
    wrote = error.strerror
print(json.dumps({"links": seen, "wrote": wrote}))
"""
PSEUDO = ("socket:", "pipe:", "anon_inode:", "/dev/null", "/dev/urandom", "/dev/pts/", "/dev/ptmx")


@pytest.mark.parametrize("sandboxed", [pytest.param(True, marks=needs_bwrap), False], ids=["sandboxed", "plain"])
async def test_no_descriptor_of_the_servers_reaches_the_kernel(
    workspace_root: Path, home: Path, tmp_path: Path, sandboxed: bool
) -> None:
    """The server's stderr is a file here (as an editor's log can be). Kernel code writes to fd 2 of the
    sandbox's first process (/proc/1/fd/2) and of itself: the server's file is untouched (what it wrote goes
    to the kernel's own stderr pipe, which the server logs redacted). Every descriptor
    of every process in the sandbox (bwrap's init, the launcher, the kernel) is the kernel's own."""
    server_stderr = tmp_path / "server-stderr.log"
    server_stderr.write_text("SERVER-LOG-START\n")
    prefix = ("/bin/sh", "-c", 'exec "$@" 2>>"$0"', str(server_stderr))
    configuration = SANDBOX if sandboxed else {}
    s = await start_session(
        workspace_root, home, configuration=configuration, env={"HOME": str(home)}, init_options=TRUSTED,
        command_prefix=prefix,
    )  # fmt: skip
    try:
        run_id, status = await s.run_and_wait(f"SANDBOXED = {sandboxed}\n{DESCRIPTORS}")
        assert status["state"] == "ok", s.text(run_id)
        found = json.loads(s.text(run_id, ("stdout",)))
    finally:
        await stop_session(s)
    text = server_stderr.read_text()
    assert text.startswith("SERVER-LOG-START\n") and "KERNEL-WAS-HERE" not in text, found
    for pid, links in found["links"].items():
        for fd, target in links.items():
            assert target != str(server_stderr), (pid, fd, found)
            own = target.startswith(PSEUDO) or target.endswith("/stderr.log") or target.startswith("/proc/")
            assert own, f"process {pid} holds {target} as fd {fd}: {found}"
    # The sandbox's first process (bwrap) and the launcher write to the kernel's own stderr pipe
    # (kernels/stderr.py; the kernel process itself has ipykernel's pipe as fd 2).
    launcher = found["links"]["1" if sandboxed else next(p for p in found["links"] if p != "self")]
    assert launcher["2"].startswith("pipe:"), found


SHADOW = """
open({marker!r}, "a").write(__name__ + " ran from the workspace\\n")
raise SystemExit(3)
"""


async def _both_kernels_answer(s) -> None:
    run_id, status = await s.run_and_wait("print('the real kernel')")
    assert (status["state"], s.text(run_id).strip()) == ("ok", "the real kernel"), status
    run_id, status = await s.run_and_wait("echo the real shell", "shell")
    assert (status["state"], s.text(run_id).strip()) == ("ok", "the real shell"), status


async def test_a_workspace_module_does_not_shadow_the_kernels_own(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """A trusted workspace (no sandbox) with ipykernel_launcher.py and bash_kernel.py at its top, and
    pexpect.py, which the shell kernel's launch code imports before bash_kernel (specs.NO_SEND_PAUSE): the
    kernels start in the workspace, yet run the real modules. (Not runpy.py: on Python 3.10 it would take
    over this test's own server, started with `python -m` in the workspace, which no client does.)"""
    marker = tmp_path / "shadow-ran"
    for name in ("ipykernel_launcher.py", "bash_kernel.py", "pexpect.py"):
        (workspace_root / name).write_text(SHADOW.format(marker=str(marker)))
    s = await start_session(workspace_root, home, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        await _both_kernels_answer(s)
    finally:
        await stop_session(s)
    assert not marker.exists(), marker.read_text()


@needs_bwrap
async def test_sandboxed_code_cannot_plant_a_launcher_for_the_next_start(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """Sandboxed code writes ipykernel_launcher.py and bash_kernel.py into the workspace (it may write files
    there); the next start without the sandbox runs the real ones."""
    marker = tmp_path / "planted-ran"
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        plant = textwrap.dedent(f"""
            for name in ("ipykernel_launcher.py", "bash_kernel.py", "pexpect.py"):
                with open(name, "w") as handle:
                    handle.write({SHADOW.format(marker=str(marker))!r})
            print("planted")
        """)
        run_id, status = await s.run_and_wait(plant)
        assert (status["state"], s.text(run_id).strip()) == ("ok", "planted"), s.text(run_id)
    finally:
        await stop_session(s)
    assert (workspace_root / "ipykernel_launcher.py").exists()
    s = await start_session(workspace_root, home, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        await _both_kernels_answer(s)
    finally:
        await stop_session(s)
    assert not marker.exists(), marker.read_text()
