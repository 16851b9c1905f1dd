"""The running app's parts in one object (``build_runtime``), handed to the server and the chat UI.

Chainlit loads its handler file itself (app/ui/chainlit_app.py), so that file finds the runtime through
``current_runtime()``; it is set once, at start-up, by ``server.create_app`` (never at import).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from app.engine.host import EngineHost, EngineHostOptions
from app.engine.protocol import EngineFactory
from app.engine.status import EngineState, EngineStatus
from app.model_source import ModelFiles
from app.planning.engine_plan import EnginePlan
from app.planning.hardware import GpuFaultWatch, GpuInfo, gpu_memory_used
from app.planning.profiles import with_smaller_kv
from app.settings import AppSettings
from app.telemetry import AppMetrics, LogTail


@dataclass
class GpuMemoryWatch:
    """GPU memory after load and the peak while generating (NVML), for the status panel and /metrics.

    ``follow`` samples several times a second while answers are being generated (a short answer's peak
    would fall between slow samples) and only now and then when idle.
    """

    read: Callable[[], Optional[int]]
    gpu: str = "0"  # the card's NVML index: the metrics' label
    after_load: Optional[int] = None
    peak: Optional[int] = None  # highest reading taken while an answer was being generated
    last: Optional[int] = None

    def sample(self, generating: bool = False) -> Optional[int]:
        used = self.read()
        if used is not None:
            self.last = used
            if generating:
                self.peak = max(self.peak or 0, used)
        return used

    async def follow(self, generating: Callable[[], bool], metrics: Optional[AppMetrics] = None,
                     busy_every_s: float = 0.2, idle_every_s: float = 5.0) -> None:
        last_sample = 0.0
        while True:
            busy = generating()
            if busy or time.monotonic() - last_sample >= idle_every_s:
                last_sample = time.monotonic()
                used = await asyncio.to_thread(self.sample, busy)
                if metrics is not None and used is not None:
                    metrics.gpu_memory_used.labels(gpu=self.gpu).set(used)
                    if self.peak is not None:
                        metrics.gpu_memory_peak.labels(gpu=self.gpu).set(self.peak)
            await asyncio.sleep(busy_every_s)


@dataclass
class Runtime:
    settings: AppSettings
    plan: EnginePlan
    host: EngineHost
    metrics: AppMetrics
    model: ModelFiles  # the tokenizer and generation defaults, loaded with the model
    gpu_memory: Optional[GpuMemoryWatch] = None
    history: Any = None  # app.history.HistoryStore when chats are kept (app/ui/chat_history.py); None with --no-history
    login: Any = None  # app.guards.identity.LoginPolicy: who may log in, decided at start (build_runtime)
    damaged_history: Optional[Path] = None  # where a damaged database was kept at start; told on the first page
    # True from the moment a signal (SIGINT, SIGTERM) asks the app to stop (app/serve.py): an answer cut off after
    # that was cut by the app, not stopped by its user (issue 36, N13).
    stopping: bool = False
    uploads: Any = None  # app.guards.uploads.UploadLedger: what each open chat tab has uploaded (issue 36, N7)
    # app.engine.engine_link.EngineProcess: where vLLM runs; None with a remote server (--remote-url) or an engine
    # built in this process (tests, benches)
    engine_process: Any = None

    @property
    def gpu(self) -> Optional[GpuInfo]:
        return self.plan.gpu

    @property
    def tokenizer(self) -> Any:
        return self.model.tokenizer

    @property
    def generation_defaults(self) -> dict[str, Any]:
        return self.model.generation_defaults

    def engine_metrics(self) -> bytes:
        """vLLM's Prometheus series: the engine process's, else this process's default registry (where an engine
        built here registers them; a remote server keeps its own)."""
        if self.engine_process is not None:
            return self.engine_process.metrics_text()
        from prometheus_client import REGISTRY, generate_latest

        return generate_latest(REGISTRY)

    @property
    def max_model_len(self) -> int:
        # What the running engine serves, not the first plan: a retry after an out-of-memory start halves
        # it, a remote server may serve less, and chats must be fitted to what the engine really accepts.
        return self.host.max_model_len


def build_runtime(settings: AppSettings, plan: EnginePlan, engine_factory: EngineFactory,
                  on_fatal: Callable[[str], None], launched_at: float, engine_process: Any = None) -> Runtime:
    """Wire the parts: model files -> engine host (with its watchers) -> runtime. Starts nothing here; the engine
    process (``engine_process``, already started at launch) only builds once the host asks it to."""
    from app.engine.remote import TOKENIZER_PATTERNS

    remote = plan.device == "remote"
    model = ModelFiles(settings.model, TOKENIZER_PATTERNS if remote else None)
    metrics = AppMetrics()
    host = EngineHost(EngineHostOptions(
        model_path_provider=model.provide, plan=plan, metrics=metrics, engine_factory=engine_factory,
        # A remote server restarts on its own schedule (a vLLM start takes a minute or
        # more): keep reconnecting, with the same capped backoff, instead of giving up.
        max_restarts=None if remote else settings.engine.max_restarts,
        start_timeout=settings.engine.engine_start_timeout,
        gpu_fault_check=GpuFaultWatch(plan.gpu) if plan.gpu else None,
        log_tail=None if remote else LogTail(settings.server.log_file.resolve()),
        on_fatal=on_fatal, launched_at=launched_at, before_ready=model.wait_loaded,
        plan_after_out_of_memory=with_smaller_kv,  # the planner's rule: half the KV cache, once
        prefill_sums=engine_process.prefill_sums if engine_process is not None else None))
    gpu = plan.gpu
    watch = GpuMemoryWatch(lambda: gpu_memory_used(gpu), gpu=str(gpu.index)) if gpu else None
    if watch:
        def note_after_load(status: EngineStatus) -> None:
            if status.state is EngineState.READY and watch.after_load is None:
                watch.after_load = watch.sample()

        host.add_listener(note_after_load)
    from app.guards.identity import LoginPolicy
    from app.guards.uploads import UploadLedger, UploadLimits

    return Runtime(settings=settings, plan=plan, host=host, metrics=metrics, model=model, gpu_memory=watch,
                   login=LoginPolicy.from_settings(settings),  # an unreadable users file: one line, nothing started
                   uploads=UploadLedger(UploadLimits.from_settings(settings.chat)), engine_process=engine_process)


_CURRENT: list[Runtime] = []


def set_current_runtime(runtime: Runtime) -> None:
    _CURRENT[:] = [runtime]


def current_runtime() -> Runtime:
    if not _CURRENT:
        raise RuntimeError("the ernie-chat runtime is not set: start the app with python launch.py")
    return _CURRENT[0]
