"""Where the model comes from: a local directory, or a hub id downloaded once (with a progress bar).

Offline mode (--offline or HF_HUB_OFFLINE=1) only looks in the local cache. Every failure becomes one
ModelNotFoundError line that says what to do.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Optional

from app.errors import ModelNotFoundError
from app.settings import ModelSettings

# Only what vLLM needs to serve the model; skips the PaddlePaddle weights the hub repo also carries.
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.jinja", "*.txt", "tokenizer*"]


def is_offline(settings: ModelSettings, env: Optional[dict[str, str]] = None) -> bool:
    env = os.environ if env is None else env
    return settings.offline or env.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


def resolve_model(settings: ModelSettings, progress: Callable[[str], None] = lambda _: None) -> str:
    """Return a local directory holding the model, downloading it first if needed."""
    local = Path(settings.model).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ModelNotFoundError(f"model directory {local} has no config.json; point --model at the folder "
                                     "with config.json and the .safetensors files")
        return str(local.resolve())
    if settings.model.startswith((".", "/", "~")) or settings.model.count("/") != 1:
        raise ModelNotFoundError(f"model {settings.model!r} is neither a directory nor a hub id like "
                                 "baidu/ERNIE-4.5-0.3B-PT")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError)

    offline = is_offline(settings)
    progress("looking in the local cache" if offline else f"downloading {settings.model} (first run only)")
    try:
        path = snapshot_download(settings.model, allow_patterns=ALLOW_PATTERNS, local_files_only=offline,
                                 cache_dir=str(settings.download_dir) if settings.download_dir else None)
    except LocalEntryNotFoundError:
        if offline:
            raise ModelNotFoundError(
                f"model {settings.model} is not in the local cache and offline mode is on; download it once "
                f"online (python launch.py --model {settings.model}), or pass --model /path/to/model") from None
        raise ModelNotFoundError(f"cannot download {settings.model}: the hub is unreachable; check the network "
                                 "or proxy (HTTPS_PROXY), set HF_ENDPOINT for a mirror, or pass --model "
                                 "/path/to/model") from None
    except (RepositoryNotFoundError, GatedRepoError) as err:
        raise ModelNotFoundError(f"hub has no model {settings.model!r} you can read ({type(err).__name__}); "
                                 "check the id, or log in with `hf auth login`") from None
    except OSError as err:
        raise ModelNotFoundError(f"cannot download {settings.model}: {err}; check the network, or pass --model "
                                 "/path/to/model") from None
    return path


def read_model_config(path: str) -> dict[str, Any]:
    return json.loads((Path(path) / "config.json").read_text())


def read_generation_defaults(path: str) -> dict[str, Any]:
    file = Path(path) / "generation_config.json"
    return json.loads(file.read_text()) if file.is_file() else {}
