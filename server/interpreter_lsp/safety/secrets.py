"""What a secret is, in one place, and secrets kept out of reach: they stay out of the kernel's
environment, and no secret value appears in logs, notifications, error messages, history, exported
notebooks or what the model is sent.

A secret is (1) the value of a variable whose name says so (`is_secret_name`: `*_API_KEY`, `*_TOKEN`,
`PGPASSWORD`, `DATABASE_URL`, `AWS_SECRET_ACCESS_KEY`, `apiKey`, ...), from the server's environment, the
settings (`apiKey`) or, when they look like secrets, the workspace's `.env*` files; (2) whatever text
shows as one: a password in a URL (`postgres://user:***@host/db`), the value in `NAME=value` /
`NAME: value` / `"name": "value"` when NAME is a secret name (a value seen that way is remembered and
masked wherever it appears later), and keys of well-known formats (`sk-…`, `ghp_…`, `AKIA…`, `xoxb-…`,
private key blocks). The risk rules (safety/rules.py), the model's error messages (llm/failures.py) and
output masking all use this module.

Masking applies to output, never to code: what the user approves is byte for byte what runs, so code is
shown, recorded and exported as written (`Redactor.redact_shown`: a payload's or a history event's own
`code`, the fenced blocks of a model's reply, its tool calls; by position, never what output nests). The
one exception is a secret the server itself holds (a provider key in its environment, `apiKey`,
`kernel.gatewayToken`): code holding one is shown with a marked placeholder (`«hidden: NAME»`) and never
runs (`held_in`; docs/security.md, "Secrets in code"). What goes to the model and the log is masked whole
(`redact`, `redact_obj`, `redact_log`). The workspace's `.env*` files: safety/envfiles.py.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would redact ordinary text
MASK = "***"
MAX_LEARNED = 200  # values remembered from output (NAME=value seen); each is still masked where it is seen
# Texts already masked, remembered with the secrets they were masked against: a model request carries the
# whole conversation every time (~2.5 ms of regexes for 120 messages, ~40 KB, on each call), and notifications
# and history repeat texts. Cleared when full: at most CACHE_CHARS characters of text (a run's flood of output
# goes by in chunks: they must not pile up here).
CACHE_CHARS = 4_000_000
# redact_obj_quick and redact_messages_quick mask on the caller's thread at most this many strings, this many
# characters of them new.
QUICK_ITEMS = 1_000
QUICK_CHARS = 8_000
MESSAGES_SLACK = 64  # masked messages remembered past those of the last request (redact_messages)

# Name parts that mark a variable as secret: OPENAI_API_KEY, GH_TOKEN, DB_PASSWORD, MYSQL_PWD, ...
_SECRET_PARTS = frozenset({"KEY", "APIKEY", "ZENAPIKEY", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE",
                           "CREDENTIAL", "CREDENTIALS", "PAT", "PWD", "DSN"})
# ... and substrings: PGPASSWORD, AWS_SECRET_ACCESS_KEY, DATABASE_URL (a URL that carries a password).
_SECRET_SUBSTRINGS = ("SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "ACCESS_KEY", "PRIVATE_KEY",
                      "AUTH_TOKEN", "ACCESSTOKEN", "AUTHTOKEN", "DATABASE_URL", "CONNECTION_STRING")
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})  # the shell's working directories
# Variables litellm reads for providers (litellm 1.x source) that the patterns above would not all catch,
# listed so the rule is visible: every one of these is kept from kernels unless allowed by name.
LITELLM_SECRET_NAMES = frozenset({
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY",
    "AZURE_AD_TOKEN", "AZURE_CLIENT_SECRET", "AZURE_PASSWORD", "AZURE_CERTIFICATE_PASSWORD",
    "AZURE_AI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK", "AWS_WEB_IDENTITY_TOKEN", "GEMINI_API_KEY", "GOOGLE_API_KEY", "PALM_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS", "VERTEXAI_CREDENTIALS", "VERTEX_CREDENTIALS", "HF_TOKEN",
    "HUGGINGFACE_API_KEY", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN", "COHERE_API_KEY", "CO_API_KEY",
    "MISTRAL_API_KEY", "CODESTRAL_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY", "TOGETHERAI_API_KEY",
    "TOGETHER_AI_API_KEY", "TOGETHER_AI_TOKEN", "OPENROUTER_API_KEY", "OR_API_KEY", "DEEPSEEK_API_KEY",
    "XAI_API_KEY", "REPLICATE_API_KEY", "REPLICATE_API_TOKEN", "PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY",
    "FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY", "ANYSCALE_API_KEY", "DEEPINFRA_API_KEY",
    "CEREBRAS_API_KEY", "AI21_API_KEY", "NVIDIA_NIM_API_KEY", "WATSONX_APIKEY", "WATSONX_API_KEY",
    "WATSONX_TOKEN", "WATSONX_ZENAPIKEY", "WX_API_KEY", "DATABRICKS_API_KEY", "DATABRICKS_CLIENT_SECRET",
    "CLARIFAI_API_KEY", "VOYAGE_API_KEY", "JINA_AI_API_KEY", "OLLAMA_API_KEY", "LITELLM_MASTER_KEY",
    "LITELLM_SALT_KEY", "LITELLM_PROXY_API_KEY", "GITHUB_API_KEY", "AIMLAPI_KEY", "COMETAPI_KEY",
    "FRIENDLI_TOKEN", "GIGACHAT_CREDENTIALS", "GIGACHAT_ACCESS_TOKEN", "DASHSCOPE_API_KEY", "MOONSHOT_API_KEY",
    "SAMBANOVA_API_KEY", "NEBIUS_API_KEY", "ALEPH_ALPHA_API_KEY", "ALEPHALPHA_API_KEY", "NLP_CLOUD_API_KEY",
    "PREDIBASE_API_KEY", "MARITALK_API_KEY", "VOLCENGINE_API_KEY", "OPENAI_LIKE_API_KEY", "HOSTED_VLLM_API_KEY",
    "LM_STUDIO_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "NPM_TOKEN",
})


def is_secret_name(name: str) -> bool:
    """Does an environment variable's name say it holds a secret (a key, token, password)?"""
    upper = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).upper().replace("-", "_")  # apiKey: API_KEY
    if upper in _NOT_SECRET:
        return False
    if upper in LITELLM_SECRET_NAMES:
        return True
    if any(part in _SECRET_PARTS for part in upper.split("_")):
        return True
    return any(marker in upper for marker in _SECRET_SUBSTRINGS)


