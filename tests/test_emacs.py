"""A real Emacs (batch mode) with eglot and clients/emacs/interpreter-lsp.el drives the real server.

The user's init file is the Emacs configuration from docs/editors.md, as printed there (only the
repository path is filled in), so the documented setup is what runs. The server is `interpreter-lsp`
on PATH (as `pipx install` leaves it), the workspace path has a space, HOME is fresh and no API key is
set. Each test loads a scenario into Emacs: it opens demo.py, starts eglot with `M-x eglot`, calls the
file's commands as a user would and waits (bounded, inside Emacs) for text in the output buffer. Emacs
then writes what that buffer shows to a JSON file, and the assertions here are about that text.

Skipped, with the reason, where Emacs or eglot is missing (`bash scripts/setup.sh` installs
`emacs-nox` and `elpa-eglot` as root).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hidden_samples import MIRROR, TROJAN, TROJAN_RAW, TROJAN_SHOWN
from interpreter_lsp.safety import visible
from scripted_model import ScriptedModel

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DOC = REPO / "docs" / "editors.md"
# Eglot's start, the server's first kernel and the first run can take tens of seconds on a busy machine.
WAIT_S = 120
EMACS_TIMEOUT_S = 600

DEMO = """\
# %% first cell
x = 6 * 7
print("x is", x)

# %% second cell
print("second cell ran", x + 1)
"""


@functools.cache
def _missing() -> str | None:
    """Why these tests cannot run here, or None."""
    emacs = shutil.which("emacs")
    if emacs is None:
        return "Emacs is not installed (apt-get install emacs-nox, or bash scripts/setup.sh as root)"
    probe = subprocess.run(
        [emacs, "--batch", "--eval", "(progn (require 'eglot) (princ emacs-major-version))"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": "/nonexistent"},
    )
    if probe.returncode != 0:
        return "eglot is not available to Emacs (Emacs 28: apt-get install elpa-eglot; built into Emacs 29+)"
    if int(probe.stdout.strip() or 0) < 28:
        return f"Emacs {probe.stdout.strip()} is too old: clients/emacs needs Emacs 28 or newer"
    if not (BIN / "interpreter-lsp").exists():
        return f"the server is not installed in {BIN} (bash scripts/setup.sh)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def documented_init() -> str:
    """The Emacs configuration block of docs/editors.md, with this checkout's path filled in."""
    text = DOC.read_text()
    section = text.split("## Emacs", 1)[1]
    block = re.search(r"```elisp\n(.*?)```", section, re.S)
    assert block, "docs/editors.md has no ```elisp block in its Emacs section"
    init = block.group(1)
    assert "/path/to/interpreter-lsp" in init
    return init.replace("/path/to/interpreter-lsp", str(REPO))


# Loaded after the user's init file. Waits run inside Emacs (its event loop keeps serving the server's
# messages), each with a bound; on any error the scenario stops and the error is reported.
DRIVER = r"""
(require 'json)
(setq eglot-connect-timeout 120)  ; a busy CI machine: the server's start is slow, not broken
(transient-mark-mode 1)           ; as in an interactive Emacs, so a region is a region
(defvar ilsp-test-values nil)

(defun ilsp-test-record (key value) (push (cons key value) ilsp-test-values))

(defun ilsp-test-wait (pred seconds what)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or (funcall pred) (error "Timed out after %ss waiting for %s" seconds what))))

(defun ilsp-test-output ()
  (with-current-buffer (interpreter-lsp-output-buffer)
    (buffer-substring-no-properties (point-min) (point-max))))

(defun ilsp-test-wait-output (regexp &optional seconds)
  (ilsp-test-wait (lambda () (string-match-p regexp (ilsp-test-output)))
                  (or seconds (string-to-number (getenv "ILSP_TEST_WAIT")))
                  (format "%S in the output buffer" regexp)))

(defun ilsp-test-open (name)
  (find-file (expand-file-name name (getenv "ILSP_TEST_WORKSPACE")))
  (call-interactively #'eglot)
  (ilsp-test-wait #'eglot-current-server (string-to-number (getenv "ILSP_TEST_WAIT"))
                  "eglot to connect"))

(defun ilsp-test-select (text)
  "Insert TEXT at the end of the buffer (unsaved) and select it."
  (goto-char (point-max))
  (let ((start (point)))
    (insert text)
    (set-mark start)
    (activate-mark)))

(defun ilsp-test-buffer-text (get)
  (ignore-errors
    (let ((server (car (cl-loop for ss being the hash-values of eglot--servers-by-project append ss))))
      (with-current-buffer (funcall get server)
        (let ((text (buffer-substring-no-properties (point-min) (point-max))))
          (substring text (max 0 (- (length text) 20000))))))))

(let ((status "ok") output events stderr)
  (condition-case err
      (load (getenv "ILSP_TEST_SCENARIO") nil t)
    (error (setq status (error-message-string err))))
  (setq output (ignore-errors (ilsp-test-output))
        events (ilsp-test-buffer-text #'jsonrpc-events-buffer)
        stderr (ilsp-test-buffer-text #'jsonrpc-stderr-buffer))
  ;; Quit as a user quits: ask the server to shut down (it stops its kernels), bounded.
  (cl-loop for ss being the hash-values of eglot--servers-by-project
           do (dolist (s ss) (ignore-errors (eglot-shutdown s nil 60 t))))
  (with-temp-file (getenv "ILSP_TEST_RESULT")
    (insert (json-encode `((status . ,status) (output . ,output) (events . ,events)
                           (stderr . ,stderr) (values . ,ilsp-test-values)))))
  (kill-emacs 0))
"""


