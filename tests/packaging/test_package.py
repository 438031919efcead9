"""The package a user installs: the wheel and sdist as `python -m build` makes them (license, metadata,
`twine check`), installed beside a project's typical pins with pip, and as an isolated tool with
`uv tool install` and `pipx install`. Real builds and real installs from the package index: minutes, so
these run only in scripts/test.d/50-package.sh (`-m packaging`)."""

from __future__ import annotations

import asyncio
import email.parser
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

import interpreter_lsp

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
VERSION = interpreter_lsp.__version__
BIN = Path(sys.executable).parent
INSTALL_TIMEOUT = 1200  # a resolver backtracking over litellm releases on a loaded machine
# A project's environment as users have it: pins that the old exact pins of this package refused.
USER_PINS = [
    "ipykernel==6.29.5",
    "httpx==0.27.2",
    "pydantic==2.8.2",
    "requests==2.31.0",
    "numpy==1.26.4",
    "jupyter_client==8.6.3",
]


def _run(args: list[str | Path], timeout: float = 600, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel (built from the sdist), as `python -m build` makes them."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--installer", "uv", "--outdir", out, REPO], env=_tool_env())
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def _tool_env(**extra: str) -> dict[str, str]:
    """Our environment with .venv/bin (uv) first on PATH and no downloaded Pythons."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env.update(extra)
    return env


def _metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text)


def test_wheel_and_sdist_pass_twine_check(dist: dict[str, Path]) -> None:
    done = _run([sys.executable, "-m", "twine", "check", "--strict", dist["wheel"], dist["sdist"]])
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_wheel_carries_the_license_and_trustworthy_metadata(dist: dict[str, Path]) -> None:
    assert dist["wheel"].name == f"interpreter_lsp-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = wheel.namelist()
        info = f"interpreter_lsp-{VERSION}.dist-info"
        meta = _metadata(wheel.read(f"{info}/METADATA").decode())
        assert wheel.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert "interpreter_lsp/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "clients/"))], names
    assert "interpreter-lsp = interpreter_lsp.__main__:main" in entry_points

    assert meta["Name"] == "interpreter-lsp" and meta["Version"] == VERSION
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = meta.get_all("Classifier")
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX expression says it
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls)

    # The PyPI page: the package README, whose links all work outside the repository.
    assert meta["Description-Content-Type"] == "text/markdown"
    readme = meta.get_payload()
    assert "pipx install interpreter-lsp" in readme and "uv tool install interpreter-lsp" in readme
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links and all(link.startswith("https://") for link in links), links


def test_dependencies_are_ranges_that_never_admit_the_compromised_litellm(dist: dict[str, Path]) -> None:
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        meta = _metadata(wheel.read(f"interpreter_lsp-{VERSION}.dist-info/METADATA").decode())
    runtime = [Requirement(r) for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert runtime
    exact = [str(r) for r in runtime if any(s.operator in ("==", "===") for s in r.specifier)]
    assert not exact, f"exact pins make installs beside other pins fail: {exact}"
    names = {r.name.replace("_", "-").lower() for r in runtime}
    assert "platformdirs" not in names  # imported nowhere
    assert "litellm" not in names and "mcp" not in names  # extras: a plain install stays light
    extras = [Requirement(r) for r in meta.get_all("Requires-Dist") if "extra ==" in r]
    (litellm,) = [r for r in extras if r.name == "litellm" and r.marker and r.marker.evaluate({"extra": "providers"})]
    assert not litellm.specifier.contains("1.82.7") and not litellm.specifier.contains("1.82.8")
    assert litellm.specifier.contains("1.83.0")
    ipykernel = next(r for r in runtime if r.name == "ipykernel")
    assert ipykernel.specifier.contains("6.29.5")  # what runs on Python 3.10


def test_sdist_carries_the_license_and_builds_on_its_own(dist: dict[str, Path]) -> None:
    root = f"interpreter_lsp-{VERSION}"
    with tarfile.open(dist["sdist"]) as sdist:
        names = sdist.getnames()
        pkg_info = sdist.extractfile(f"{root}/PKG-INFO")
        assert pkg_info is not None
        meta = _metadata(pkg_info.read().decode())
        license_file = sdist.extractfile(f"{root}/LICENSE")
        assert license_file is not None and license_file.read() == (REPO / "LICENSE").read_bytes()
    for needed in ("pyproject.toml", "server/README.md", "server/interpreter_lsp/__init__.py"):
        assert f"{root}/{needed}" in names
    assert meta["License-Expression"] == "MIT" and meta["Version"] == VERSION


def _python310() -> str:
    """Python 3.10, the oldest we support, where a project pins ipykernel 6 (7.4 needs 3.11)."""
    pyenv = sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.10.*/bin/python3.10")))
    for candidate in [shutil.which("python3.10"), *pyenv]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    pytest.fail("Python 3.10 was not found (neither python3.10 on PATH nor pyenv's): install it to run this test")


def _lsp_handshake(exe: Path, cwd: Path) -> None:
    """initialize, shutdown, exit against the installed server, as an editor sends them (each request's
    answer awaited): it starts, answers, and exits with code 0."""
    asyncio.run(asyncio.wait_for(_handshake(exe, cwd), 120))


async def _handshake(exe: Path, cwd: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(exe), cwd=cwd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def answer(request_id: int) -> dict[str, Any]:
        while True:
            length = 0
            while (line := await proc.stdout.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert length, "the server closed its stdout before answering"
            message = json.loads(await proc.stdout.readexactly(length))
            if message.get("id") == request_id and "method" not in message:
                return message

    send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": cwd.as_uri(), "capabilities": {}}})
    assert "capabilities" in (await answer(1))["result"]
    send({"method": "initialized", "params": {}})
    send({"id": 2, "method": "shutdown"})
    assert "error" not in await answer(2)
    send({"method": "exit"})
    _, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr.decode()[-3000:]


@pytest.mark.timeout(INSTALL_TIMEOUT + 300)
def test_installs_with_pip_beside_a_projects_pins(dist: dict[str, Path], tmp_path: Path) -> None:
    """A user's project venv (Python 3.10) with common pins; pip installs the wheel beside them in one
    resolution, keeps every pin, and the installed server starts."""
    venv = tmp_path / "project venv"
    _run([_python310(), "-m", "venv", venv])
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    _run([python, "-m", "pip", "install", "-q", *USER_PINS, dist["wheel"]], timeout=INSTALL_TIMEOUT, env=env)

    installed = {
        p["name"].lower().replace("_", "-"): p["version"]
        for p in json.loads(_run([python, "-m", "pip", "list", "--format", "json"], env=env).stdout)
    }
    for pin in USER_PINS:
        name, version = pin.split("==")
        assert installed.get(name.lower().replace("_", "-")) == version, f"{pin} was changed: {installed}"
    assert installed["interpreter-lsp"] == VERSION
    _run([python, "-m", "pip", "check"], env=env)
    assert not list(venv.rglob("litellm_init.pth"))
    _lsp_handshake(venv / "bin" / "interpreter-lsp", tmp_path)


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_uv_tool_install_is_isolated_and_runs(dist: dict[str, Path], tmp_path: Path) -> None:
    tools, bin_dir = tmp_path / "uv tools", tmp_path / "bin"
    env = _tool_env(UV_TOOL_DIR=str(tools), UV_TOOL_BIN_DIR=str(bin_dir))
    _run([BIN / "uv", "tool", "install", "--compile-bytecode", "--python", sys.executable, dist["wheel"]],
         timeout=INSTALL_TIMEOUT, env=env)
    exe = bin_dir / "interpreter-lsp"
    assert _run([exe, "--version"]).stdout == f"interpreter-lsp {VERSION}\n"
    # Its own environment under the tool directory, not ours.
    assert str(tools) in exe.resolve().read_text(errors="replace").splitlines()[0] or str(tools) in str(exe.resolve())
    _lsp_handshake(exe, tmp_path)


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_pipx_install_is_isolated_and_runs(dist: dict[str, Path], tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "pipx home", tmp_path / "bin"
    env = _tool_env(PIPX_HOME=str(home), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(tmp_path / "man"))
    _run([BIN / "pipx", "install", "--python", sys.executable, dist["wheel"]], timeout=INSTALL_TIMEOUT, env=env)
    exe = bin_dir / "interpreter-lsp"
    assert _run([exe, "--version"]).stdout == f"interpreter-lsp {VERSION}\n"
    assert str(home) in str(exe.resolve())
    _lsp_handshake(exe, tmp_path)
