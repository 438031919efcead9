"""Secrets: provider keys stay out of the kernel's environment and out of every text the server emits."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import uuid

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
    redactor = Redactor()
    assert redactor.redact(CANARY) == CANARY
    redactor.add(CANARY)
    assert redactor.redact(CANARY) == MASK


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