class Emacs:
    """Runs one Emacs session per scenario, as a user with this init file and no keys."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.workspace = tmp_path / "my project"
        self.workspace.mkdir()
        (self.workspace / "demo.py").write_text(DEMO)
        self.home = tmp_path / "home"
        (self.home / ".emacs.d").mkdir(parents=True)
        self.init = self.home / ".emacs.d" / "init.el"
        self.init.write_text(documented_init())
        # A user who trusted this folder before (M-x interpreter-lsp-trust); untrust() makes it a folder
        # never trusted.
        self.trust_file = self.home / ".emacs.d" / "interpreter-lsp-trusted.eld"
        self.trust_file.write_text(_elisp_string(str(self.workspace) + "/").join("()"))
        self.driver = tmp_path / "driver.el"
        self.driver.write_text(DRIVER)
        self.runs = 0
        # The server as eglot starts it (`interpreter-lsp` on PATH), with a debug log of each start kept
        # here: a failing scenario shows where the server was (the log's tail is in the failure message).
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        wrapper = self.bin / "interpreter-lsp"
        log = shlex.quote(str(tmp_path / "server-"))
        real = shlex.quote(str(BIN / "interpreter-lsp"))
        wrapper.write_text(f'#!/bin/sh\nexec {real} --log-file {log}"$$".log --log-level DEBUG "$@"\n')
        wrapper.chmod(0o755)

    def run(
        self, scenario: str, settings: dict[str, Any] | None = None, extra_env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        self.runs += 1
        path = self.tmp / f"scenario-{self.runs}.el"
        prelude = ""
        if settings is not None:
            # What a user would write with `setq` in the init file; json-read gives the plist.
            prelude = (
                "(setq interpreter-lsp-settings (let ((json-object-type 'plist) (json-false :json-false)) "
                f"(json-read-from-string {_elisp_string(json.dumps(settings))})))\n"
            )
        path.write_text(prelude + scenario)
        result = self.tmp / f"result-{self.runs}.json"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "COV_")) and not k.endswith("_API_KEY") and k != "INTERPRETER_MODEL"
        }
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            PATH=f"{self.bin}{os.pathsep}{BIN}{os.pathsep}{env.get('PATH', '')}",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            ILSP_TEST_WORKSPACE=str(self.workspace),
            ILSP_TEST_SCENARIO=str(path),
            ILSP_TEST_RESULT=str(result),
            ILSP_TEST_WAIT=str(WAIT_S),
            **(extra_env or {}),
        )
        proc = subprocess.run(
            ["emacs", "--batch", "-l", str(self.init), "-l", str(self.driver)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=EMACS_TIMEOUT_S,
        )
        assert result.exists(), f"Emacs wrote no result (exit {proc.returncode}):\n{proc.stderr[-5000:]}"
        seen = json.loads(result.read_text())
        values = seen.get("values") or {}
        seen["values"] = dict(values) if isinstance(values, dict) else {}
        assert seen["status"] == "ok", (
            f"{seen['status']}\n--- output buffer:\n{seen.get('output')}\n--- server stderr:\n"
            f"{seen.get('stderr')}\n--- eglot events (tail):\n{(seen.get('events') or '')[-6000:]}\n"
            f"--- emacs:\n{proc.stderr[-3000:]}\n--- server log (tail):\n{self._server_log_tail()}"
        )
        return seen

    def _server_log_tail(self) -> str:
        logs = sorted(self.tmp.glob("server-*.log"), key=lambda path: path.stat().st_mtime)
        return logs[-1].read_text(errors="replace")[-12000:] if logs else "(none)"

    def untrust(self) -> None:
        self.trust_file.unlink()

    def kernels_left(self) -> list[int]:
        """Processes still working in the workspace (a kernel's cwd is the workspace)."""
        left = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if Path(os.readlink(proc / "cwd")) == self.workspace:
                    left.append(int(proc.name))
            except OSError:
                continue
        return left


def _elisp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture
def emacs(tmp_path: Path) -> Iterator[Emacs]:
    editor = Emacs(tmp_path)
    yield editor
    # Quitting Emacs shut the server down: no kernel outlives it (bounded wait for the last exits).
    deadline = time.monotonic() + 30
    while editor.kernels_left() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {pid: _cmdline(pid) for pid in editor.kernels_left()}
    assert not left, f"processes were left running in the workspace after Emacs quit: {left}"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:300]
    except OSError:
        return "(gone)"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def section(output: str, key: str) -> str:
    """The lines written for one run or turn: from KEY ("run r-… (python, by you)") up to the line where
    another run, turn, proposal or chat starts."""
    own = key.split(" (")[0]
    lines = output[output.index(key) :].splitlines(keepends=True)
    kept = lines[:1]
    for line in lines[1:]:
        if re.match(r"(\[|run r-|turn t-|proposal p-|>>> )", line) and not line.startswith(own):
            break
        kept.append(line)
    return "".join(kept)


