"""Settings, one pydantic-settings class per concern.

Each field carries its bounds and a description; the CLI (app/cli.py) is generated from them, so a new
setting is one field here. Values come from, highest first: CLI flags, ``ERNIE_CHAT_*`` environment
variables, a ``.env`` file, the defaults below. Engine overrides keep vLLM's own names.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.planning.tutorial_lines import TUTORIAL_LINES

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # where .chainlit/ and chainlit.md live
ENV_PREFIX = "ERNIE_CHAT_"


def flag_name(name: str) -> str:
    """A setting field's command-line flag (the one rule that names them: app/cli.py generates the flags)."""
    return "--" + name.replace("_", "-")


DEFAULT_MODEL = "baidu/ERNIE-4.5-0.3B-PT"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# A short token falls to guessing even with the login rate limit (docs/security.md, rows 5a-5b).
MIN_TOKEN_CHARS = 16


def require_strong_token(token: str) -> None:
    """Raise ValueError (without the token in it) when the token is too weak to guard the app."""
    if len(token) < MIN_TOKEN_CHARS:
        import secrets

        raise ValueError(f"the token is {len(token)} characters; use at least {MIN_TOKEN_CHARS}, e.g. this fresh one "
                         f"(shown once): {secrets.token_urlsafe(24)}")


def read_token_file(path: Path) -> str:
    try:
        lines = path.expanduser().read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ValueError(f"cannot read it ({err.strerror})") from None
    return lines[0].strip() if lines else ""


@dataclass(frozen=True)
class Bound:
    """The allowed range of one sampling value: the settings, the UI's sliders and /v1 all use it."""

    low: float
    high: float
    integer: bool = False

    def __str__(self) -> str:
        return f"{self.low:g}..{self.high:g}"


# The one definition of what a chat may ask for. Below 16 answer tokens a reply is useless (the context
# fitting refuses rather than answer in three words); top_p below 0.05 is greedy decoding in disguise.
SAMPLING_BOUNDS = {
    "temperature": Bound(0.0, 2.0),
    "top_p": Bound(0.05, 1.0),
    "max_tokens": Bound(16, 32768, integer=True),
}
# Answers written at once to one question, kept as versions of one answer (1: the usual single answer): the chat's
# "Answers at once" and /v1's ``n``. Each takes a slot of the engine's fair queue as one answer does, so one question
# holds at most four of a user's turns, and one answer's ten versions (app/history/messages.py MAX_VERSIONS) hold
# two rounds of them and more.
ANSWERS, ANSWERS_AT_ONCE = "answers", Bound(1, 4, integer=True)  # the chat's setting, and its range
# /v1 takes answers down to one token, as OpenAI's API and vLLM do (a classifier asks for one); the UI's
# slider and the chat defaults keep the bound above.
API_SAMPLING_BOUNDS = {**SAMPLING_BOUNDS, "max_tokens": Bound(1, SAMPLING_BOUNDS["max_tokens"].high, integer=True)}
_T, _P, _N = (SAMPLING_BOUNDS[k] for k in ("temperature", "top_p", "max_tokens"))


def _config(env_file: str | None = ".env") -> SettingsConfigDict:
    return SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=env_file, extra="ignore",
                              validate_default=True)


