"""One exception family; each renders as one line a user can act on (simonw/llm style).

Errors at start-up end the program (``exit_code``); errors while serving a request become one HTTP body
(``http_status``, ``kind``) built by ``error_body``, the same shape on every route: OpenAI's.
"""
from __future__ import annotations

from typing import Any


class ErnieChatError(Exception):
    """Base of every error the app reports to a person. ``str(err)`` is the whole message."""

    exit_code = 2
    http_status = 500
    kind = "server_error"


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


class AccountError(ErnieChatError):
    """A user name or secret outside the rules, an unknown user, or a users file that cannot be read."""


class InsecureBindError(ErnieChatError):
    """Asked to listen beyond loopback without an auth token."""


class ImportRefused(ErnieChatError):
    """A file or a chat that import does not read; the message is the reason, in one line."""


# ----- while serving a request ------------------------------------------------------------------------
class BadRequestError(ErnieChatError):
    """This request cannot be served as sent (shape, size, values); the caller must change it."""

    http_status = 400
    kind = "invalid_request_error"


class PromptTooLongError(BadRequestError):
    """The newest message alone leaves no room to answer in the model's context."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"the last message is {tokens:,} tokens; the context holds {limit:,}")
        self.tokens, self.limit = tokens, limit


class RequestRefused(BadRequestError):
    """The engine is fine but refused this one request (a remote server's 4xx)."""


class EngineUnavailable(ErnieChatError):
    """The engine cannot take a request now (loading, restarting, failed)."""

    http_status = 503
    kind = "unavailable"


class EngineDied(EngineUnavailable):
    """The engine died while answering; the host restarts it."""


class AuthenticationError(ErnieChatError):
    """A route that needs --auth-token was called without it (or with a wrong one)."""

    http_status = 401
    kind = "authentication_error"


class RequestForbidden(ErnieChatError):
    """The request comes from a host or origin that may not use the app."""

    http_status = 403
    kind = "forbidden"


class NotFoundError(ErnieChatError):
    """No such thing for this user: another user's chat, message or feedback answers the same, so ids of
    others' chats are not confirmed."""

    http_status = 404
    kind = "not_found_error"


class BodyTooLargeError(BadRequestError):
    http_status = 413
    kind = "request_too_large"


class UnsupportedMediaTypeError(BadRequestError):
    http_status = 415


class TooManyLogins(ErnieChatError):
    """Failed logins from one client passed the free ones: the next attempt waits."""

    http_status = 429
    kind = "rate_limit_error"


def error_body(err: ErnieChatError) -> dict[str, Any]:
    """The one error body of every route and stream chunk."""
    return {"error": {"message": str(err), "type": err.kind}}


def error_response(err: ErnieChatError) -> Any:
    """``err`` as an HTTP response of our own routes (a starlette JSONResponse) in the one error body."""
    from starlette.responses import JSONResponse

    return JSONResponse(error_body(err), status_code=err.http_status)


def one_line(err: BaseException) -> str:
    """An exception from a library (vLLM, torch, httpx) as one line: its type and first line."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:500]


class HistoryDatabaseError(ErnieChatError):
    """The chat database cannot be used as it is (e.g. written by a newer ernie-chat); nothing was changed."""


class DocumentRefused(BadRequestError):
    """An attached file is not read (too big, an image, binary, encrypted, damaged, a zip bomb, too slow).

    ``reason`` names the line the chat shows (app/i18n.py ``doc_<reason>``, in the page's language) and ``values``
    fills it; ``str(err)`` is the English line, for the log (a file's name and size, never its contents)."""

    def __init__(self, reason: str, name: str, **values: Any) -> None:
        from app.i18n import t

        self.reason, self.name, self.values = reason, name, values
        super().__init__(t("en", f"doc_{reason}", name=name, **values))
