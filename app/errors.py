"""One small exception family; each renders as one line a user can act on (simonw/llm style)."""
from __future__ import annotations


class ErnieChatError(Exception):
    """Base of every error the app reports to a person. ``str(err)`` is the whole message."""

    exit_code = 2


class SettingsError(ErnieChatError):
    """A setting has a value outside what is allowed (names the field, the value and the range)."""


class UnsupportedHardwareError(ErnieChatError):
    """The card (or the installed vLLM build) cannot run the model; the message says what to install."""


class InsufficientMemoryError(ErnieChatError):
    """Free GPU memory is below what the model and a minimal KV cache need."""


class ModelNotFoundError(ErnieChatError):
    """Neither a local directory nor a downloadable hub id; or the hub cannot be reached."""


class PortInUseError(ErnieChatError):
    """The host:port to serve on is taken."""


class EngineStartError(ErnieChatError):
    """The engine failed to start, after the retries the plan allows."""


class RemoteServerError(ErnieChatError):
    """The --remote-url server cannot be used: unreachable, refuses the key, or does not serve the model."""


class InsecureBindError(ErnieChatError):
    """Asked to listen beyond loopback without an auth token."""


class PromptTooLongError(ErnieChatError):
    """One message alone does not fit the model's context."""


class HistoryDatabaseError(ErnieChatError):
    """The chat database cannot be used as it is (e.g. written by a newer ernie-chat); nothing was changed."""