def kernel_environment(env: Mapping[str, str], allowed: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` for a kernel: without secrets, except the names the user allowed explicitly."""
    keep = set(allowed)
    return {name: value for name, value in env.items() if name in keep or not is_secret_name(name)}


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The secret values of an environment: those of secret names, and URL passwords."""
    return list(named_secret_values(env))


def named_secret_values(env: Mapping[str, str]) -> dict[str, str]:
    """{value: the variable it came from} for the secret values of an environment (module docstring)."""
    named = {value: name for name, value in env.items() if is_secret_name(name)}
    for name, value in env.items():
        for match in _URL_PASSWORD.finditer(value):
            named.setdefault(match.group(2), name)
    return named


# scheme://user:PASSWORD@host
# Every pattern starts only where a run of its characters starts (a lookbehind) and bounds its parts, so
# masking stays linear on long runs of letters, dots or base64 (a run's output may hold megabytes of them).
_URL_PASSWORD = re.compile(r"((?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s:/@]{0,256}:)([^\s@/]{1,256})(?=@)")
# NAME=value, NAME: value, export NAME="value", "name": "value", name = 'value' (the name is judged by
# is_secret_name; the value must look like a secret: no spaces, 8+ characters, letters and digits, so that code
# such as `token = get_token()` or `api_key = args.key` is left as written).
_ASSIGNMENT = re.compile(
    r"""(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})(?P<quote1>["']?)(?P<sep>[ \t]{0,4}[:=][ \t]{0,4})"""
    r"""(?P<quote2>["']?)(?P<value>[^\s"'`,;(){}\[\]<>]{8,})(?=["'`,;)}\]]|\s|$)"""
)
# "name": "value", 'name': 'value', name='value' (JSON and Python reprs in the log); the value may be empty.
_QUOTED_SETTING = re.compile(
    r"""(?<![A-Za-z0-9_])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,63})(?P<q1>["']?)[ \t]{0,4}[:=][ \t]{0,4}"""
    r"""(?P<q2>["'])(?P<value>(?:\\.|(?!(?P=q2))[^\\\n]){1,4096})(?P=q2)"""
)


def _mask_quoted_setting(match: re.Match[str]) -> str:
    if not is_secret_name(match.group("name")) or match.group("value") == MASK:
        return match.group(0)
    return match.group(0)[: match.start("value") - match.start()] + MASK + match.group("q2")


# Keys whose format gives them away, whatever they are called.
_KNOWN_FORMATS = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|hf_[A-Za-z0-9]{30,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|sk_live_[A-Za-z0-9]{16,}|rk_live_[A-Za-z0-9]{16,}|pk_live_[A-Za-z0-9]{16,})"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
)


