"""Where the model comes from: a local directory, or a hub id downloaded once (with a progress bar).

Offline mode (--offline or HF_HUB_OFFLINE=1) only looks in the local cache. Every failure becomes one
ModelNotFoundError line that says what to do.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from app.engine.end_of_turn import EndToken, answer_end_tokens
from app.engine.status import StartStep
from app.errors import ModelNotFoundError, one_line
from app.i18n import Phrase
from app.planning.engine_plan import ModelShape
from app.settings import ModelSettings
from app.token_count import without_word_cache

# Only what vLLM needs to serve the model; skips the PaddlePaddle weights the hub repo also carries.
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.jinja", "*.txt", "tokenizer*"]


def is_offline(settings: ModelSettings, env: Optional[Mapping[str, str]] = None) -> bool:
    found = os.environ if env is None else env
    return settings.offline or found.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


def check_model_setting(settings: ModelSettings) -> Optional[Path]:
    """The local model directory --model names (None for a hub id); one line when it cannot be a model.

    Called before the server starts, so a wrong path is one line and exit 2, not a started app that fails.
    """
    local = Path(settings.model).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ModelNotFoundError(f"invalid setting --model = {settings.model!r}: the directory has no "
                                     "config.json; point it at the folder with config.json and the .safetensors "
                                     "files, or at a hub id like baidu/ERNIE-4.5-0.3B-PT")
        refuse_paddle_weights(settings.model, local)
        return local.resolve()
    refuse_paddle_weights(settings.model)
    if settings.model.startswith((".", "/", "~")) or settings.model.count("/") != 1:
        raise ModelNotFoundError(f"invalid setting --model = {settings.model!r}: no such directory, and not a "
                                 "hub id like baidu/ERNIE-4.5-0.3B-PT")
    if _in_hub_cache(settings):
        return None
    if is_offline(settings):
        raise ModelNotFoundError(_offline_miss(settings.model))
    _require_hub(settings.model)
    return None


HUB_CHECK_SECONDS = 10.0


def _require_hub(model: str) -> None:
    """A model that must be downloaded: ask the hub for it now, so that an unreachable hub or a wrong id is one
    line before the server starts (it was the UI's address, two failures and three shutdown lines, then the
    error)."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(model, revision="main", timeout=HUB_CHECK_SECONDS)  # what the download fetches
    except GatedRepoError:
        return  # it exists; the download says what access it needs
    except RepositoryNotFoundError:
        raise ModelNotFoundError(f"invalid setting --model = {model!r}: the model hub ({constants.ENDPOINT}) has no "
                                 "such model; check the id, or pass --model /path/to/model") from None
    except Exception as err:  # noqa: BLE001 - no network, DNS, proxy, TLS, timeout: all one line here
        raise ModelNotFoundError(f"cannot reach the model hub at {constants.ENDPOINT} to download {model} "
                                 f"({one_line(err)}); check the network or HF_ENDPOINT (a mirror), or pass "
                                 "--model /path/to/model (--offline uses a copy already downloaded)") from None


def _in_hub_cache(settings: ModelSettings) -> bool:
    """Whether a download already left the model's config.json in the hub cache: one file looked up, not the
    whole cache scanned (this runs on every start with a hub id)."""
    from huggingface_hub import try_to_load_from_cache

    cache = str(settings.download_dir) if settings.download_dir else None
    found = try_to_load_from_cache(settings.model, "config.json", cache_dir=cache)
    return isinstance(found, str)


def model_files_here(settings: ModelSettings) -> Optional[Path]:
    """The folder holding the model's tokenizer files when they are on this machine already (a local --model, or
    an earlier download in the hub cache); None otherwise. Looks, never downloads (``--print-config`` uses it)."""
    local = Path(settings.model).expanduser()
    if local.is_dir():
        return local
    if settings.model.startswith((".", "/", "~")) or settings.model.count("/") != 1:
        return None
    from huggingface_hub import try_to_load_from_cache

    cache = str(settings.download_dir) if settings.download_dir else None
    found = try_to_load_from_cache(settings.model, "tokenizer_config.json", cache_dir=cache)
    return Path(found).parent if isinstance(found, str) else None


