"""Which kernel runs a language in a workspace: python (the workspace's venv when it has ipykernel),
shell (bash_kernel), or any installed kernelspec whose language matches."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..languages import PYTHON, SHELL, canonical_language

log = logging.getLogger(__name__)


class UnknownLanguage(UserError):
    pass


@dataclass(frozen=True)
class KernelChoice:
    """A kernelspec we can launch: `name` within `spec_dir`'s parent (a directory we pass to the
    KernelSpecManager), and a sentence for `interpreter.status` saying where it came from."""

    language: str
    name: str
    kernel_dirs: tuple[str, ...]
    description: str
    interpreter: str | None = None


def _has_ipykernel(python: Path) -> bool:
    """Whether a virtualenv's interpreter can run ipykernel, judged by its site-packages (no subprocess)."""
    venv = python.parent.parent
    return any(venv.glob("lib/python3*/site-packages/ipykernel")) or (
        venv / "Lib" / "site-packages" / "ipykernel"
    ).is_dir()


def _ipykernel_dir(python: Path) -> Path | None:
    if python == Path(sys.executable):
        spec = importlib.util.find_spec("ipykernel")
        return Path(spec.origin).parent if spec is not None and spec.origin else None
    venv = python.parent.parent
    found = [*venv.glob("lib/python3*/site-packages/ipykernel"), venv / "Lib" / "site-packages" / "ipykernel"]
    return next((d for d in found if d.is_dir()), None)


def _supports_curve(python: Path) -> bool:
    """Whether the ipykernel this interpreter runs can encrypt its sockets (CurveZMQ, ipykernel 7.4+), judged by
    its source (no subprocess). Declared in the kernelspec, it is used only over TCP (see kernel.py)."""
    package = _ipykernel_dir(python)
    try:
        return package is not None and "curve_secretkey" in (package / "kernelapp.py").read_text(errors="replace")
    except OSError:
        return False


def workspace_python(root: Path) -> Path | None:
    for name in (".venv", "venv", ".env", "env"):
        for exe in ("bin/python", "Scripts/python.exe"):
            candidate = root / name / exe
            if candidate.exists() and _has_ipykernel(candidate):
                return candidate
    return None


MEMORY_HISTORY = "--HistoryManager.hist_file=:memory:"  # why: at the kernelspec below
# ipykernel sleeps 0.5 ms before each execute reply, a workaround (its own FIXME) for clients that end a run on
# the reply and could miss output flushed just before it. The server ends a run on the reply *and* the idle
# status, which comes after every output on the same iopub socket, so nothing is lost without it; with it,
# every run and every undo snapshot request pays the pause (~0.6 ms of a print(1)'s ~7 ms, measured).
NO_REPLY_PAUSE = "--Kernel._execute_sleep=0"


# bash_kernel drives bash through pexpect, whose `spawn` waits `delaybeforesend` (50 ms) before each line it
# sends. A cell sends two lines (the code, then `echo $?` for its exit status) and a start several, so a bare
# `echo 1` took ~106 ms and a start ~2.8 s, nearly all of it that sleep (bench/roundtrip.py measures both
# against upstream bash_kernel). The pause guards against a program that turns terminal echo off only after
# printing its prompt (a password prompt) and would echo input sent too early. bash_kernel's bash never does:
# pexpect opens its terminal with echo off before bash starts (`echo=False`), readline keeps the echo state it
# finds, and each line goes out only after the prompt it answers has been read. So the pause buys nothing.
# Inline code, not a module of ours: the kernel runs on the server's interpreter, where a sandboxed kernel
# sees the installed packages but not an editable install's source directory (under /tmp or a home).
NO_SEND_PAUSE = (
    "import pexpect; _init = pexpect.spawn.__init__\n"
    "def _no_pause(self, *args, **kwargs):\n"
    "    _init(self, *args, **kwargs); self.delaybeforesend = None\n"
    "pexpect.spawn.__init__ = _no_pause\n"
)


# ipykernel imports debugpy (with pydevd's bundle) when it builds its kernel, for the Jupyter debug protocol, which
# the server never speaks (the kernelspec says "debugger": false): ~85 ms of a kernel's ~315 ms of CPU to start
# and ~8 MB of its memory, measured here. Its own fallback when debugpy is not installed is taken instead: the
# import fails while ipykernel's debugger module loads, then debugpy is importable again, so code that runs
# `import debugpy` (to attach an editor's debugger to the kernel) gets the real one. A debugpy already loaded
# before the kernel (by a sitecustomize) is left alone. An ipykernel without that module loses nothing.
NO_DEBUGGER = (
    "if 'debugpy' not in sys.modules:\n"
    "    sys.modules['debugpy'] = None\n"
    "    try:\n"
    "        import ipykernel.debugger\n"
    "    except Exception:\n"
    "        pass\n"
    "    finally:\n"
    "        if sys.modules.get('debugpy', 0) is None:\n"
    "            del sys.modules['debugpy']\n"
)