def test_run_the_cell_at_point_and_see_its_output(emacs: Emacs) -> None:
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)                 ; in the first cell
(let ((run (interpreter-lsp-run)))
  (ilsp-test-record 'first run)
  (ilsp-test-wait-output (format "run %s ok" run)))
(goto-char (point-max)) (insert "print(\"edited\", x * 2)\n")   ; unsaved: the server must see it
(let ((run (interpreter-lsp-run)))                     ; point on the last, empty line: the second cell
  (ilsp-test-record 'second run)
  (ilsp-test-wait-output (format "run %s ok" run)))
"""
    )
    out, first, second = seen["output"], seen["values"]["first"], seen["values"]["second"]
    one = section(out, f"run {first} (python, by you)")
    assert 'print("x is", x)' in one, "the run's code is shown"
    assert "\nx is 42\n" in one
    assert f"run {first} ok (" in one
    two = section(out, f"run {second} (python, by you)")
    assert "second cell ran 43" in two and "edited 84" in two, two
    assert "x is 42" not in two, "only the cell at point ran"
    assert out.count("x is 42") == 1
    assert "Traceback" not in out
    assert not (emacs.workspace / "demo.py").read_text().count("edited"), "the edit was never saved"


def test_input_fails_at_once_interrupt_stops_a_run_and_a_dead_kernel_says_so(emacs: Emacs) -> None:
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(ilsp-test-select "name = input('name? ')\nprint('hello', name)\n")
(let ((t0 (float-time)) (run (interpreter-lsp-run)))
  (ilsp-test-record 'input run)
  (ilsp-test-wait-output (format "run %s \\(ok\\|error\\|interrupted\\|timeout\\|died\\)" run) 60)
  (ilsp-test-record 'input-seconds (- (float-time) t0)))
(ilsp-test-select "import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n")
(let ((run (interpreter-lsp-run)))
  (ilsp-test-record 'sleep run)
  (ilsp-test-wait-output "^sleeping$")
  (interpreter-lsp-interrupt)
  (ilsp-test-wait-output (format "run %s \\(ok\\|error\\|interrupted\\)" run) 60))
(ilsp-test-select "import os\nos._exit(1)\n")
(let ((run (interpreter-lsp-run)))
  (ilsp-test-record 'exit run)
  (ilsp-test-wait-output (format "run %s \\(ok\\|error\\|interrupted\\|died\\)" run) 60))
"""
    )
    out, values = seen["output"], seen["values"]
    asked = section(out, f"run {values['input']} (python, by you)")
    assert f"run {values['input']} error" in asked, asked
    assert "input() is not available in this editor: put the value in the code instead." in asked
    assert "Traceback (most recent call last)" not in asked, "one line, not a traceback"
    assert "KeyboardInterrupt" not in asked
    assert not re.search(r"^hello", asked, re.M), "the code after input() never ran"
    assert values["input-seconds"] < 30, f"input() took {values['input-seconds']:.1f} s to fail"
    slept = section(out, f"run {values['sleep']} (python, by you)")
    assert f"run {values['sleep']} interrupted" in slept, slept
    died = section(out, f"run {values['exit']} (python, by you)")
    assert re.search(rf"^run {values['exit']} died \(\d+ ms\): .+", died, re.M), died


def test_chat_approve_and_reject_through_the_output_buffer(emacs: Emacs, model: ScriptedModel) -> None:
    model.reply("Let me compute that.\n```python\nprint('product:', 6 * 7)\n```\n", chunk_size=5)
    model.reply("The product is 42.")
    model.reply("```python\nimport shutil\nshutil.rmtree('/home')\n```\n")
    settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test"}
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(let ((turn (interpreter-lsp-chat "what is six times seven?")))
  (ilsp-test-record 'first turn)
  (ilsp-test-wait-output (format "turn %s awaiting-approval" turn))
  (ilsp-test-record 'run (interpreter-lsp-approve))
  (ilsp-test-wait-output (format "turn %s done" turn)))
(let ((turn (interpreter-lsp-chat "clean up my home folder")))
  (ilsp-test-record 'second turn)
  (ilsp-test-wait-output (format "turn %s awaiting-approval" turn))
  (interpreter-lsp-reject)
  (ilsp-test-wait-output (format "turn %s done" turn))
  (ilsp-test-record 'no-more (condition-case err (progn (interpreter-lsp-approve) "approved")
                               (user-error (error-message-string err)))))
""",
        settings=settings,
    )
    out, values = seen["output"], seen["values"]
    first = out[out.index(">>> what is six times seven?") : out.index(">>> clean up my home folder")]
    assert "Let me compute that." in first
    assert "(python, risk low" in first and "print('product:', 6 * 7)" in first
    assert "auto-run is off: waits for approval" in first
    assert f"run {values['run']} (python, by the model)" in first
    assert "\nproduct: 42\n" in first and f"run {values['run']} ok" in first
    assert "The product is 42." in first
    assert first.index("product: 42") < first.index("The product is 42.")
    assert "product: 42" in str(model.wait_requests(2)[1]["messages"]), "the model saw the run's output"

    second = out[out.index(">>> clean up my home folder") :]
    assert "risk high" in second and "shutil.rmtree('/home')" in second
    assert "(python, by the model)" not in second, "rejected code must not run"
    assert f"turn {values['second']} done" in second
    assert values["no-more"] == "No proposal waits for approval"
    assert len(model.requests) == 3, "a rejection ends the turn without asking the model again"


AGENT = Path(__file__).with_name("mcp_agent.py")  # the MCP SDK's client, as a user's agent


def test_an_agents_proposal_is_approved_in_emacs(emacs: Emacs) -> None:
    """Another agent (the MCP SDK's client with `interpreter-lsp mcp`, docs/agents.md) proposes code: the
    output buffer names it, and the user approves it as a proposal of the model."""
    answer = emacs.tmp / "agent-answer.txt"
    seen = emacs.run(
        f"""
(ilsp-test-open "demo.py")
(let ((agent (start-process "agent" "*agent*" {_elisp_string(sys.executable)} {_elisp_string(str(AGENT))}
                            (getenv "ILSP_TEST_WORKSPACE") {_elisp_string(str(answer))} "emacs-test-agent")))
  (ilsp-test-wait-output "from emacs-test-agent 1 at ")
  ;; (format-mode-line is empty in batch Emacs: what global-mode-string shows is read instead.)
  (ilsp-test-record 'in-mode-line (and (member interpreter-lsp--agents-mode-line global-mode-string) "yes"))
  (ilsp-test-record 'waiting (substring-no-properties (interpreter-lsp--agents-text)))
  (ilsp-test-record 'run (interpreter-lsp-approve))
  (ilsp-test-wait-output "from the agent 42")
  (ilsp-test-record 'after (interpreter-lsp--agents-text))
  (ilsp-test-wait (lambda () (not (process-live-p agent))) 60 "the agent to have its answer"))
"""
    )
    out, values = seen["output"], seen["values"]
    # Every mode line says an agent waits, until the user decided.
    assert values["in-mode-line"] == "yes" and values["waiting"] == " [emacs-test-agent 1 waiting]", values
    assert values["after"] == "", values
    assert re.search(r"proposal p-\w+ from emacs-test-agent 1 at [0-9T:-]+Z \(python, risk low", out), out
    assert f"run {values['run']} (python, by an agent (emacs-test-agent 1))" in out
    assert "from the agent 42" in answer.read_text()


# What a person reads is what runs ("Trojan Source", CVE-2021-42574; hidden_samples.py): Emacs applies the
# bidi algorithm to every line, so the output buffer shows each such character as `<U+XXXX>`, never itself.


def test_a_trojan_source_proposal_shows_each_hidden_character_and_approving_runs_it_as_proposed(
    emacs: Emacs, model: ScriptedModel
) -> None:
    model.reply("Here is the check:\n```python\n" + TROJAN + "```\n", chunk_size=5)
    model.reply("Done.")
    settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test"}
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(let ((turn (interpreter-lsp-chat "check the access")))
  (ilsp-test-wait-output (format "turn %s awaiting-approval" turn))
  (with-current-buffer (interpreter-lsp-output-buffer)
    (goto-char (point-min))
    (re-search-forward "^proposal p-")
    (let ((start (match-beginning 0)))
      (re-search-forward "^(auto-run is off")
      (ilsp-test-record 'card (buffer-substring-no-properties start (line-end-position)))
      (goto-char start)
      (search-forward "\"none<U+202E>")                  ; in the code, not in the reason
      (ilsp-test-record 'face (format "%S" (get-text-property (- (point) 2) 'face)))
      (ilsp-test-record 'help-echo (get-text-property (- (point) 2) 'help-echo)))
    (ilsp-test-record 'direction (symbol-name bidi-paragraph-direction)))
  (ilsp-test-record 'proposed (plist-get (car (interpreter-lsp--proposals (interpreter-lsp--server))) :code))
  (interpreter-lsp-approve)
  (ilsp-test-wait-output (format "turn %s done" turn)))
(ilsp-test-record 'ran (cl-loop for e across (plist-get (interpreter-lsp--command (interpreter-lsp--server)
                                                                                  "interpreter.history" nil)
                                                         :messages)
                                when (equal (plist-get e :type) "run") return (plist-get e :code)))
""",
        settings=settings,
    )
    out, values = seen["output"], seen["values"]
    card, message = values["card"], out[: out.index("proposal p-")]
    assert re.match(r"proposal p-\S+ \(python, risk medium: [^\n]*<U\+202E>", card), card  # the server's reason
    for line in TROJAN_SHOWN:
        assert "\n    " + line + "\n" in card, card
        assert "\n" + line + "\n" in message, "the model's text shows the code so too:\n" + message
    for raw in TROJAN_RAW:
        assert raw not in out, f"{raw!r} reached the output buffer"
    assert "interpreter-lsp-hidden-char" in values["face"], values
    assert values["help-echo"].startswith("U+202E RIGHT-TO-LEFT OVERRIDE: it changes the direction"), values
    assert values["direction"] == "left-to-right"
    # Approving ran the code as proposed, byte for byte: the server's record, and what it printed.
    assert values["proposed"].rstrip("\n") == TROJAN.rstrip("\n")
    assert values["ran"] == values["proposed"]
    for printed in ("\ngranted\n", "\nfiller is 42\n", "\nafter a lone carriage return 1\n"):
        assert printed in out, out


def _shown_by_the_server(text: str, indexes: list[int]) -> str:
    """`text` as a client must show it, given the indexes of its hidden characters: each as its marker, a
    carriage return before a line feed (a Windows line end) left out."""
    hidden = set(indexes)
    out = "".join(visible.marker(ch) if i in hidden else ch for i, ch in enumerate(text))
    return out.replace("\r\n", "\n")


def test_the_hidden_characters_are_the_servers(emacs: Emacs) -> None:
    """interpreter-lsp--show-hidden against the server: the cases of clients/hidden-characters.json (the
    server's answers, the neighbours' cases among them), and every code point of the planes code is written
    in, one a line, against safety/visible.py itself (less those this Emacs and this Python's Unicode
    versions disagree on: assigned in one, not in the other)."""
    mirror = json.loads(MIRROR.read_text(encoding="utf-8"))["cases"]
    corpus = [
        cp
        for cp in [*range(0x30000), *range(0x30000, 0xE0000, 97), *range(0xE0000, 0xE1000), 0xF0000, 0x10FFFD]
        if cp not in (0x0A, 0x0D) and not 0xD800 <= cp <= 0xDFFF  # a line end here; not UTF-8
    ]
    text = "\n".join(map(chr, corpus))
    (emacs.tmp / "corpus.txt").write_text(text, encoding="utf-8", newline="")
    seen = emacs.run(
        r"""
(let* ((coding-system-for-read 'utf-8-unix)
       (coding-system-for-write 'utf-8-unix)
       (corpus (with-temp-buffer (insert-file-contents (getenv "ILSP_TEST_CORPUS")) (buffer-string)))
       (cases (let ((json-object-type 'plist) (json-array-type 'list))
                (plist-get (json-read-file (getenv "ILSP_TEST_MIRROR")) :cases))))
  (with-temp-file (getenv "ILSP_TEST_SHOWN")
    (insert (substring-no-properties (interpreter-lsp--show-hidden corpus))))
  (ilsp-test-record 'unassigned (vconcat (cl-loop for c across corpus
                                                  when (eq (get-char-code-property c 'general-category) 'Cn)
                                                  collect c)))
  (ilsp-test-record 'cases (vconcat (mapcar (lambda (case)
                                              (substring-no-properties
                                               (interpreter-lsp--show-hidden
                                                (apply #'string (plist-get case :codePoints)))))
                                            cases))))
""",
        extra_env={
            "ILSP_TEST_CORPUS": str(emacs.tmp / "corpus.txt"),
            "ILSP_TEST_SHOWN": str(emacs.tmp / "shown.txt"),
            "ILSP_TEST_MIRROR": str(MIRROR),
        },
    )
    values = seen["values"]
    differ = []
    for case, shown in zip(mirror, values["cases"], strict=True):
        case_text = "".join(map(chr, case["codePoints"]))
        if shown != _shown_by_the_server(case_text, case["hidden"]):
            differ.append(f"{case['codePoints']}: {shown!r}")
    assert not differ, "clients/hidden-characters.json:\n" + "\n".join(differ)

    unassigned = set(values["unassigned"])
    shown = (emacs.tmp / "shown.txt").read_text(encoding="utf-8", errors="strict").split("\n")
    expected = _shown_by_the_server(text, [i for i, _ in visible.hidden(text)]).split("\n")
    compared = 0
    for cp, got, want in zip(corpus, shown, expected, strict=True):
        if (cp in unassigned) != (unicodedata.category(chr(cp)) == "Cn"):
            continue  # a character of a newer Unicode than one of the two knows
        compared += 1
        if got != want:
            differ.append(f"U+{cp:04X}: {got!r} (server: {want!r})")
    assert not differ, f"{len(differ)} differ:\n" + "\n".join(differ[:40])
    assert compared > 0.95 * len(corpus), f"only {compared} of {len(corpus)} compared: Unicode versions apart"


def test_an_agent_that_names_itself_with_hidden_characters_is_named_in_plain_words(emacs: Emacs) -> None:
    """An agent's name is its own word (MCP's clientInfo). The server makes it one plain line (mcp/wire.py):
    each character that does not show as what it is (the set code is rated by, a Hangul filler and a tag
    character here) becomes a space, so the proposal, the run and the mode line name it in plain words. (A
    name that reached the client with them would show them as markers: the next test.)"""
    answer = emacs.tmp / "agent-answer.txt"
    seen = emacs.run(
        f"""
(let ((agent (start-process "agent" "*agent*" {_elisp_string(sys.executable)} {_elisp_string(str(AGENT))}
                            (getenv "ILSP_TEST_WORKSPACE") {_elisp_string(str(answer))} "deploy\\u3164bot\\U000E0041")))
  (ilsp-test-open "demo.py")
  (ilsp-test-wait-output "from deploy bot 1 at ")
  (ilsp-test-record 'waiting (substring-no-properties (interpreter-lsp--agents-text)))
  (interpreter-lsp-approve)
  (ilsp-test-wait-output "from the agent 42")
  (ilsp-test-wait (lambda () (not (process-live-p agent))) 60 "the agent to have its answer"))
"""
    )
    out, values = seen["output"], seen["values"]
    assert values["waiting"] == " [deploy bot 1 waiting]", values
    assert "(python, by an agent (deploy bot 1))" in out, out
    assert "\u3164" not in out and "\U000e0041" not in out
    assert "from the agent 42" in answer.read_text()


def test_streamed_text_run_echoes_agent_names_and_the_conversation_so_far_show_hidden_characters(
    emacs: Emacs,
) -> None:
    """The other places code and names are written, fed through eglot's own dispatch as the server's
    notifications: the model's text streamed in pieces (a joiner or a carriage return that ends a piece waits
    for the next, which decides), the code of a run the user started (runStatus), an agent named with a bidi
    control (as any server might send it), and the earlier conversation written when eglot connects (the
    model's text, its proposal and the run, from interpreter.history)."""
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(let ((server (eglot-current-server))
      (name "deploy\u202e\u2066bot 1"))
  (eglot-handle-notification server 'interpreter/proposal :proposalId "p-agent" :turnId "a-1" :language "python"
                             :code "print(1)\n" :risk '(:level "low" :reasons []) :agent name
                             :created "2026-12-08T00:00:00Z")
  (ilsp-test-record 'waiting (substring-no-properties (interpreter-lsp--agents-text)))
  (dolist (piece (list "emoji: \U0001F469\u200d" "\U0001F4BB, joined letters: a\u200d" "b, a Windows line end\r"
                       "\nand a lone\r" "return\n"))
    (eglot-handle-notification server 'interpreter/message :turnId "t-pieces" :delta piece))
  (eglot-handle-notification server 'interpreter/message :turnId "t-pieces" :delta "" :done t)
  (eglot-handle-notification server 'interpreter/runStatus :runId "r-agent" :state "queued" :language "python"
                             :origin "agent" :agent name :proposalId "p-agent")
  (eglot-handle-notification server 'interpreter/runStatus :runId "r-user" :state "queued" :language "python"
                             :origin "user" :code "a = 1\u202e\nb\u200b = 2\r\n")
  (interpreter-lsp--replay
   server (vector (list :type "assistant" :turnId "t-0" :text "see:\n\u3164 = 1\n")
                  (list :type "proposal" :turnId "t-0" :proposalId "p-0" :language "python" :code "\u3164 = 1\n"
                        :risk '(:level "medium"))
                  (list :type "run" :runId "r-0" :language "python" :origin "model" :code "\u3164 = 1\n"
                        :outputs [] :state "ok")))
  (ilsp-test-wait-output "── now ──"))
"""
    )
    out, values = seen["output"], seen["values"]
    assert "proposal p-agent from deploy<U+202E><U+2066>bot 1 at 2026-12-08T00:00:00Z (python, risk low):" in out
    assert values["waiting"] == " [deploy<U+202E><U+2066>bot 1 waiting]", values
    pieces = (
        "emoji: \U0001f469\u200d\U0001f4bb, joined letters: a<U+200D>b, a Windows line end\n"
        "and a lone<U+000D>return\n"
    )
    assert "[turn t-pieces]\n" + pieces in out, out
    assert "run r-agent (python, by an agent (deploy<U+202E><U+2066>bot 1)):" in out, out
    assert "run r-user (python, by you):\n    a = 1<U+202E>\n    b<U+200B> = 2\n" in out, out
    earlier = out[out.index("── earlier in this workspace ──") :]
    assert "\nsee:\n<U+3164> = 1\n" in earlier, earlier
    assert earlier.count("\n    <U+3164> = 1\n") == 2, earlier
    for raw in ("\u202e", "\u2066", "\u200b", "\u3164", "\r"):
        assert raw not in out, f"{raw!r} reached the output buffer"
    assert out.count("\u200d") == 1, "only the joiner inside the emoji sequence is shown as itself"


def test_an_untrusted_folder_runs_nothing_until_the_user_trusts_it(emacs: Emacs) -> None:
    """A cloned repository opened with eglot: its .venv's python must not start until the user trusts the
    folder with M-x interpreter-lsp-trust, which is remembered for the next Emacs."""
    emacs.untrust()
    marker = emacs.tmp / "venv-python-ran"
    venv = emacs.workspace / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {BIN}\ninclude-system-site-packages = false\n")
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)
(ilsp-test-record 'refused (condition-case err (progn (interpreter-lsp-run) "ran")
                             (user-error (error-message-string err))))
(sleep-for 3)
(ilsp-test-record 'venv-ran-before-trust (file-exists-p (getenv "ILSP_TEST_MARKER")))
(interpreter-lsp-trust)
(let ((run (interpreter-lsp-run)))
  (ilsp-test-record 'run run)
  (ilsp-test-wait-output (format "run %s ok" run)))
""",
        extra_env={"ILSP_TEST_MARKER": str(marker)},
    )
    values = seen["values"]
    assert "not trusted" in values["refused"] and "M-x interpreter-lsp-trust" in values["refused"], values
    hint = "This folder is not trusted, so nothing runs in it (not even its .venv): C-c i t trusts"
    assert hint in seen["output"], seen["output"]
    assert "VS Code" not in values["refused"]
    assert values["venv-ran-before-trust"] is None, "the repository's .venv/bin/python started before trust"
    assert "x is 42" in seen["output"] and "code may run here now" in seen["output"]
    assert str(emacs.workspace) in emacs.trust_file.read_text()

    # The next Emacs remembers it: the run works at once.
    again = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)
(ilsp-test-wait-output (format "run %s ok" (interpreter-lsp-run)))
"""
    )
    assert "x is 42" in again["output"]
    assert "is not trusted" not in again["output"]


def test_each_turn_state_is_written_once_and_the_mode_line_follows_the_latest(
    emacs: Emacs, model: ScriptedModel
) -> None:
    model.fail(401, "invalid api key", times=1)
    model.reply("```python\nprint('product:', 6 * 7)\n```\n")
    model.reply("The product is 42.")
    settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test", "maxRetries": 0}
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(let ((turn (interpreter-lsp-chat "hello")))
  (ilsp-test-wait-output (format "turn %s error" turn)))
(ilsp-test-record 'after-error (with-current-buffer (interpreter-lsp-output-buffer) mode-line-process))
(goto-char (point-min)) (forward-line 2)
(ilsp-test-wait-output (format "run %s ok" (interpreter-lsp-run)))
(ilsp-test-record 'after-run (with-current-buffer (interpreter-lsp-output-buffer) mode-line-process))
(let ((turn (interpreter-lsp-chat "six times seven")))
  (ilsp-test-record 'turn turn)
  (ilsp-test-wait-output (format "turn %s awaiting-approval" turn))
  (interpreter-lsp-approve)
  (ilsp-test-wait-output (format "turn %s done" turn)))
""",
        settings=settings,
    )
    out, values = seen["output"], seen["values"]
    assert values["after-error"] == " error"
    assert values["after-run"] == " run ok", "a later successful run clears the error from the mode line"
    turn = values["turn"]
    # Two steps (the proposal, then the answer): "thinking" once for each, never twice in a row.
    assert out.count(f"turn {turn} thinking") == 2, out
    assert f"turn {turn} thinking\nturn {turn} thinking" not in out
    assert re.search(rf"turn {turn} done \(\d+ tok · cost unknown\)", out), out
    assert "(python, by the model)" in out and "(python, by you)" in out


def test_a_reopened_emacs_shows_the_conversation_so_far(emacs: Emacs, model: ScriptedModel) -> None:
    """The next Emacs writes the workspace's earlier conversation first, as the other clients do: requests,
    answers, runs with who started them and their output."""
    model.reply("```python\nprint('product:', 6 * 7)\n```\n")
    model.reply("The product is 42.")
    settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test"}
    # A shell command that fails: bash_kernel's error has no name and no traceback, only the exit status.
    (emacs.workspace / "fail.sh").write_text("")
    first = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)
(ilsp-test-wait-output (format "run %s ok" (interpreter-lsp-run)))
(let ((turn (interpreter-lsp-chat "six times seven")))
  (ilsp-test-wait-output (format "turn %s awaiting-approval" turn))
  (interpreter-lsp-approve)
  (ilsp-test-wait-output (format "turn %s done" turn)))
(find-file (expand-file-name "fail.sh" (getenv "ILSP_TEST_WORKSPACE")))  ; sh-mode, not eglot's: a region
(ilsp-test-select "(exit 3)\n")
(ilsp-test-wait-output (format "run %s error" (interpreter-lsp-run)))
""",
        settings=settings,
    )
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(ilsp-test-wait-output "── now ──")
""",
        settings=settings,
    )
    out = seen["output"]
    earlier = out[out.index("── earlier in this workspace ──") : out.index("── now ──")]
    assert "(python, by you):" in earlier and "x is 42" in earlier, earlier
    assert ">>> six times seven" in earlier and "The product is 42." in earlier, earlier
    assert "(python, by the model):" in earlier and "product: 42" in earlier, earlier
    assert re.search(r"run r-\S+ ok \(\d+ ms\)", earlier), earlier
    assert "exit status 3" in first["output"] and ": 3\n" not in first["output"], first["output"]
    assert "(shell, by you):" in earlier and "exit status 3" in earlier, earlier


def test_a_gateway_connection_lost_mid_run_is_a_line_at_once(emacs: Emacs) -> None:
    """The server keeps the kernel's state and says the connection to the gateway is lost, then restored
    (kernels/gateway.py): the output buffer says both as they come, through eglot's own dispatch."""
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(let ((server (eglot-current-server)))
  (eglot-handle-notification server 'interpreter/kernelStatus :language "python" :state "busy"
    :message "the connection to the gateway http://gw:8888 was lost; reconnecting")
  (eglot-handle-notification server 'interpreter/kernelStatus :language "python" :state "busy"
    :message "reconnected to the same kernel on the gateway; output resumes"))
(ilsp-test-wait-output "output resumes")
"""
    )
    out = seen["output"]
    assert "(the python kernel: the connection to the gateway http://gw:8888 was lost; reconnecting)" in out, out
    assert "(the python kernel: reconnected to the same kernel on the gateway; output resumes)" in out, out


def test_export_and_verify_says_whether_the_notebook_reproduces(emacs: Emacs) -> None:
    """C-u interpreter-lsp-export-notebook: the export re-run in a fresh kernel, in the background; the
    output buffer says whether it reproduces."""
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)
(ilsp-test-wait-output (format "run %s ok" (interpreter-lsp-run)))
(interpreter-lsp-export-notebook "out/verified.ipynb" t)
(ilsp-test-wait-output "reproduces" 120)
"""
    )
    out = seen["output"]
    assert "(verifying verified.ipynb: re-running it in a fresh kernel)" in out, out
    assert "(notebook verified.ipynb reproduces: its one cell gave the session's output again" in out, out
    notebook = json.loads((emacs.workspace / "out" / "verified.ipynb").read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert [c["metadata"]["interpreter_lsp"]["verify"]["verdict"] for c in code] == ["identical"]


def test_undo_says_which_variables_and_files_came_back(emacs: Emacs) -> None:
    """interpreter-lsp-undo (C-c i u): the user's run is taken back; the variable it created is removed, the
    one it changed comes back, the file it wrote is restored, and the output buffer says so."""
    (emacs.workspace / "data.txt").write_text("original\n")
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)
(ilsp-test-wait-output (format "run %s ok" (interpreter-lsp-run)))
(ilsp-test-wait-output
 (format "run %s ok"
         (plist-get (interpreter-lsp--command (interpreter-lsp--server) "interpreter.run"
                                              (list :code "x = 0\nopen('data.txt', 'w').write('changed')\nz = 1"))
                    :runId)))
(interpreter-lsp-undo)
(ilsp-test-wait-output "Undone")
"""
    )
    out = seen["output"]
    assert ("↶ Undone: your last run is gone from the conversation; files restored data.txt; "
            "variables restored x; removed z.") in out, out
    assert (emacs.workspace / "data.txt").read_text() == "original\n"


def test_redo_brings_back_what_the_undo_took_back(emacs: Emacs) -> None:
    """interpreter-lsp-redo (C-c i U) after an undo: the run is back, the file as the run wrote it and the
    variables as it left them, and the output buffer says so. A second redo has nothing to redo: a plain
    message (a `user-error`, never a trace)."""
    (emacs.workspace / "data.txt").write_text("original\n")
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)
(ilsp-test-wait-output (format "run %s ok" (interpreter-lsp-run)))
(ilsp-test-wait-output
 (format "run %s ok"
         (plist-get (interpreter-lsp--command (interpreter-lsp--server) "interpreter.run"
                                              (list :code "x = 0\nopen('data.txt', 'w').write('changed')\nz = 1"))
                    :runId)))
(interpreter-lsp-undo)
(ilsp-test-wait-output "Undone")
(ilsp-test-record 'after-undo (with-temp-buffer (insert-file-contents "data.txt") (buffer-string)))
(interpreter-lsp-redo)
(ilsp-test-wait-output "Redone")
(ilsp-test-record 'after-redo (with-temp-buffer (insert-file-contents "data.txt") (buffer-string)))
(ilsp-test-record 'again (condition-case err (progn (interpreter-lsp-redo) "redone")
                           (user-error (error-message-string err))))
(ilsp-test-select "print('x and z are', x, z)\n")
(ilsp-test-wait-output (format "run %s \\(ok\\|error\\)" (interpreter-lsp-run)))
"""
    )
    out, values = seen["output"], seen["values"]
    assert values["after-undo"] == "original\n" and values["after-redo"] == "changed", values
    assert (
        "↷ Redone: your last run is back in the conversation; files restored data.txt; variables restored x, z."
    ) in out, out
    assert "\nx and z are 0 1\n" in out, "the variables are as the run left them"
    assert values["again"].startswith("Nothing to redo"), values


def test_redo_text_says_the_request_is_back_and_what_did_not_come_back(emacs: Emacs) -> None:
    """The redo of a request (not a run of the user's): its result, in the undo's shape, read as the output
    buffer shows it."""
    seen = emacs.run(
        r"""
(ilsp-test-record 'text (interpreter-lsp--redo-text
                         (list :request "plot it" :runs ["r-1"] :restored ["a.csv"] :removed ["tmp.txt"]
                               :variablesRestored ["df" "fig"] :variablesRemoved []
                               :notRestorable [(:name "model" :why "cannot be copied")])))
"""
    )
    assert seen["values"]["text"] == (
        "↷ Redone: your last message and what followed it are back in the conversation; files restored a.csv; "
        "removed tmp.txt; variables restored df, fig. Not restored: model (cannot be copied)."
    )


def test_a_quick_runs_end_shows_even_when_it_arrives_with_the_commands_answer(emacs: Emacs) -> None:
    """Emacs 28's jsonrpc leaves its process filter by a throw when a synchronous request's answer comes:
    messages read in the same chunk after it stayed unread until the server wrote again. A quick run's
    output and end come right behind the answer to interpreter.run; Emacs busy for a moment after sending
    (here: half a second without reading) gets them all in one chunk. They show at once all the same."""
    seen = emacs.run(
        r"""
(ilsp-test-open "demo.py")
(goto-char (point-min)) (forward-line 2)
(ilsp-test-wait-output (format "run %s ok" (interpreter-lsp-run)))  ; the kernel is up: the next run is quick
(advice-add 'jsonrpc--async-request-1 :after
            (lambda (&rest _) (let ((end (+ (float-time) 0.5))) (while (< (float-time) end)))))
(let ((run (interpreter-lsp-run)))
  (ilsp-test-record 'second run)
  (ilsp-test-wait-output (format "run %s ok" run) 20))
"""
    )
    assert f"run {seen['values']['second']} ok" in seen["output"]