def _offline_miss(model: str) -> str:
    return (f"model {model} is not in the local cache and offline mode is on; download it once online "
            f"(python launch.py --model {model}), or pass --model /path/to/model")


def resolve_model(settings: ModelSettings, progress: Callable[[str], None] = lambda _: None,
                  patterns: Optional[list[str]] = None) -> str:
    """Return a local directory holding the model (or the files matching ``patterns``), downloading first."""
    local = check_model_setting(settings)
    if local is not None:
        return str(local)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    offline = is_offline(settings)
    progress(Phrase("detail_local_cache") if offline else Phrase("detail_downloading", model=settings.model))
    try:
        path = snapshot_download(settings.model, allow_patterns=patterns or ALLOW_PATTERNS, local_files_only=offline,
                                 cache_dir=str(settings.download_dir) if settings.download_dir else None,
                                 tqdm_class=reporting_bar(settings.model, progress))
    except LocalEntryNotFoundError:
        if offline:
            raise ModelNotFoundError(_offline_miss(settings.model)) from None
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


PT_REPO = "baidu/ERNIE-4.5-0.3B-PT"


def refuse_paddle_weights(model: str, local: Optional[Path] = None) -> None:
    """One line instead of a vLLM traceback for the ``-Paddle`` repos' PaddlePaddle checkpoints.

    Baidu publishes each ERNIE twice: ``-PT`` for PyTorch (what vLLM loads) and ``-Paddle`` for
    PaddlePaddle/FastDeploy. The names look alike; the Paddle files fail deep inside vLLM's loader.
    Known by the repo name, a ``*.pdparams`` file, or PaddleNLP's parameter names (``ernie.layers.N...``
    where the PyTorch checkpoint has ``model.layers.N...``).
    """
    paddle = model.rstrip("/").lower().endswith("-paddle")
    if local is not None and not paddle:
        paddle = any(local.glob("*.pdparams")) or any(
            name.startswith("ernie.") for file in local.glob("*.safetensors") for name in _tensor_names(file))
    if paddle:
        raise ModelNotFoundError(f"--model {model} holds PaddlePaddle weights (a -Paddle repo); vLLM needs the "
                                 f"PyTorch ones: use --model {PT_REPO}")