# ipykernel 7 reads every shell request on a thread of its own, for subshells (concurrent shells inside one
# kernel, which the server never opens), and hands it to the main thread over an in-process socket, which
# publishes "busy" through the iopub thread: two more thread wake-ups for every request. Measured on a 2-core
# machine, a print(1) from request to reply: ~0.5-1.5 ms of ~9 ms. Without that thread (the branch ipykernel keeps
# for kernels that have none) the main thread reads the shell socket itself, as in ipykernel 6, and the kernel
# says it has no subshells (kernel_info's supported_features). An ipykernel without the thread (6.x) is left as
# it is; anything unexpected leaves the kernel as ipykernel builds it.
NO_SUBSHELL_THREAD = (
    "try:\n"
    "    from ipykernel.kernelapp import IPKernelApp as _App\n"
    "    if 'shell_channel_thread' in _App.class_trait_names():\n"
    "        def _sockets(self, *args, _init=_App.init_sockets, **kwargs):\n"
    "            _init(self, *args, **kwargs); self.shell_channel_thread = None\n"
    "        _App.init_sockets = _sockets\n"
    "        del _sockets\n"
    "    del _App\n"
    "except Exception:\n"
    "    pass\n"
)


def run_module(module: str, before: str = "") -> list[str]:
    """Interpreter arguments that run `module` as `python -m` would, but found on a safe path: the kernel starts
    in the workspace, and `-m` puts the working directory first on sys.path, so a workspace file named
    ipykernel_launcher.py or bash_kernel.py (written by anyone, or by sandboxed code for the next start without
    the sandbox) would run instead. `python -P` (3.11+) also sets sys.flags.safe_path, which IPython 9.7+ reads
    to keep the workspace off sys.path for good, so `import mymodule` of a workspace file would stop working in
    the kernel; this form works the same on 3.10 to 3.13: the working directory ('' from -c) is dropped while
    the module is found and imported, and IPython puts it back (after the standard library) once the kernel
    runs, as for any Jupyter kernel."""
    code = (
        "import sys; sys.path[:1] == [''] and sys.path.pop(0)\n"
        f"{before}"
        f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return ["-c", code]


def _write_spec(specs_root: Path, name: str, spec: dict) -> None:
    folder = specs_root / name
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "kernel.json"
    text = json.dumps(spec, indent=1)
    if not target.exists() or target.read_text() != text:
        tmp = target.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, target)


def _is_path(setting: str) -> bool:
    """A path ("~/venv/bin/python", "./.venv/bin/python", "C:\\Python\\python.exe") or a kernelspec name."""
    separators = {os.sep, os.altsep or os.sep, "/"}
    return any(sep in setting for sep in separators) or setting.startswith((".", "~"))


def _python_choice(root: Path, specs_root: Path, configured: str | None) -> KernelChoice:
    if configured and not _is_path(configured):
        # A kernelspec name the user installed (e.g. "python3", "myenv").
        return KernelChoice(PYTHON, configured, (), f"kernelspec {configured!r} (interpreter.kernel.python)")
    if configured:
        expanded = os.path.expanduser(configured)  # "~/venvs/x/bin/python": the user's home, not the workspace's
        exe = Path(expanded) if os.path.isabs(expanded) else root / expanded
        if not exe.exists():
            raise UnknownLanguage(
                f"interpreter.kernel.python is {configured!r}, which does not exist: "
                "set it to a Python interpreter path or a kernelspec name"
            )
        where = f"{exe} (interpreter.kernel.python)"
    elif (venv_python := workspace_python(root)) is not None:
        exe, where = venv_python, f"the workspace virtualenv {venv_python.parent.parent}"
    else:
        exe = Path(sys.executable)
        where = f"the server's interpreter {sys.executable} (no workspace venv with ipykernel)"
    digest = hashlib.sha1(str(exe).encode()).hexdigest()[:10]
    name = f"ilsp-python-{digest}"
    _write_spec(
        specs_root,
        name,
        {
            # IPython's history database (~/.ipython/profile_default/history.sqlite) is kept in memory: the
            # conversation is the record, masked; on disk, one sqlite file shared by every kernel of every
            # workspace would keep model-run code (and any secret in it) in plain text, and kernels racing
            # for it print "ERROR! Session/line number was not unique" into a run's output.
            "argv": [
                str(exe), *run_module("ipykernel_launcher", before=NO_DEBUGGER + NO_SUBSHELL_THREAD),
                "-f", "{connection_file}", MEMORY_HISTORY, NO_REPLY_PAUSE,
            ],
            "display_name": f"Python ({exe})",
            "language": "python",
            "interrupt_mode": "signal",
            "metadata": {"debugger": False, **({"supported_encryption": ["curve"]} if _supports_curve(exe) else {})},
        },
    )
    return KernelChoice(PYTHON, name, (str(specs_root),), where, interpreter=str(exe))


