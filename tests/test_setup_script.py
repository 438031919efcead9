"""scripts/setup.sh's system packages: `--server-only` (what scripts/try.sh runs to let a user try the Neovim
client) installs none of the test setup's packages (scripts/setup.d/*.apt: Emacs); the full setup (what
scripts/test.sh and CI run) does. Run on a copy of the script with an apt-get on PATH that only records
what it was asked; the script stops right after, at the uv step (the copy has no uv.lock)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def apt_requests(tmp_path: Path, *args: str) -> list[str]:
    checkout = tmp_path / "checkout"
    (checkout / "scripts" / "setup.d").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", checkout / "scripts" / "setup.sh")
    shutil.copy(REPO / "scripts" / "setup.d" / "emacs.apt", checkout / "scripts" / "setup.d" / "emacs.apt")
    # A package of the test setup that is surely missing here, whatever this machine has installed.
    (checkout / "scripts" / "setup.d" / "zz-test.apt").write_text("no-such-command-ilsp ilsp-test-package\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    record = tmp_path / "apt.log"
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> "{record}"\n')
    (fake / "apt-get").chmod(0o755)
    (fake / "id").write_text("#!/bin/sh\necho 0\n")  # as root, where setup.sh installs packages itself
    (fake / "id").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "scripts/setup.sh", *args], cwd=checkout, env=env, capture_output=True, timeout=120)
    return record.read_text().splitlines() if record.exists() else []


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_server_only_setup_installs_no_test_packages_and_the_full_setup_does(tmp_path: Path) -> None:
    server_only = apt_requests(tmp_path / "a", "--server-only")
    assert not any("ilsp-test-package" in line or "emacs" in line for line in server_only), server_only
    full = apt_requests(tmp_path / "b")
    assert any("install" in line and "ilsp-test-package" in line for line in full), full
    # scripts/try.sh sets up with --server-only.
    assert 'scripts/setup.sh" --server-only' in (REPO / "scripts" / "try.sh").read_text()
