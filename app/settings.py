"""Settings, one pydantic-settings class per concern.

Each field carries its bounds and a description; the CLI (app/cli.py) is generated from them, so a new
setting is one field here. Values come from, highest first: CLI flags, ``ERNIE_CHAT_*`` environment
variables, a ``.env`` file, the defaults below. Engine overrides keep vLLM's own names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "ERNIE_CHAT_"
DEFAULT_MODEL = "baidu/ERNIE-4.5-0.3B-PT"
PROFILE_NAMES = ("auto", "cpu", "tutorial-a10", "tutorial-a100", "tutorial-v100")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


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
    auth_token: Optional[SecretStr] = Field(None, description="Password for the UI login and Bearer token for "
                                            "/metrics. Required when --host is not loopback.")
    insecure_no_auth: bool = Field(False, description="Allow a non-loopback --host without --auth-token. "
                                   "Anyone who can reach the port can use the model.")
    log_file: Path = Field(Path("logs/llm.log"), description="Log file; 'Engine started.' is written here "
                           "when the model is ready.")

    @field_validator("root_path")
    @classmethod
    def _normalise_root_path(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not value.startswith("/"):
            raise ValueError("must start with '/', e.g. /chat")
        return value

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


class EngineSettings(BaseSettings):
    """The card profile and vLLM engine overrides (vLLM's own names; unset = the profile decides)."""

    model_config = _config()

    profile: Literal["auto", "cpu", "tutorial-a10", "tutorial-a100", "tutorial-v100"] = Field(
        "auto", description="Engine profile: auto (chosen for the detected card), cpu, or the tutorial's "
        "tutorial-a10 / tutorial-a100 / tutorial-v100 lines, for comparison.")
    max_concurrent_chats: int = Field(12, ge=1, le=256, description="Answers generated at once; "
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
    engine_start_timeout: float = Field(600.0, gt=0, le=3600, description="Seconds to wait for the engine to "
                                        "load before reporting a failure.")
    max_restarts: int = Field(5, ge=0, le=100, description="Engine restarts after a crash before giving up "
                              "(a --remote-url server is reconnected to for as long as it takes).")


class ChatSettings(BaseSettings):
    """Chat defaults (from the model's generation_config) and limits."""

    model_config = _config()

    system_prompt: str = Field("", max_length=20000, description="Default system prompt for new chats.")
    temperature: float = Field(0.8, ge=0.0, le=2.0, description="Default sampling temperature.")
    top_p: float = Field(0.8, gt=0.0, le=1.0, description="Default nucleus sampling top_p.")
    max_tokens: int = Field(1024, ge=1, le=32768, description="Default answer length limit in tokens.")
    max_message_chars: int = Field(200_000, ge=100, le=10_000_000, description="Longest message accepted, "
                                   "in characters; longer ones are refused with a message.")
    stream_interval_ms: int = Field(50, ge=0, le=1000, description="Batch streamed text for this long before "
                                    "sending it to the page (one send per token freezes the browser).")


class HistorySettings(BaseSettings):
    """Where chats are kept (issue 12): SQLite in the user's data directory unless told otherwise."""

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
