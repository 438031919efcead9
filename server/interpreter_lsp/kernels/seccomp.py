"""The seccomp filter of a sandboxed kernel: no kernel keyring (keyctl, add_key, request_key fail with EPERM).

The keyring holds Kerberos ticket caches and secrets stored with `keyctl`, and the session keyring (and, for
root, the user keyring) is reachable from any process of the session. The launcher inside the sandbox first
joins a new, empty session keyring, then loads this filter on itself, so the kernel and everything it starts
inherit both; a seccomp filter cannot be removed, and keyctl itself is what would join another keyring.

Why a builder of our own: the program is eleven instructions per architecture, built once per start, and
must load from the launcher (standard library only). libseccomp's Python bindings are not on PyPI (Debian's
python3-seccomp serves the system Python only), and pyseccomp, their ctypes stand-in, has had no release
since 2021. This module only builds bytes; launcher.py loads them (prctl PR_SET_SECCOMP).

Machines: x86_64 (and its 32-bit i386 and x32 system call tables, which a process can reach as well) and
aarch64 (and 32-bit arm). Elsewhere `program()` returns None and the sandbox says the keyring is not
filtered there (docs/security.md).
"""

from __future__ import annotations

import os
import struct

# <linux/audit.h>
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_AARCH64 = 0xC00000B7
AUDIT_ARCH_ARM = 0x40000028
X32_SYSCALL_BIT = 0x40000000  # x32 system calls are the x86_64 numbers with this bit set

# (architecture, (add_key, request_key, keyctl), bits cleared from the number before comparing)
_TABLES = {
    "x86_64": [(AUDIT_ARCH_X86_64, (248, 249, 250), X32_SYSCALL_BIT), (AUDIT_ARCH_I386, (286, 287, 288), 0)],
    "aarch64": [(AUDIT_ARCH_AARCH64, (217, 218, 219), 0), (AUDIT_ARCH_ARM, (309, 310, 311), 0)],
}
# The machine's own keyctl number: the launcher calls keyctl(KEYCTL_JOIN_SESSION_KEYRING) before the filter.
KEYCTL = {"x86_64": 250, "aarch64": 219}

# <linux/filter.h>, <linux/seccomp.h>
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = seccomp_data[k]
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K: pc += (A == k) ? jt : jf
_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K: A &= k
_RET_K = 0x06  # BPF_RET | BPF_K
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter, native byte order


def program(machine: str | None = None) -> bytes | None:
    """The filter for `machine` (default: this one), as struct sock_filter[]; None where unsupported.

    One block per architecture the machine runs:
        A = arch; if A != ARCH: skip the block
        A = nr [& ~bits]; if A == add_key or A == request_key or A == keyctl: return EPERM
        return ALLOW
    and ALLOW after the last block (an architecture the machine cannot run)."""
    tables = _TABLES.get(machine or os.uname().machine)
    if tables is None:
        return None
    out = b""
    for arch, numbers, bits in tables:
        body = [_insn(_LD_W_ABS, _NR)]
        if bits:
            body.append(_insn(_AND_K, 0xFFFFFFFF & ~bits))
        for index, number in enumerate(numbers):
            body.append(_insn(_JEQ_K, number, jt=len(numbers) - index, jf=0))  # to the EPERM below
        body += [_insn(_RET_K, RET_ALLOW), _insn(_RET_K, RET_EPERM)]
        out += _insn(_LD_W_ABS, _ARCH) + _insn(_JEQ_K, arch, jt=0, jf=len(body)) + b"".join(body)
    return out + _insn(_RET_K, RET_ALLOW)


def launcher_arguments(machine: str | None = None) -> list[str]:
    """What launcher.py needs to drop the keyring (`--no-keyring KEYCTL_NR:HEX`), or [] where unsupported."""
    machine = machine or os.uname().machine
    filter_program = program(machine)
    if filter_program is None:
        return []
    return ["--no-keyring", f"{KEYCTL[machine]}:{filter_program.hex()}"]
