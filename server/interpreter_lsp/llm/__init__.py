"""Model access: OpenAI-compatible, Anthropic and Ollama streams spoken directly over httpx, every other
provider through litellm; streaming with timeouts and retries, local discovery.

Importing this package is cheap: httpx and litellm load only through `loader` (warm-up thread or first use).
"""

from interpreter_lsp.llm.client import Completion, ModelConfig, stream_completion
from interpreter_lsp.llm.discovery import NO_MODEL_HELP, discover_local_model, no_model_help
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.loader import get_litellm, start_warm_up

__all__ = [
    "NO_MODEL_HELP",
    "Completion",
    "ModelConfig",
    "ModelError",
    "discover_local_model",
    "get_litellm",
    "no_model_help",
    "start_warm_up",
    "stream_completion",
]
