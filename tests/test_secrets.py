"""Secrets: provider keys stay out of the kernel's environment and out of every text the server emits."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from interpreter_lsp.safety.secrets import (
    LITELLM_SECRET_NAMES,
    MASK,
    RedactingFilter,
    Redactor,
    is_secret_name,
    kernel_environment,
)

CANARY = f"sk-canary-{uuid.uuid4().hex}"

SECRET_NAMES = [
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_API_KEY", "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "GEMINI_API_KEY", "GOOGLE_API_KEY", "HF_TOKEN",
    "HUGGINGFACE_API_KEY", "COHERE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY",
    "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "REPLICATE_API_TOKEN", "MY_SERVICE_TOKEN",
    "DB_PASSWORD", "STRIPE_SECRET_KEY", "CLIENT_SECRET", "GITHUB_TOKEN", "WATSONX_APIKEY", "LITELLM_MASTER_KEY",
    "VERTEXAI_CREDENTIALS",
]
ORDINARY_NAMES = ["PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV", "OPENAI_API_BASE", "OPENAI_BASE_URL",
                  "TOKENIZERS_PARALLELISM", "TIKTOKEN_CACHE_DIR", "KEYBOARD_LAYOUT", "TERM", "PWD"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_every_listed_litellm_variable_is_secret() -> None:
    assert all(is_secret_name(name) for name in LITELLM_SECRET_NAMES)


def test_the_canary_never_reaches_the_kernel_environment() -> None:
    env = {name: f"{CANARY}-{name}" for name in SECRET_NAMES} | {name: "/usr/bin" for name in ORDINARY_NAMES}
    kernel_env = kernel_environment(env)
    assert CANARY not in json.dumps(kernel_env)
    assert set(kernel_env) == set(ORDINARY_NAMES)
    assert env["OPENAI_API_KEY"].startswith(CANARY)  # the input is not changed


def test_allowed_names_pass_through() -> None:
    env = {"GITHUB_TOKEN": CANARY, "OPENAI_API_KEY": CANARY, "PATH": "/bin"}
    assert kernel_environment(env, allowed=["GITHUB_TOKEN"]) == {"GITHUB_TOKEN": CANARY, "PATH": "/bin"}


def test_redactor_masks_secret_values_from_the_environment_and_settings() -> None:
    api_key = f"settings-key-{uuid.uuid4().hex}"
    redactor = Redactor({"OPENAI_API_KEY": CANARY, "PATH": "/usr/local/bin:/usr/bin", "SHORT_TOKEN": "abc"},
                        extra=[api_key, None, ""])
    text = f"litellm.AuthenticationError: key {CANARY} rejected; apiKey={api_key}; PATH=/usr/local/bin:/usr/bin"
    out = redactor.redact(text)
    assert CANARY not in out and api_key not in out
    assert out.count(MASK) == 2
    assert "/usr/local/bin:/usr/bin" in out  # not a secret
    assert redactor.redact("abc def") == "abc def"  # values shorter than 8 characters are left alone


def test_a_longer_secret_containing_a_shorter_one_is_masked_whole() -> None:
    redactor = Redactor(extra=["abcdefgh", "abcdefgh-and-more"])
    assert redactor.redact("x abcdefgh-and-more y") == f"x {MASK} y"


def test_redact_obj_walks_notifications_and_history() -> None:
    redactor = Redactor({"ANTHROPIC_API_KEY": CANARY})
    message = {
        "turnId": "t1",
        "seq": 3,
        "delta": f"your key is {CANARY}",
        "data": {"text/plain": [f"{CANARY}\n", "ok"], CANARY: True},
        "args": (CANARY, 1, None),
    }
    clean = redactor.redact_obj(message)
    assert CANARY not in repr(clean)
    assert clean["seq"] == 3 and clean["args"][1:] == (1, None)
    assert clean["data"]["text/plain"] == [f"{MASK}\n", "ok"]
    assert CANARY in message["delta"]  # the original is not changed


def test_added_secrets_are_masked_from_then_on() -> None:
    plain = f"canary{uuid.uuid4().hex}"  # nothing about it looks like a key: known only once added
    redactor = Redactor()
    assert redactor.redact(plain) == plain
    redactor.add(plain)
    assert redactor.redact(plain) == MASK


def test_a_remembered_text_is_masked_again_once_a_secret_is_learned() -> None:
    """Masked texts are remembered (a model request repeats the whole conversation), never past a new secret:
    one learned from output masks it in texts seen before, and the text that taught it is not remembered as
    it was first masked."""
    value = f"Zq{uuid.uuid4().hex[:12]}X9"
    redactor = Redactor()
    alone = f"printed: {value}"
    assert redactor.redact(alone) == alone  # nothing says it is a secret yet
    assert redactor.redact(alone) == alone  # the same, remembered
    assert redactor.redact(f"API_TOKEN={value}") == f"API_TOKEN={MASK}"  # learned here
    assert redactor.redact(alone) == f"printed: {MASK}"
    other = f"Wk{uuid.uuid4().hex[:12]}R7"
    both = f"{other} then SECRET_KEY={other}"
    assert redactor.redact(both) == f"{other} then SECRET_KEY={MASK}"  # the first sight of it, as before
    assert redactor.redact(both) == f"{MASK} then SECRET_KEY={MASK}"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("DATABASE_URL=postgres://app:Pg-Passw0rd-4242@db.internal/app", "DATABASE_URL=postgres://app:***@db.internal/app"),
        ("PGPASSWORD=Sup3rS3cretPg", "PGPASSWORD=***"),
        ("AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY: ***"),
        ('export SLACK_BOT_TOKEN="T0k3n-abcdef-123456"', 'export SLACK_BOT_TOKEN="***"'),
        ('{"apiKey": "abc123def456"}', '{"apiKey": "***"}'),
        ("using sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX1234 now", "using *** now"),
        ("id AKIAIOSFODNN7EXAMPLE", "id ***"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r\n-----END OPENSSH PRIVATE KEY-----", "***"),
        # Code and ordinary data stay as written.
        ("token = get_token()", "token = get_token()"),
        ("api_key = args.key", "api_key = args.key"),
        ('x = os.environ["GITHUB_TOKEN"]', 'x = os.environ["GITHUB_TOKEN"]'),
        ("{'key': 12345678}", "{'key': 12345678}"),
        ("monkey = abc12345", "monkey = abc12345"),
        ("TOKENIZERS_PARALLELISM=false1234", "TOKENIZERS_PARALLELISM=false1234"),
    ],
)
def test_secrets_are_recognised_by_how_they_look(text: str, masked: str) -> None:
    assert Redactor().redact(text) == masked


def test_a_value_seen_with_its_name_is_masked_alone_later() -> None:
    redactor = Redactor()
    redactor.redact("PAYMENTS_API_KEY=pay1ment2key3value")
    assert redactor.redact("the key is pay1ment2key3value.") == "the key is ***."


def test_one_definition_for_the_rater_too() -> None:
    from interpreter_lsp.safety.rules import is_secret_variable

    for name in ("PGPASSWORD", "DATABASE_URL", "SENTRY_DSN", "AWS_SECRET_ACCESS_KEY", "MY_TOKEN", "apiKey"):
        assert is_secret_name(name) and is_secret_variable(name), name


def test_logging_filter_masks_messages_arguments_and_tracebacks() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter(Redactor({"OPENAI_API_KEY": CANARY})))
    log = logging.getLogger(f"test-secrets-{uuid.uuid4().hex}")
    log.addHandler(handler)
    log.propagate = False
    log.warning("calling model with key %s", CANARY)
    log.warning(f"inline {CANARY}")
    try:
        raise RuntimeError(f"auth failed for {CANARY}")
    except RuntimeError:
        log.exception("request failed")
    log.warning("bad format %s %s", "only-one")  # a broken call still logs, never crashes
    output = stream.getvalue()
    assert CANARY not in output
    assert output.count(MASK) == 3
    assert "RuntimeError: auth failed for ***" in output
    assert "bad format" in output


def test_the_server_can_hide_its_environment_from_same_user_processes() -> None:
    code = (
        "import ctypes\n"
        "from interpreter_lsp.safety.secrets import protect_server_environment\n"
        "libc = ctypes.CDLL(None)\n"
        "before = libc.prctl(3, 0, 0, 0, 0)\n"  # PR_GET_DUMPABLE
        "ok = protect_server_environment()\n"
        "print(before, ok, libc.prctl(3, 0, 0, 0, 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["1", "True", "0"]


# ---- through the server: every way out -------------------------------------------------------------------


ENV_FILE = (
    "PAYMENTS_API_KEY=pay1ment2key3value4X\n"
    "DATABASE_URL=postgres://app:Pg-Passw0rd-4242@db.internal/app\n"
    "export PGPASSWORD='Sup3rS3cretPg9'\n"
)
WORKSPACE_SECRETS = ("pay1ment2key3value4X", "Pg-Passw0rd-4242", "Sup3rS3cretPg9", "My5ql-Pass-777")


async def test_a_key_a_run_prints_is_masked_everywhere(workspace_root, home) -> None:
    """A key from the workspace's .env, printed by kernel code (whole, alone, and in two pieces sent apart),
    reaches neither the model, the notifications, the exported notebook, the history nor a DEBUG log; nor
    does the apiKey setting."""
    from harness import start_session, stop_session
    from interpreter_lsp import protocol as p
    from scripted_model import ScriptedModel

    (workspace_root / ".env").write_text(ENV_FILE)
    log_file = home / "server.log"
    api_key = f"sk-setting-{uuid.uuid4().hex}"
    with ScriptedModel() as model:
        model.reply("Noted.")
        settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": api_key, "maxRetries": 0}
        s = await start_session(
            workspace_root, home, configuration=settings,
            server_args=("--log-level", "DEBUG", "--log-file", str(log_file)),
        )
        try:
            code = (
                "import time\n"
                "print(open('.env').read())\n"
                "key = open('.env').read().split('=')[1].split()[0]\n"
                "print('alone:', key)\n"
                "print('split:', key[:9], end='', flush=True)\n"
                "time.sleep(0.2)\n"
                "print(key[9:], flush=True)\n"
                "print('pieces:', open('.env').read().split('@')[0].split(':')[-1])\n"
                # Built at run time: code is shown as written (test_code_shown.py), output is masked.
                "print('connecting to mysql://admin:' + 'My5ql' + '-Pass-777@replica.internal:3306/shop')\n"
            )
            run_id, status = await s.run_and_wait(code)
            assert status["state"] == "ok", s.text(run_id)
            shown = s.text(run_id)
            assert "alone: ***\nsplit: ***\npieces: ***\n" in shown
            assert "mysql://admin:***@replica.internal:3306/shop" in shown
            turn = (await s.command(p.CHAT, {"text": "What did that print?"}))["turnId"]
            await s.wait_for(
                lambda: any(n["turnId"] == turn and n["state"] == "done" for n in s.notes[p.TURN_STATUS]),
                what="the turn to end",
            )
            exported = Path((await s.command(p.EXPORT_NOTEBOOK, {"path": "out/conversation.ipynb"}))["path"])
            history = await s.command(p.HISTORY, {})
        finally:
            await stop_session(s)
    sent_to_model = json.dumps(model.requests)
    assert "replica.internal" in sent_to_model  # the run's output did reach the model, masked
    places = {
        "model request": sent_to_model,
        "notifications": json.dumps(s.notes),
        "exported notebook": exported.read_text(),  # noqa: ASYNC240
        "history": json.dumps(history),
        "log": log_file.read_text(),
    }
    for path in (home / "state").rglob("*"):
        # The undo store holds byte copies of workspace files (the .env among them), private like the
        # workspace itself (0700): what the server writes of its own must hold no secret.
        if path.is_file() and "blobs" not in path.relative_to(home / "state").parts:
            places[str(path)] = path.read_text(errors="replace")
    for place, text in places.items():
        for secret in (*WORKSPACE_SECRETS, api_key):
            assert secret not in text, f"{secret} in the {place}"
    assert "***" in places["exported notebook"] and "***" in places["model request"]
    assert "DEBUG" in places["log"]  # the log was written at DEBUG level


def test_masking_is_linear_on_long_runs() -> None:
    """Run output may hold megabytes of base64, dotted names or one long word: each pattern starts only
    where a run starts. (A pattern free to start anywhere took 36 s on 20 KB of one letter.)"""
    import time

    redactor = Redactor()
    for text in ("x" * 200_000, "a." * 100_000, "a:" * 100_000, "http://a:" * 20_000, "key=" + "x1" * 100_000 + "("):
        start = time.perf_counter()
        redactor.redact(text)
        assert time.perf_counter() - start < 10.0  # seconds on a busy core; quiet, well under 0.1 s


def test_code_is_kept_by_position_only_never_where_kernel_output_nests_it() -> None:
    """A kernel's output cannot pass a secret unmasked by nesting it under a `code` key (or in something
    shaped like a history event): only a payload's own `code` and its events' are code."""
    redactor = Redactor({"OPENAI_API_KEY": CANARY})
    secret_url = "postgres://app:Pg-Passw0rd-4242@db/app"
    nested = {"code": secret_url, "type": "run", "text": secret_url}
    output = {"runId": "r1", "seq": 0, "kind": "display", "data": {"application/json": nested}}
    assert secret_url not in json.dumps(redactor.redact_shown(output))
    run_event = {"type": "run", "code": secret_url, "outputs": [{"output_type": "display_data", "data": {
        "application/json": nested}}]}
    for shown in (redactor.redact_shown([run_event]), redactor.redact_shown({"messages": [run_event]})):
        text = json.dumps(shown)
        assert text.count(secret_url) == 1  # the event's own code, not what its output nests
    assert redactor.redact_shown({"code": f"k = '{CANARY}'"}) == {"code": "k = '«hidden: OPENAI_API_KEY»'"}


def test_log_masking_of_quoted_setting_values_is_linear_too() -> None:
    import time

    redactor = Redactor()
    texts = ('a="' * 70_000, ('k="' + "x" * 5000) * 40, '"image/png": "' + "iVBOR/+" * 30_000,
             "token='" + "x\\" * 100_000)
    for text in texts:
        start = time.perf_counter()
        redactor.redact_log(text)
        assert time.perf_counter() - start < 10.0  # quiet: well under 0.2 s
    assert redactor.redact_log("""{'apiKey': 'a b', "gatewayToken":"", 'model': 'm'}""") == (
        """{'apiKey': '***', "gatewayToken":"", 'model': 'm'}"""
    )


async def test_the_whole_conversation_is_masked_off_the_event_loop_small_results_on_it() -> None:
    """interpreter.history answers with every event of a conversation of weeks (3,000 events: ~70 ms to mask the
    first time): masked in a thread, so runs' output keeps flowing; a run's small response is masked at once."""
    import threading
    from types import SimpleNamespace

    from interpreter_lsp import protocol as p
    from interpreter_lsp.commands import _handler

    secret = "sk-" + uuid.uuid4().hex
    redactor = Redactor({"OPENAI_API_KEY": secret})
    threads: list[str] = []
    shown = redactor.redact_shown

    def recording(obj):
        threads.append(threading.current_thread().name)
        return shown(obj)

    redactor.redact_shown = recording  # type: ignore[method-assign]
    ls = SimpleNamespace(redactor=redactor)
    event = {"type": "run", "code": "print(1)", "outputs": [{"stream": "stdout", "text": f"key {secret}"}]}

    async def conversation(_ls, _args):
        return {"messages": [event] * 3}

    async def small(_ls, _args):
        return {"runId": "r-1", "note": secret}

    history = await _handler(ls, p.HISTORY, conversation)(None)  # type: ignore[arg-type]
    assert secret not in json.dumps(history) and history["messages"][0]["code"] == "print(1)"
    assert threads.pop() != threading.main_thread().name
    assert secret not in json.dumps(await _handler(ls, p.RUN, small)(None))  # type: ignore[arg-type]
    assert threads.pop() == threading.main_thread().name


def test_a_request_with_little_new_is_masked_at_once_a_large_one_is_left_to_a_thread() -> None:
    """call_model masks a step's request on the loop when little of it is new (all but the run's result was
    masked for the request before), the same way as in a thread; a request with much new text is not."""
    from interpreter_lsp.safety import secrets

    secret = "sk-" + uuid.uuid4().hex
    redactor = Redactor({"OPENAI_API_KEY": secret})
    earlier = [{"role": "user", "content": f"step {i}: " + "text " * 100} for i in range(40)]
    redactor.redact_obj(earlier)
    step = [*earlier, {"role": "user", "content": f"the run printed {secret} and DB_PASSWORD=hunter2hunter2"}]
    assert redactor.redact_obj_quick(step) == redactor.redact_obj(step)
    shown = json.dumps(redactor.redact_obj_quick(step))
    assert secret not in shown and "hunter2" not in shown
    flood = [*earlier, {"role": "user", "content": "x" * (secrets.QUICK_CHARS + 1)}]
    assert redactor.redact_obj_quick(flood) is None
    many = [{"role": "user", "content": str(i)} for i in range(secrets.QUICK_ITEMS)]
    assert redactor.redact_obj_quick(many) is None


def test_a_request_s_messages_are_masked_once_each_and_again_once_a_secret_is_learned() -> None:
    """call_model's masking (Redactor.redact_messages): a message of an earlier request is not walked again
    (a conversation's views share their messages), unless its content is another object now or a secret was
    learned since; past the quick budget the thread's masking remembers them the same way, so the next
    request is quick again."""
    from interpreter_lsp.safety import secrets

    secret = "sk-" + uuid.uuid4().hex
    redactor = Redactor({"OPENAI_API_KEY": secret})
    later_secret = "Zq" + uuid.uuid4().hex  # no known shape: masked only once the redactor learns it
    earlier = [{"role": "user", "content": f"step {i}: printed {later_secret}"} for i in range(20)]
    first = redactor.redact_messages_quick(earlier)
    assert first == redactor.redact_obj(earlier)
    again = redactor.redact_messages_quick([*earlier, {"role": "assistant", "content": f"I saw {secret}"}])
    assert again is not None and again[:20] == first and all(a is b for a, b in zip(again, first, strict=False))
    assert secret not in json.dumps(again)

    # A message whose content is another object now is masked again.
    earlier[3] = {**earlier[3]}
    earlier[3]["content"] = f"rewritten with {secret}"
    assert secret not in json.dumps(redactor.redact_messages_quick(earlier))

    # A secret learned later is masked in the messages remembered from before.
    assert later_secret in json.dumps(redactor.redact_messages_quick(earlier))
    redactor.add(later_secret)
    assert later_secret not in json.dumps(redactor.redact_messages_quick(earlier))

    # Too much new text for the loop: the thread's masking remembers each message, the next request is quick.
    many = [{"role": "user", "content": f"line {i} with {secret}"} for i in range(secrets.QUICK_ITEMS)]
    assert redactor.redact_messages_quick(many) is None
    masked = redactor.redact_messages(many)
    assert secret not in json.dumps(masked)
    assert redactor.redact_messages_quick([*many, {"role": "user", "content": "one more"}]) is not None


async def test_litellm_is_given_a_copy_of_the_shared_masked_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The masked messages of a request are shared with the next (Redactor.redact_messages): litellm, whose
    handling of what it is given is its own, gets a copy; our own wire formats build new bodies."""
    from interpreter_lsp.llm import paths
    from interpreter_lsp.llm.client import ModelConfig

    seen: list[list[dict[str, object]]] = []

    async def changes_what_it_is_given(_litellm: object, kwargs: dict[str, object]) -> None:
        messages = kwargs["messages"]
        assert isinstance(messages, list)
        seen.append(messages)
        messages[0]["content"][0]["text"] = "changed"  # type: ignore[index]
        messages.append({"role": "user", "content": "added"})

    monkeypatch.setattr(paths, "_open_stream", changes_what_it_is_given)
    shared = [{"role": "user", "content": [{"type": "text", "text": "as masked"}]}]
    await paths.LitellmPath(object(), "openai").open(shared, ModelConfig(model="openai/x"), None)  # type: ignore[arg-type]
    assert seen and shared == [{"role": "user", "content": [{"type": "text", "text": "as masked"}]}]