def _shell_problem() -> str | None:
    """Why the shell kernel cannot run here, in words a user can act on; None when it can."""
    if sys.platform == "win32":
        # bash_kernel drives bash through a pseudo-terminal (pexpect), which Windows does not have.
        return (
            "The shell kernel does not run on Windows: bash_kernel needs a Unix terminal. Run the server "
            "inside WSL to use shell code blocks, or run the command from python (subprocess.run)."
        )
    if shutil.which("bash") is None:
        return (
            "The shell kernel needs bash, which is not on PATH: install bash (e.g. `apt install bash`, "
            "`apk add bash`, `brew install bash`) and restart the server, or run the command from python "
            "(subprocess.run)."
        )
    return None


def _shell_choice(specs_root: Path) -> KernelChoice:
    if (problem := _shell_problem()) is not None:
        raise UnknownLanguage(problem)
    name = "ilsp-bash"
    _write_spec(
        specs_root,
        name,
        {
            # bash_kernel, less pexpect's 50 ms pause before each line it sends (why: NO_SEND_PAUSE).
            "argv": [sys.executable, *run_module("bash_kernel", before=NO_SEND_PAUSE), "-f", "{connection_file}"],
            "display_name": "Bash",
            "language": "bash",
            "interrupt_mode": "signal",
            "env": {"PS1": "$", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"},
            # bash_kernel is an ipykernel application on the server's interpreter.
            "metadata": {"supported_encryption": ["curve"]} if _supports_curve(Path(sys.executable)) else {},
        },
    )
    return KernelChoice(SHELL, name, (str(specs_root),), "bash_kernel (bundled with the server)")


def _kernel_dirs() -> list[str]:
    """Where jupyter_client looks for kernelspecs by default (its KernelSpecManager._kernel_dirs_default):
    the Jupyter data paths, then IPython's legacy directory, here found without importing IPython (which
    jupyter_client does to find it: ~80 ms and a few MB in the server, at every start, for one path)."""
    from jupyter_core.paths import jupyter_path

    ipython = os.environ.get("IPYTHONDIR") or os.path.join(os.path.expanduser("~"), ".ipython")
    return [*jupyter_path("kernels"), os.path.join(ipython, "kernels")]


def installed_languages() -> dict[str, str]:
    """Installed kernelspecs by canonical language: {language: kernelspec name}."""
    from .connection import wait_loaded

    wait_loaded()  # jupyter_client comes from the kernel plumbing's import (connection.load), never beside it
    from jupyter_client.kernelspec import KernelSpecManager

    # Found and each read by jupyter_client (find_kernel_specs, its KernelSpec), not through get_all_specs, and
    # not ensure_native_kernel: both import ipykernel, and IPython with it, into the server (for a spec named
    # python3, or where there is none) only to tell whether it is ipykernel's own; the server's python kernel
    # is its own choice anyway.
    listing = KernelSpecManager(kernel_dirs=_kernel_dirs(), ensure_native_kernel=False)
    found: dict[str, str] = {}
    for name, resource_dir in sorted(listing.find_kernel_specs().items()):
        try:
            spec = listing.kernel_spec_class.from_resource_dir(resource_dir)
        except Exception as exc:  # a broken kernel.json: that kernel is not offered
            log.debug("kernelspec %s in %s could not be read: %s", name, resource_dir, exc)
            continue
        language = canonical_language(str(spec.language or ""))
        if language:
            found.setdefault(language, name)
    return found


def choose_kernel(language: str, root: Path, specs_root: Path, python_setting: str | None = None) -> KernelChoice:
    lang = canonical_language(language)
    if lang == PYTHON:
        return _python_choice(root, specs_root, python_setting)
    if lang == SHELL:
        return _shell_choice(specs_root)
    installed = installed_languages()
    if lang in installed:
        return KernelChoice(lang, installed[lang], (), f"kernelspec {installed[lang]!r}")
    available = sorted({PYTHON, SHELL, *installed})
    raise UnknownLanguage(
        f"No kernel for language {language!r}. Available: {', '.join(available)}. "
        "Install a Jupyter kernel for it (its kernelspec's language must match)."
    )