class ServerSettings(BaseSettings):
    """Where and how the UI and its routes are served."""

    model_config = _config()

    host: str = Field("127.0.0.1", description="Address to listen on. Anything but loopback needs --auth-token "
                      "(or --insecure-no-auth): an open chat UI lets anyone on the network use your GPU.")
    port: int = Field(8000, ge=1, le=65535, description="TCP port for the chat UI and /healthz, /readyz, /metrics.")
    root_path: str = Field("", description="URL prefix when served behind a reverse proxy, e.g. /chat "
                           "(see docs/deploy.md).")
    auth_token: Optional[SecretStr] = Field(None, description="Bearer token for /metrics and /v1, and the UI "
                                            "password of ONE person (any user name logs in as the same user). "
                                            "For several people: python launch.py users add NAME. Required "
                                            "when --host is not loopback.")
    insecure_no_auth: bool = Field(False, description="Allow a non-loopback --host without --auth-token. "
                                   "Anyone who can reach the port can use the model.")
    open: Optional[bool] = Field(None, description="Open the chat in your browser when "
                                         "it is ready. Default: on when started from a terminal on a desktop "
                                         "(a display is set) and serving on loopback.")
    log_file: Path = Field(Path("logs/llm.log"), description="Log file; 'Engine started.' is written here "
                           "when the model is ready.")
    auth_token_file: Optional[Path] = Field(None, description="Read --auth-token from this file (first line): "
                                            "unlike the flag, it does not show in `ps` to other local users.")
    allowed_hosts: str = Field("", description="Host names the app answers to besides the bound --host, localhost "
                               "and 127.0.0.1, comma-separated (e.g. chat.example.com behind nginx; * for any). "
                               "Other Host headers get 403: that stops DNS rebinding.")
    allowed_origins: str = Field("", description="Web origins allowed to use the chat socket and POST to the app "
                                 "besides its own, comma-separated, like Ollama's OLLAMA_ORIGINS "
                                 "(e.g. https://tools.example.com; * for any).")
    max_body_bytes: int = Field(8 * 2**20, ge=64 * 2**10, le=2**30, description="Largest request body in bytes; "
                                "bigger ones get 413 before they are read. Raise it with --max-message-chars.")
    login_lifetime: int = Field(12 * 3600, ge=60, le=30 * 86400, description="Seconds a UI login stays valid "
                                "(with --auth-token); logging out ends it at once.")
    forwarded_allow_ips: str = Field("", description="Reverse proxies whose X-Forwarded-For and X-Forwarded-Proto "
                                     "are believed, comma-separated addresses or networks (uvicorn's rule; * for "
                                     "any), e.g. 127.0.0.1 behind nginx on this machine. Default: none, so the "
                                     "client's address is its connection's and a local program cannot claim "
                                     "others to dodge the login limit.")

    @field_validator("root_path")
    @classmethod
    def _normalise_root_path(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not value.startswith("/"):
            raise ValueError("must start with '/', e.g. /chat")
        return value

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxy_addresses(cls, value: str) -> str:
        # uvicorn keeps a malformed entry as a name that never matches: a typo would silently trust nobody.
        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        for entry in entries:
            if entry != "*":
                try:
                    ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    raise ValueError(f"{entry!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/8, "
                                     "or * for any)") from None
        return ",".join(entries)

    @property
    def proxies_trusted(self) -> bool:
        return bool(self.forwarded_allow_ips)

    @field_validator("auth_token")
    @classmethod
    def _strong_token(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        if value is not None:
            require_strong_token(value.get_secret_value())
        return value

    @field_validator("auth_token_file")
    @classmethod
    def _readable_token_file(cls, value: Optional[Path]) -> Optional[Path]:
        if value is not None:
            require_strong_token(read_token_file(value))
        return value

    @model_validator(mode="after")
    def _token_from_file(self) -> ServerSettings:
        if self.auth_token_file is not None and self.auth_token is None:
            self.auth_token = SecretStr(read_token_file(self.auth_token_file))
        return self

    @property
    def is_loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS or self.host.startswith("127.")


class ModelSettings(BaseSettings):
    """Which model, and where it comes from."""

    model_config = _config()

    model: str = Field(DEFAULT_MODEL, description="Local model directory, or a Hugging Face hub id to download.")
    download_dir: Optional[Path] = Field(None, description="Where hub downloads go (default: the hub cache).")
    offline: bool = Field(False, description="Never touch the network; the model must be local or cached. "
                          "HF_HUB_OFFLINE=1 has the same effect.")
    remote_url: Optional[str] = Field(None, description="Use a vLLM server instead of a local engine: its "
                                      "OpenAI-compatible base URL, e.g. http://gpu-box:8000/v1 (docs/scale-out.md). "
                                      "Only the tokenizer of --model is fetched here.")
    remote_api_key: Optional[SecretStr] = Field(None, description="API key of the --remote-url server "
                                                "(its --api-key).")
    remote_model: Optional[str] = Field(None, description="Model name on the --remote-url server "
                                        "(its --served-model-name). Default: the one it serves.")

    @field_validator("remote_url")
    @classmethod
    def _check_remote_url(cls, value: Optional[str]) -> Optional[str]:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL ending in /v1, e.g. http://gpu-box:8000/v1")
        return value


PROFILES = ("auto", "cpu", *TUTORIAL_LINES)  # --profile's allowed values


class EngineSettings(BaseSettings):
    """The card profile and vLLM engine overrides (vLLM's own names; unset = the profile decides)."""

    model_config = _config()

    profile: Literal[PROFILES] = Field(  # type: ignore[valid-type]  # its values are read at run time
        "auto", description="Engine profile: auto (chosen for the detected card), cpu, or one of the tutorial's "
        "command lines, flag for flag, for comparison: tutorial-a10, tutorial-a10-lean (its A10 tip), "
        "tutorial-a100 (as printed: CUDA graphs on), tutorial-a100-eager (graphs off, as its text says), "
        "tutorial-v100.")
    max_concurrent_chats: int = Field(16, ge=1, le=256, description="Answers generated at once; "
                                      "more wait in a queue and are told their position.")
    max_model_len: Optional[int] = Field(None, ge=256, le=131072, description="Context length in tokens "
                                         "(prompt + answer). Default: chosen from free memory.")
    dtype: Optional[Literal["auto", "bfloat16", "float16", "float32"]] = Field(
        None, description="Weight and activation dtype. Default: bfloat16 from sm80, float16 below.")
    gpu_memory_utilization: Optional[float] = Field(None, gt=0, le=1, description="Share of the card vLLM may "
                                                    "use. Default: just what the plan needs.")
    kv_cache_memory_bytes: Optional[int] = Field(None, ge=16 * 2**20, description="KV cache size in bytes. "
                                                 "Default: sized for the chats, from free memory.")
    enforce_eager: Optional[bool] = Field(None, description="Disable CUDA graphs and torch.compile "
                                          "(slower decode; faster start).")
    kv_cache_dtype: Optional[Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]] = Field(
        None, description="KV cache dtype. fp8 only where the card supports it (sm89+).")
    max_num_seqs: Optional[int] = Field(None, ge=1, le=1024, description="Sequences the engine batches at once. "
                                        "Default: --max-concurrent-chats.")
    quick_start: Literal["auto", "on", "off"] = Field(
        "auto", description="Answer first from an eager engine (no compile, no CUDA graphs) while the full-speed "
        "engine is built beside it, then switch to that one without cutting an answer. auto: on a GPU when CUDA "
        "graphs are on and both engines fit in free memory; on: also on the CPU (where it pays only when the "
        "planned engine compiles, --enforce-eager false); off: start the full-speed engine only.")
    engine_start_timeout: float = Field(600.0, gt=0, le=3600, description="Seconds to wait for the engine to "
                                        "load before reporting a failure.")
    max_restarts: int = Field(5, ge=0, le=100, description="Engine restarts after a crash before giving up "
                              "(a --remote-url server is reconnected to for as long as it takes).")


class ChatSettings(BaseSettings):
    """Chat defaults (from the model's generation_config) and limits."""

    model_config = _config()

    system_prompt: str = Field("", max_length=20000, description="Default system prompt for new chats.")
    temperature: float = Field(0.8, ge=_T.low, le=_T.high, description="Default sampling temperature "
                               "(default: the model's generation_config, 0.8 for ERNIE).")
    top_p: float = Field(0.8, ge=_P.low, le=_P.high, description="Default nucleus sampling top_p "
                         "(default: the model's generation_config, 0.8 for ERNIE).")
    max_tokens: int = Field(1024, ge=_N.low, le=_N.high, description="Default answer length limit in tokens.")
    max_message_chars: int = Field(200_000, ge=100, le=10_000_000, description="Longest message accepted, "
                                   "in characters; longer ones are refused with a message.")
    max_request_messages: int = Field(10_000, ge=2, le=1_000_000, description="Most messages one /v1 "
                                      "request may carry; more is refused with a 400 before any is read.")
    stream_interval_ms: int = Field(50, ge=0, le=1000, description="Batch streamed text for this long before "
                                    "sending it to the page (one send per token freezes the browser).")
    # Attached documents (issue 23). 20 MB holds a 300-page PDF with its pictures; the text the model reads is a
    # small part of it. The upload route refuses a larger body before reading it (app/guards/web.py).
    max_upload_mb: int = Field(20, ge=1, le=1024, description="Largest file (in MiB) that may be attached to a "
                               "message; a larger one is refused before it is read.")
    max_upload_files: int = Field(5, ge=1, le=50, description="Most files attached to one message.")
    # What uploads one tab, and one user over all their tabs, may hold on disk (issue 36, N7: 40 x 19 MiB went into
    # one tab in 8.5 s, 24 at once 1,329 MiB, kept until 10 min after the tab closed). Counted from the upload route
    # (app/guards/uploads.py), uploads still arriving included; a tab's uploads go when it closes.
    max_uploads_per_session: int = Field(50, ge=1, le=10_000, description="Most files one chat tab may upload "
                                         "(kept until the tab closes); more are refused with one line.")
    max_upload_mb_per_session: int = Field(200, ge=1, le=1_048_576, description="Most MiB one chat tab may "
                                           "upload (kept until the tab closes); more is refused with one line.")
    max_uploads_per_user: int = Field(100, ge=1, le=100_000, description="Most files one user may have uploaded "
                                      "in all their open tabs together; more are refused with one line.")
    max_upload_mb_per_user: int = Field(400, ge=1, le=1_048_576, description="Most MiB one user may have uploaded "
                                        "in all their open tabs together; more is refused with one line.")


class HistorySettings(BaseSettings):
    """Where chats are kept: SQLite in the user's data directory unless told otherwise."""

    model_config = _config()

    history: bool = Field(True, description="Keep chats (sidebar, resume, search, export). --no-history keeps "
                          "them in the browser tab only and writes nothing to disk.")
    data_dir: Optional[Path] = Field(None, description="Directory of the chat database chats.db "
                                     "(default: the user data directory, e.g. ~/.local/share/ernie-chat).")
    database_url: Optional[SecretStr] = Field(None, description="Another database instead of the SQLite file, "
                                              "e.g. postgresql+asyncpg://user:pass@host/db (several app "
                                              "instances can share it).")

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        if value is None or not value.get_secret_value().strip():
            return None
        url = value.get_secret_value().strip()
        if not url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must start with postgresql+asyncpg:// or sqlite+aiosqlite://")
        return SecretStr(url)


@dataclass(frozen=True)
class AppSettings:
    """All settings, one object per concern."""

    server: ServerSettings
    model: ModelSettings
    engine: EngineSettings
    chat: ChatSettings
    history: HistorySettings = field(default_factory=HistorySettings)


SETTINGS_CLASSES: dict[str, type[BaseSettings]] = {
    "server": ServerSettings,
    "model": ModelSettings,
    "engine": EngineSettings,
    "chat": ChatSettings,
    "history": HistorySettings,
}