def _mixed(value: str) -> bool:
    """Letters and digits both: how keys and passwords look, unlike `12345678` or `args.token`."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


class _TooMuch(Exception):
    """redact_obj_quick's budget ran out: the caller masks in a thread."""


class Redactor:
    """Masks secrets in text with ***: every known secret value, and whatever shows as one (module
    docstring). One instance per server, for logs, notifications, errors, history, exports and what the
    model is sent."""

    def __init__(self, env: Mapping[str, str] | None = None, extra: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._version = 0  # bumped when the secrets change: a remembered result of an older version is not used
        self._masked: dict[str, tuple[int, str]] = {}  # text -> (version, masked): see CACHE_CHARS
        self._masked_chars = 0
        # id(message) -> (message, its content, its number of keys, version, masked copy): redact_messages
        self._messages: dict[int, tuple[dict[str, Any], Any, int, int, Any]] = {}
        self._learned = 0
        # Secrets the server itself holds ({value: where it came from}): the only ones hidden in code,
        # and code holding one never runs (module docstring). Never what output or a file taught us.
        self._held: dict[str, str] = {}
        self._held_pattern: re.Pattern[str] | None = None
        for value, name in named_secret_values(env or {}).items():
            self.hold(name, value)
        self.add(*extra)

    def hold(self, name: str, value: str | None) -> None:
        """A secret the server holds (a provider key of its environment, the apiKey setting): masked in
        output like any other, and in code shown as `«hidden: name»` (code holding it never runs)."""
        if not isinstance(value, str) or len(value.strip()) < MIN_SECRET_LENGTH or MASK in value:
            return
        self.add(value)
        if value in self._held:
            return
        self._held[value] = name
        ordered = sorted(self._held, key=len, reverse=True)
        self._held_pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def held_in(self, code: str) -> list[str]:
        """The names of the held secrets `code` contains (empty: it may run as written)."""
        if self._held_pattern is None or not code:
            return []
        return sorted({self._held[m.group(0)] for m in self._held_pattern.finditer(code)})

    def mark_code(self, code: str) -> str:
        """Code as it is shown and recorded: exactly as written, except that a secret the server holds is
        replaced by `«hidden: NAME»` (such code never runs: `held_in`)."""
        if self._held_pattern is None or not code:
            return code
        return self._held_pattern.sub(lambda m: f"«hidden: {self._held[m.group(0)]}»", code)

    def add(self, *secrets: str | None) -> None:
        """Also redact these values (e.g. an apiKey set in the settings)."""
        fresh = {s for s in secrets if isinstance(s, str) and len(s.strip()) >= MIN_SECRET_LENGTH and MASK not in s}
        if not fresh - self._secrets:
            return
        self._secrets |= fresh
        # Longest first, so a secret that contains another is masked whole.
        ordered = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered))
        self._version += 1

    def redact(self, text: str) -> str:
        if not text:
            return text
        # Read before the work: a secret added meanwhile (another thread) makes this result one of the past.
        version, original = self._version, text
        if (known := self._masked.get(text)) is not None and known[0] == version:
            return known[1]
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        learned: list[str] = []
        text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
        text = _KNOWN_FORMATS.sub(MASK, text)
        text = _ASSIGNMENT.sub(lambda m: self._assignment(m, learned), text)
        if learned and self._learned < MAX_LEARNED:
            # Seen once with its name: masked wherever it appears alone later. Bounded: output listing
            # thousands of tokens must not grow the pattern (recompiled on each addition) without end.
            self._learned += len(learned)
            self.add(*learned)
        elif not learned:  # a text that taught a secret is masked again with it next time, not remembered
            if self._masked_chars + len(original) > CACHE_CHARS:
                self._masked.clear()
                self._masked_chars = 0
            if len(original) <= CACHE_CHARS // 16:
                self._masked[original] = (version, text)
                self._masked_chars += len(original)
        return text

    def redact_log(self, text: str) -> str:
        """`redact`, and for the log also every quoted value under a secret name, whatever it looks like:
        settings and messages are logged as JSON or Python reprs (`"apiKey": "…"`, `'gatewayToken': '…'`,
        `api_key='…'`), at DEBUG before the server has read the value as a setting."""
        return _QUOTED_SETTING.sub(_mask_quoted_setting, self.redact(text))

    @staticmethod
    def _assignment(match: re.Match[str], learned: list[str]) -> str:
        value = match.group("value")
        name = match.group("name").rsplit(".", 1)[-1]
        if MASK in value or not is_secret_name(name) or not _mixed(value):
            return match.group(0)
        learned.append(value)
        return match.group(0)[: match.start("value") - match.start()] + MASK

    def redact_obj(self, obj: Any) -> Any:
        """A copy of a JSON-like value (dicts, lists, strings) with secrets masked; other values as they are.
        Everything is masked, code too: for what leaves the machine (the model's requests) and the log."""
        return self._masked_copy(obj, None)

    def redact_obj_quick(self, obj: Any) -> Any | None:
        """`redact_obj`, if that is quick: at most QUICK_ITEMS strings, of which at most QUICK_CHARS characters
        not remembered masked (a model request after a run: all but the run's result was masked for the
        request before). None otherwise: the caller masks in a thread. A thread hop costs more (0.4-2 ms,
        with a run's aftermath competing for the GIL) than masking a step's new text. One walk, which stops
        where the budget ends (a walk to count first, then one to mask, cost twice as much: ~1 ms a request
        of a conversation's few hundred strings)."""
        try:
            return self._masked_copy(obj, [QUICK_ITEMS, QUICK_CHARS])
        except _TooMuch:
            return None

    def redact_messages_quick(self, messages: list[Any]) -> list[Any] | None:
        """`redact_messages`, if that is quick (`redact_obj_quick`'s budget, for the messages not masked
        before); None otherwise: the caller masks in a thread."""
        try:
            return self._redact_messages(messages, [QUICK_ITEMS, QUICK_CHARS])
        except _TooMuch:
            return None

    def redact_messages(self, messages: list[Any]) -> list[Any]:
        """`redact_obj` of a model request's messages, each masked once: a message of an earlier request (the
        same dict, its `content` the same object, as many keys: a conversation's views share their messages,
        read only) gives its masked copy of then, unless a secret was learned since. Only the messages new
        since the last request are walked, not the whole conversation again (~0.2 ms a request of 80
        messages; past QUICK_ITEMS strings, every request went to a thread). The copies are shared between
        requests: whoever may change what it is given gets a copy of its own (llm/paths.py, litellm)."""
        return self._redact_messages(messages, None)

    def _redact_messages(self, messages: list[Any], budget: list[int] | None) -> list[Any]:
        version = self._version  # read first: a secret learned meanwhile makes what follows one of the past
        memo, walk = self._messages, self._walker(budget)
        out: list[Any] = []
        for message in messages:
            entry = memo.get(id(message)) if isinstance(message, dict) else None
            if (
                entry is not None
                and entry[0] is message
                and entry[1] is message.get("content")
                and entry[2] == len(message)
                and entry[3] == version
            ):
                out.append(entry[4])
                continue
            masked = walk(message)
            if isinstance(message, dict):
                # Holding the message keeps its id from being reused while the entry lives.
                memo[id(message)] = (message, message.get("content"), len(message), version, masked)
            out.append(masked)
        if len(memo) > len(messages) + MESSAGES_SLACK:  # forget the messages that left the view
            kept = {id(m) for m in messages}
            self._messages = {k: v for k, v in memo.items() if k in kept}
        return out

    def _masked_copy(self, obj: Any, budget: list[int] | None) -> Any:
        """redact_obj's walk; `budget` ([strings, new characters]): raises _TooMuch where it ends."""
        return self._walker(budget)(obj)

    def _walker(self, budget: list[int] | None) -> Callable[[Any], Any]:
        """The walk of `_masked_copy`, made once for a whole payload (`_payload` walks each of its keys and
        values: one walker for all of them, not one each). A closure over locals: a method call per node
        cost the walk ~60 % more."""
        masked, redact = self._masked, self.redact

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                known = masked.get(value)
                # The version read at each string, as redact() reads it: a secret another thread adds meanwhile
                # masks the strings after it.
                fresh = known is None or known[0] != self._version
                if budget is not None:
                    budget[0] -= 1
                    budget[1] -= len(value) if fresh else 0
                    if budget[0] < 0 or budget[1] < 0:
                        raise _TooMuch
                return redact(value) if fresh or known is None else known[1]
            if isinstance(value, dict):
                return {walk(k): walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            if isinstance(value, tuple):
                return tuple(walk(v) for v in value)
            return value

        return walk

    def redact_shown(self, obj: Any) -> Any:
        """A copy of a payload for the user's eyes and records: notification params, a command result, a
        list of history events (the history file, an exported notebook). Output is masked, code is not.
        Code is, by position only (never whatever a kernel's output nests under such a key): a payload's
        own `code` (proposals, run echoes, decision and run events), an `assistant` event's `text` (its
        fenced blocks; its prose is masked) and `toolCalls`, and the same in each event of a result's
        `messages` (interpreter.history). Each is kept as written (`mark_code`)."""
        if isinstance(obj, list):
            return [self._payload(item) for item in obj]
        return self._payload(obj)

    def _payload(self, obj: Any) -> Any:
        if not isinstance(obj, dict):
            return self.redact_obj(obj)
        out: dict[Any, Any] = {}
        assistant = obj.get("type") == "assistant"
        walk = self._walker(None)
        for key, value in obj.items():
            if key == "code" and isinstance(value, str):
                out[key] = self.mark_code(value)
            elif assistant and key == "text" and isinstance(value, str):
                out[key] = ProseMasker(self).feed(value)
            elif assistant and key == "toolCalls":
                out[key] = self._code_strings(value)
            elif key == "messages" and isinstance(value, list):
                out[key] = [self._payload(item) for item in value]
            else:
                out[walk(key)] = walk(value)
        return out

    def _code_strings(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.mark_code(obj)
        if isinstance(obj, dict):
            return {k: self._code_strings(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self._code_strings(v) for v in obj]
        return obj


# A fence line (``` or ~~~, 3 or more) and a fence opened at the end of prose ("Run this: ```python").
_FENCE_LINE = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>.*)")
_TRAILING_FENCE = re.compile(r"(?P<fence>`{3,}|~{3,})[ \t]*[A-Za-z][\w+#.-]*[ \t]*$")
_LINE_HEAD = 1024  # characters of a line kept to recognise a fence (a fence line is short)


class ProseMasker:
    """Masks a model's reply, fed whole or delta by delta, outside its fenced code blocks: the prose is
    masked like output; the lines of a fenced block are left as written (`mark_code`), so that the code a
    reply shows is the code its proposal runs (fences as agent/codeblocks.py reads them: ``` or ~~~, a
    longer one closing a shorter, one opened at the end of a line of prose). Each delta is masked on its
    own, as output is. One instance per reply."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._fence: tuple[str, int] | None = None  # (character, length) inside a fenced block
        self._line = ""  # the head of the current line

    def feed(self, text: str) -> str:
        out: list[str] = []
        prose: list[str] = []
        for piece in re.findall(r"[^\n]*\n|[^\n]+", text):
            if self._fence is None:
                prose.append(piece)
            else:
                if prose:
                    out.append(self._redactor.redact("".join(prose)))
                    prose = []
                out.append(self._redactor.mark_code(piece))
            if len(self._line) < _LINE_HEAD:
                self._line += piece[: _LINE_HEAD - len(self._line)]
            if piece.endswith("\n"):
                self._end_of_line(self._line.rstrip("\r\n"))
                self._line = ""
        if prose:
            out.append(self._redactor.redact("".join(prose)))
        return "".join(out)

    def _end_of_line(self, line: str) -> None:
        if self._fence is not None:
            char, length = self._fence
            stripped = line.lstrip(" \t")
            run = len(stripped) - len(stripped.lstrip(char))
            if run >= length and not stripped[run:].strip():
                self._fence = None
            return
        match = _FENCE_LINE.fullmatch(line)
        if match and not (match.group("fence")[0] == "`" and "`" in match.group("info")):
            self._fence = (match.group("fence")[0], len(match.group("fence")))
            return
        trailing = _TRAILING_FENCE.search(line)
        if trailing and trailing.start() > 0 and trailing.group("fence")[0] not in line[: trailing.start()]:
            self._fence = (trailing.group("fence")[0], len(trailing.group("fence")))


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets in the message, its arguments and any traceback."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: log it as written rather than drop it
            message = str(record.msg)
        record.msg = self.redactor.redact_log(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.redact_log(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.redact_log(record.stack_info)
        return True


def protect_server_environment() -> bool:
    """Make this process non-dumpable (Linux): processes of the same user, kernels included, can then no
    longer read its environment (and the keys in it) through /proc/<pid>/environ, nor attach a debugger.
    Root still can; the sandbox hides the server from kernels either way. True if it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    pr_set_dumpable = 4
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(pr_set_dumpable, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
