"""The one error the model side raises: what went wrong, in words a person can act on, and its kind."""

from __future__ import annotations

from typing import Final

# Kinds, so callers can branch without parsing messages.
AUTH: Final = "auth"  # the server refused the credentials
NOT_FOUND: Final = "not_found"
RATE_LIMITED: Final = "rate_limited"
SERVER: Final = "server"
CONNECTION: Final = "connection"  # the connection dropped or timed out
NOT_LISTENING: Final = "not_listening"  # connection refused: no server runs there
MISSING_KEY: Final = "missing_key"  # no API key where the provider needs one; nothing was sent
NO_PROVIDER: Final = "no_provider"  # the model name says no provider litellm knows; nothing was sent
CLIENT: Final = "client"  # litellm refused to send the request (a setting it cannot use)
FIRST_TOKEN_TIMEOUT: Final = "first_token_timeout"
STALLED: Final = "stalled"
MALFORMED: Final = "malformed"
CONTEXT_WINDOW: Final = "context_window"
BAD_REQUEST: Final = "bad_request"
NOT_COMPATIBLE: Final = "not_compatible"  # the URL answers, but not with this API (a 501, a 404 everywhere)
NO_MODEL: Final = "no_model"
UNAVAILABLE: Final = "unavailable"  # litellm (or the direct client) could not be loaded
OTHER: Final = "other"


class ModelError(Exception):
    """A model request failed. `message` is written for the user (never contains an API key)."""

    def __init__(self, message: str, kind: str = OTHER) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind

    def __repr__(self) -> str:
        return f"ModelError({self.message!r}, kind={self.kind!r})"