def _tensor_names(file: Path) -> list[str]:
    """The tensor names in a .safetensors header (8-byte length, then JSON), without reading the weights."""
    try:
        with open(file, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > 100_000_000:  # not a safetensors header; leave the file to vLLM's own checks
                return []
            return [name for name in json.loads(f.read(size)) if name != "__metadata__"]
    except (OSError, ValueError, struct.error):
        return []


def reporting_bar(model: str, progress: Callable[[str], None], every_s: float = 1.0) -> type:
    """huggingface_hub's progress bar class, also telling ``progress`` how far the download is.

    The terminal keeps hub's own bars; the UI's status panel and /readyz get "downloading MODEL: 120 / 721 MB (17%)"
    at most once per ``every_s``. Bars counting bytes report megabytes, others (files) plain counts.
    """
    from huggingface_hub.utils import tqdm as hub_tqdm

    class ReportingBar(hub_tqdm):
        last_report = 0.0
        saw_bytes = False  # hub >= 1.0 counts bytes; older hubs only count files: report what there is

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Our own tally and unit: a disabled tqdm (HF_HUB_DISABLE_PROGRESS_BARS) keeps neither.
            self.counted = float(kwargs.get("initial") or 0)
            self.report_unit = kwargs.get("unit", "it")
            ReportingBar.saw_bytes |= self.report_unit == "B"

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            self.counted += n or 0
            unit, total = self.report_unit, getattr(self, "total", None)
            if unit != "B" and ReportingBar.saw_bytes:
                return shown
            now = time.monotonic()
            if now - ReportingBar.last_report >= every_s or (total and self.counted >= total):
                ReportingBar.last_report = now
                progress(Phrase("detail_download_progress", model=model,
                                progress=describe_progress(self.counted, total, unit)))
            return shown

    return ReportingBar


def describe_progress(done: float, total: Optional[float], unit: str) -> str:
    if unit == "B":
        digits = 1 if (total or done) < 10e6 else 0
        text = f"{done / 1e6:.{digits}f} / {total / 1e6:.{digits}f} MB" if total else f"{done / 1e6:.{digits}f} MB"
    else:
        text = f"{done:.0f} / {total:.0f} {unit}" if total else f"{done:.0f} {unit}"
    return text + (f" ({100 * done / total:.0f}%)" if total else "")


def read_generation_defaults(path: str) -> dict[str, Any]:
    file = Path(path) / "generation_config.json"
    return json.loads(file.read_text()) if file.is_file() else {}


def model_shape(settings: ModelSettings) -> ModelShape:
    """The local model's shape when its config is here; else ERNIE-4.5-0.3B's (before the first download)."""
    config = Path(settings.model).expanduser() / "config.json"
    if not config.is_file():
        return ModelShape()
    try:
        return ModelShape.from_config(json.loads(config.read_text()))
    except (ValueError, KeyError, TypeError) as err:
        raise ModelNotFoundError(f"invalid setting --model = {settings.model!r}: its config.json is not a "
                                 f"language model's ({type(err).__name__}: {err}); point it at a Hugging Face "
                                 "model folder such as baidu/ERNIE-4.5-0.3B-PT's") from None


@dataclass
class ModelFiles:
    """Finds (or downloads) the model, then loads its tokenizer and generation defaults.

    ``provide`` is EngineHost's model-path provider: it returns once the model's files are here, and the
    tokenizer loads on a thread of its own while the engine starts (building ERNIE's fast tokenizer from its
    SentencePiece model takes seconds the engine start hides). ``wait_loaded`` is EngineHost's last step
    before "ready"; the chat UI and /v1 read ``tokenizer`` and ``generation_defaults`` only after it. With a
    remote engine only the tokenizer's files are fetched (the chat template and context fitting run here).
    """

    settings: ModelSettings
    patterns: Optional[list[str]] = None
    tokenizer: Any = None
    generation_defaults: dict[str, Any] = field(default_factory=dict)
    answer_end: tuple[EndToken, ...] = ()  # the tokens an answer ends at (app/engine/end_of_turn.py)
    _loading: Optional[concurrent.futures.Future] = None

    def provide(self, progress: Callable[..., None]) -> str:
        path = resolve_model(self.settings, progress, self.patterns)
        progress(Phrase("detail_tokenizer"), StartStep.TOKENIZER)
        self.generation_defaults = read_generation_defaults(path)
        loading: concurrent.futures.Future = concurrent.futures.Future()

        def load() -> None:
            try:
                # transformers is imported here, beside the engine's start, not before it: vLLM (which imports
                # transformers too) runs in the engine process (app/engine/engine_process.py), so no other thread
                # of this process imports the same packages now (two at once can deadlock on the import locks),
                # and the engine's build is asked for without waiting for these imports (4.4 s on an H200).
                from transformers import AutoTokenizer

                loading.set_result(without_word_cache(AutoTokenizer.from_pretrained(path)))
            except BaseException as err:  # handed to wait_loaded, which raises it on the start's path
                loading.set_exception(err)

        self._loading = loading
        threading.Thread(target=load, name="tokenizer-load", daemon=True).start()
        return path

    def wait_loaded(self) -> None:
        """Block until the tokenizer is loaded; raise what stopped it."""
        if self._loading is not None:
            self.tokenizer = self._loading.result()
            self.answer_end = answer_end_tokens(self.tokenizer, self.generation_defaults)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return tuple(end.token_id for end in self.answer_end)


def model_answer_end(model_dir: Optional[Path]) -> Optional[tuple[EndToken, ...]]:
    """The end tokens of a model whose files are here (for ``--print-config``); None when they are not yet."""
    if model_dir is None or not (model_dir / "tokenizer_config.json").is_file():
        return None
    from transformers import AutoTokenizer

    return answer_end_tokens(AutoTokenizer.from_pretrained(model_dir), read_generation_defaults(str(model_dir)))
