"""The seccomp program seccomp.py builds, run instruction by instruction by a small classic-BPF evaluator of
the test's own, for every machine it supports (this machine runs only one of them for real: see
test_sandbox_leaks.py::test_a_sandboxed_kernel_reaches_no_keyring)."""

from __future__ import annotations

import struct

import pytest

from interpreter_lsp.kernels import seccomp

# The test's own tables (not the module's): <asm/unistd*.h> of each architecture.
AUDIT_ARCH = {"x86_64": 0xC000003E, "i386": 0x40000003, "aarch64": 0xC00000B7, "arm": 0x40000028}
KEYRING_CALLS = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250},
    "i386": {"add_key": 286, "request_key": 287, "keyctl": 288},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219},
    "arm": {"add_key": 309, "request_key": 310, "keyctl": 311},
}
OTHERS = {"x86_64": {"read": 0, "openat": 257, "clone3": 435}, "i386": {"read": 3, "socketcall": 102},
          "aarch64": {"read": 63, "openat": 56, "clone3": 435}, "arm": {"read": 3, "openat": 322}}  # fmt: skip
ALLOW, EPERM = 0x7FFF0000, 0x00050001


def run(program: bytes, arch: int, nr: int) -> int:
    """What the kernel would do with seccomp_data {nr, arch}: the return value of the filter."""
    data = struct.pack("=iI", nr, arch) + bytes(56)
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    a, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            a = struct.unpack_from("=I", data, k)[0]
        elif code == 0x54:
            a &= k
        elif code == 0x15:
            pc += jt if a == k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine, arches", [("x86_64", ["x86_64", "i386"]), ("aarch64", ["aarch64", "arm"])])
def test_keyring_calls_fail_with_eperm_and_nothing_else_does(machine: str, arches: list[str]) -> None:
    program = seccomp.program(machine)
    assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64
    for arch in arches:
        for name, nr in KEYRING_CALLS[arch].items():
            assert run(program, AUDIT_ARCH[arch], nr) == EPERM, (arch, name)
        for name, nr in OTHERS[arch].items():
            assert run(program, AUDIT_ARCH[arch], nr) == ALLOW, (arch, name)
    if machine == "x86_64":  # the x32 table: the same numbers with bit 30 set
        for name, nr in KEYRING_CALLS["x86_64"].items():
            assert run(program, AUDIT_ARCH["x86_64"], nr | 0x40000000) == EPERM, ("x32", name)
        assert run(program, AUDIT_ARCH["x86_64"], 0x40000000) == ALLOW
    # Another machine's numbers under this machine's architecture mean other calls: allowed.
    other = "aarch64" if machine == "x86_64" else "x86_64"
    assert run(program, AUDIT_ARCH[arches[0]], KEYRING_CALLS[other]["keyctl"]) == ALLOW


def test_the_launcher_is_told_keyctl_and_the_program() -> None:
    flag, value = seccomp.launcher_arguments("aarch64")
    number, program = value.split(":")
    assert (flag, int(number), bytes.fromhex(program)) == ("--no-keyring", 219, seccomp.program("aarch64"))
    assert seccomp.program("riscv64") is None and seccomp.launcher_arguments("riscv64") == []
