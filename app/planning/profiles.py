"""Card -> engine arguments: a pure function with a reason for every choice.

``plan_engine(engine_settings, gpus, build, ...)`` reads nothing and starts nothing; it is tested by tables
of simulated cards (tests/unit/planning/test_profiles.py). On a GPU it makes seven decisions, one function each
(dtype, CUDA graphs, KV dtype, answers at once, vLLM's batch, KV budget and context, memory share), each returning
its value and its reason. The numbers it uses were measured on an H200 with the real ERNIE-4.5-0.3B-PT shape
(docs/benchmarks.md): weights 0.73 GiB, activations 0.21, non-torch 0.22,
CUDA graphs 0.22; KV cache 18.4 KB per token.

``tutorial-*`` profiles run the tutorial's own command lines instead (app/planning/tutorial_lines.py).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional, TypeVar

from app.errors import InsufficientMemoryError, SettingsError, UnsupportedHardwareError
from app.planning.engine_plan import ONE_PROCESS_EXECUTOR, EnginePlan, ModelShape
from app.planning.hardware import (
    CUDA_WITHOUT_SM70,
    GIB,
    SM_BF16,
    SM_FP8,
    SM_VLLM_MINIMUM,
    SM_VOLTA,
    CpuFacts,
    GpuInfo,
    VllmBuild,
    gib,
)
from app.planning.tutorial_lines import TUTORIAL_CARDS, TUTORIAL_LINES, tutorial_warnings
from app.settings import EngineSettings, flag_name

T = TypeVar("T")
MIB = 1024**2


# Measured on an H200 (docs/benchmarks.md); the activation peak scales with the batch token budget,
# which we leave at vLLM's default.
ACTIVATION_BYTES = int(0.21 * GIB)
NON_TORCH_BYTES = int(0.22 * GIB)
CUDA_GRAPH_BYTES = int(0.22 * GIB)
SAFETY_BYTES = 256 * MIB  # allocator fragmentation and the sampler's buffers
# oneDNN's kernel cache on the CPU: enough for every decode shape (batch 1..12 x the layer shapes), small
# enough that ever-new prompt lengths cannot grow the worker's memory for long.
ONEDNN_CACHE_ENTRIES = 128
# Context lengths tried, longest first. A 0.3B chat model gains little past 32k, and every token of
# context the engine must be able to hold costs 18.4 KB of KV cache.
CONTEXT_TIERS = (32768, 16384, 8192, 4096, 2048)
MIN_CONTEXT = 2048
# A chat in progress rarely holds more than this many tokens; the KV budget lets every allowed chat
# hold this much at once, or one chat use the whole context.
TYPICAL_CHAT_TOKENS = 4096

SET_BY_YOU = "set by you"
# The engine overrides are the EngineSettings fields that default to None ("unset = the profile decides",
# the class's own rule): each keeps vLLM's name and, when given, wins over any profile.
ENGINE_OVERRIDES: tuple[str, ...] = tuple(
    name for name, info in EngineSettings.model_fields.items() if info.default is None)


def user_set(settings: EngineSettings) -> frozenset[str]:
    """The engine overrides the user gave (flag, ERNIE_CHAT_* variable or .env line)."""
    return frozenset(name for name in ENGINE_OVERRIDES
                     if name in settings.model_fields_set and getattr(settings, name) is not None)


@dataclass(frozen=True)
class Choice:
    """One decision of the plan: the value, why, and anything the user should know about it."""

    value: Any
    reason: str
    warnings: tuple[str, ...] = ()


def _given(value: Optional[T], name: str) -> T:
    """A setting the user gave (``name`` is in ``mine``, the fields set): its value. The command line cannot set
    None; a settings object built in code with an explicit None gets one line naming the flag."""
    if value is None:
        raise SettingsError(f"invalid setting {flag_name(name)} = None: give a value or leave it out")
    return value


def reserve_bytes(gpu: GpuInfo) -> int:
    """Free memory we leave alone: the desktop and other programs on a workstation card grow."""
    return max(512 * MIB, int(0.05 * gpu.total_bytes))


def _dtype_bytes(kv_cache_dtype: str) -> int:
    return 1 if kv_cache_dtype.startswith("fp8") else 2


def _fixed_bytes(shape: ModelShape, eager: bool, weight_bytes_per_param: int = 2) -> int:
    return (shape.weight_bytes(weight_bytes_per_param) + ACTIVATION_BYTES + NON_TORCH_BYTES
            + (0 if eager else CUDA_GRAPH_BYTES) + SAFETY_BYTES)


def _kv_tokens(context: int, chats: int) -> int:
    return max(context, chats * min(context, TYPICAL_CHAT_TOKENS))


def cuda12_fix(version: str) -> str:
    """The exact install that brings sm_70 code back: a CUDA 12.9 build of the same vLLM release."""
    v = version.split("+")[0] or "0.29.0"
    return (f"pip install 'vllm=={v}' --extra-index-url https://wheels.vllm.ai/{v}/cu129 "
            "--extra-index-url https://download.pytorch.org/whl/cu129")


def choose_gpu(gpus: Sequence[GpuInfo]) -> GpuInfo:
    """The visible card with the most free memory: a 0.7 GB model gains nothing from splitting."""
    return max(gpus, key=lambda g: (g.free_bytes, -g.index))


def plan_engine(settings: EngineSettings, gpus: Sequence[GpuInfo], build: VllmBuild,
                shape: ModelShape = ModelShape(), cpu: CpuFacts = CpuFacts()) -> EnginePlan:
    """Choose vLLM engine arguments for these cards and this vLLM build. Pure: raises, never prints."""
    if settings.profile.startswith("tutorial-"):
        if not gpus:
            raise SettingsError(f"invalid setting --profile = {settings.profile!r}: the tutorial profiles need "
                                "an NVIDIA card; without one use --profile auto or cpu")
        return _apply_overrides(plan_tutorial(settings.profile, gpus, build, settings), settings)
    if settings.profile == "cpu" or not gpus:
        if build.installed and build.device == "cuda" and not gpus:
            raise UnsupportedHardwareError(
                "no NVIDIA GPU found (NVML sees none) and the installed vLLM is the CUDA build; for CPU mode "
                "install the CPU build: pip install -r requirements-cpu.txt (in a fresh venv)")
        return _plan_cpu(settings, shape, cpu)
    return _plan_gpu(settings, gpus, build, shape)


def _plan_cpu(settings: EngineSettings, shape: ModelShape, cpu: CpuFacts) -> EnginePlan:
    mine = user_set(settings)
    args: dict[str, Any] = {}
    why: dict[str, str] = {}
    if "dtype" in mine:
        args["dtype"], why["dtype"] = settings.dtype, SET_BY_YOU
    elif cpu.has_bf16:
        args["dtype"], why["dtype"] = "bfloat16", "bfloat16: this CPU has AVX512-BF16/AMX"
    else:
        args["dtype"] = "float32"
        why["dtype"] = "float32: this CPU has no bf16 instructions, and vLLM's CPU fp16 path is limited"
    if "max_model_len" in mine:
        context, why["max_model_len"] = _given(settings.max_model_len, "max_model_len"), SET_BY_YOU
    else:
        context = min(8192, shape.max_position_embeddings)
        why["max_model_len"] = f"{context} tokens: prompt processing on a CPU is slow, longer chats wait long"
    args["max_model_len"] = context
    concurrent = _max_concurrent(settings, mine)
    why["max_concurrent"] = concurrent.reason
    seqs = _max_num_seqs(concurrent.value, settings, mine, graphs=False)
    args["max_num_seqs"], why["max_num_seqs"] = seqs.value, seqs.reason
    dtype_bytes = 4 if args["dtype"] == "float32" else 2
    if "kv_cache_memory_bytes" in mine:
        kv_bytes = _given(settings.kv_cache_memory_bytes, "kv_cache_memory_bytes")
    else:
        kv_bytes = max(64 * MIB, _kv_tokens(context, concurrent.value) * shape.kv_bytes_per_token(dtype_bytes))
    # Never ask for more than half of what is free: the OS and the browser live here too.
    if kv_bytes > cpu.available_bytes // 2:
        raise InsufficientMemoryError(
            f"KV cache of {gib(kv_bytes)} does not fit in half of the {gib(cpu.available_bytes)} of free "
            "RAM; lower --max-model-len or --max-concurrent-chats")
    args["kv_cache_memory_bytes"] = kv_bytes
    why["kv_cache_memory_bytes"] = (SET_BY_YOU if "kv_cache_memory_bytes" in mine else
                                    f"{gib(kv_bytes)}: {context} tokens for one chat or "
                                    f"{TYPICAL_CHAT_TOKENS} for each of {concurrent.value} at once, not a share "
                                    "of RAM")
    if "enforce_eager" in mine:
        args["enforce_eager"], why["enforce_eager"] = settings.enforce_eager, SET_BY_YOU
    else:
        args["enforce_eager"] = True
        why["enforce_eager"] = ("True on CPU: torch.compile builds C++ with gcc at every cold start (115 s vs 16 s "
                                "to start on 2 cores, measured here); CUDA graphs do not exist on a CPU")
    for name in ("gpu_memory_utilization", "kv_cache_dtype"):
        if name in mine:
            args[name], why[name] = getattr(settings, name), SET_BY_YOU
    args["distributed_executor_backend"] = ONE_PROCESS_EXECUTOR
    why["distributed_executor_backend"] = (
        f"{ONE_PROCESS_EXECUTOR}: the model runs inside vLLM's engine process, as on a GPU; vLLM's CPU default starts "
        "a third process that imports torch and vLLM once more (ready in 10.1-11.9 s instead of 15.2-16.3 s on "
        "2 cores, docs/benchmarks.md)")
    math_threads = max(1, cpu.cores - 1)
    env_defaults = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(ONEDNN_CACHE_ENTRIES), "OMP_NUM_THREADS": str(math_threads)}
    why["OMP_NUM_THREADS"] = (
        f"{math_threads} of {cpu.cores} cores for the engine's math, as vLLM's own CPU layout takes: one core stays "
        "for its scheduler and this app (math threads on every core stall each other whenever the app is busy)")
    why["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = (
        f"{ONEDNN_CACHE_ENTRIES}: oneDNN keeps a compiled kernel for every new matrix shape, up to 1024 by "
        "default, and each prompt length is a new shape, so vLLM's CPU worker grew ~19 MiB a minute in a "
        f"soak (+9% in 20 min); with {ONEDNN_CACHE_ENTRIES} it stayed flat (bench/soak.py, docs/benchmarks.md)")
    plan = EnginePlan(profile="cpu", device="cpu", gpu=None, engine_args=args, reasons=why,
                      max_concurrent=concurrent.value, warnings=concurrent.warnings,
                      env_defaults=env_defaults, user_set=mine,
                      planned_bytes=shape.weight_bytes(dtype_bytes) + kv_bytes)
    starter = _cpu_starter(settings, plan, cpu)
    why["quick_start"] = starter.reason
    return replace(plan, starter=starter.value)


# vLLM samples top-p/top-k with FlashInfer on a CUDA card by default, a kernel FlashInfer compiles on a machine's
# first launch and caches in ~/.cache/flashinfer: on an H100 both engines waited 80-100 s for that one build,
# so a new user's first answer came with full speed, after 124-154 s (issue 31). PyTorch's sampler needs no build.
STARTER_SAMPLER = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
STARTER_SAMPLER_REASON = ("0: the starting engine samples with PyTorch; FlashInfer's sampler is compiled on a "
                          "machine's first launch (80-100 s on an H100), which the full-speed engine does while "
                          "the starting one answers")


def _eager_twin(plan: EnginePlan, planned_bytes: int, share: Optional[float] = None) -> EnginePlan:
    """The plan's starting engine: the same model, context and KV cache, eager (nothing to compile or capture)."""
    # optimization_level 0 is vLLM's own "eager" level: no compile, no graphs, and no FlashInfer autotune, which
    # tunes kernels for a long-lived engine (12.0 s of a cold start of vLLM 0.29's starting engine on an H100).
    args = {**plan.engine_args, "enforce_eager": True, "optimization_level": 0}
    reasons = {**plan.reasons, "enforce_eager": "True: the starting engine answers while the full one is built",
               "optimization_level": "0: an engine that lives for seconds skips vLLM's kernel tuning (FlashInfer "
                                     "autotune: 12.0 s of a cold start on an H100)"}
    if share is not None:
        args["gpu_memory_utilization"] = share
        reasons["gpu_memory_utilization"] = f"{share}: just the starting engine's {gib(planned_bytes)}"
    return replace(plan, engine_args=args, reasons=reasons, planned_bytes=planned_bytes, starter=None)


def _gpu_starter(settings: EngineSettings, plan: EnginePlan, shape: ModelShape) -> Choice:
    """Serve first, speed up later: an eager engine starts in seconds (no torch.compile, no CUDA graph
    capture) and answers while the compiled one is built beside it; both hold the GPU during the overlap."""
    if settings.quick_start == "off":
        return Choice(None, f"off: {SET_BY_YOU}; the full-speed engine starts alone")
    if plan.engine_args.get("enforce_eager"):
        return Choice(None, "off: the engine is eager already, so there is nothing to build in the background")
    kv = plan.engine_args.get("kv_cache_memory_bytes")
    if not kv:
        return Choice(None, "off: with --gpu-memory-utilization vLLM sizes each engine's cache from a share of "
                            "the card, and two such shares do not fit")
    gpu = plan.gpu
    assert gpu is not None
    starter_bytes = _fixed_bytes(shape, eager=True) + kv
    usable = gpu.free_bytes - reserve_bytes(gpu)
    # vLLM's start-up check wants utilization x total free when the second engine starts: the starter's
    # bytes plus the full engine's share (rounded up by a point of the card).
    needed = starter_bytes + int(plan.engine_args["gpu_memory_utilization"] * gpu.total_bytes)
    both = f"{gib(starter_bytes)} + {gib(plan.planned_bytes)}"
    if needed > usable:
        return Choice(None, f"off: the starting and the full engine together need {both}, more than the "
                            f"{gib(usable)} usable; the full-speed engine starts alone")
    twin = _eager_twin(plan, starter_bytes, startup_share(starter_bytes, gpu.total_bytes))
    starter = replace(twin, core_env=dict(STARTER_SAMPLER),
                      reasons={**twin.reasons, **dict.fromkeys(STARTER_SAMPLER, STARTER_SAMPLER_REASON)})
    on = SET_BY_YOU if settings.quick_start == "on" else "auto"
    return Choice(starter, f"on ({on}): an eager engine answers within seconds while the compiled one (CUDA "
                           f"graphs) is built beside it and takes over when warm; both fit: {both} of "
                           f"{gib(usable)} usable")


def _cpu_starter(settings: EngineSettings, plan: EnginePlan, cpu: CpuFacts) -> Choice:
    if settings.quick_start != "on":
        return Choice(None, "off: the CPU engine is eager, it starts as fast as a starting engine would"
                      if plan.engine_args.get("enforce_eager") else
                      "off: two engines on a CPU share its cores; --quick-start on to answer while it compiles")
    if 2 * plan.planned_bytes > cpu.available_bytes // 2:
        raise InsufficientMemoryError(
            f"--quick-start on needs two engines of {gib(plan.planned_bytes)} at once, more than half of the "
            f"{gib(cpu.available_bytes)} of free RAM; use --quick-start off")
    gain = ("" if not plan.engine_args.get("enforce_eager") else
            "; the planned engine is eager too, so the switch gains nothing here but shows that it works")
    return Choice(_eager_twin(plan, plan.planned_bytes),
                  f"on ({SET_BY_YOU}): an eager engine answers while the planned one is built beside it{gain}")


def _plan_gpu(settings: EngineSettings, gpus: Sequence[GpuInfo], build: VllmBuild,
              shape: ModelShape) -> EnginePlan:
    mine = user_set(settings)
    gpu = choose_gpu(gpus)
    card = _card(gpu, gpus, build)
    dtype = _dtype(settings, gpu, mine)
    eager = _cuda_graphs(settings, mine)
    kv_dtype = _kv_dtype(settings, gpu)
    concurrent = _max_concurrent(settings, mine)
    seqs = _max_num_seqs(concurrent.value, settings, mine, graphs=not eager.value)
    kv_per_token = shape.kv_bytes_per_token(_dtype_bytes(kv_dtype.value))
    fixed = _fixed_bytes(shape, eager.value)
    context, kv = _kv_budget_and_context(settings, gpu, shape, fixed, kv_per_token, mine, concurrent.value)
    # No KV size in the plan: vLLM sizes it from the share you gave.
    given_share = _given(settings.gpu_memory_utilization, "gpu_memory_utilization") if not kv.value else 0.0
    planned = fixed + kv.value if kv.value else int(gpu.total_bytes * given_share)
    share = _memory_share(settings, gpu, planned, mine)

    args: dict[str, Any] = {"dtype": dtype.value, "enforce_eager": eager.value, "kv_cache_dtype": kv_dtype.value,
                            "max_num_seqs": seqs.value, "max_model_len": context.value}
    why = {"gpu": card.reason, "dtype": dtype.reason, "attention_backend": _attention_backend(gpu),
           "enforce_eager": eager.reason, "kv_cache_dtype": kv_dtype.reason, "max_concurrent": concurrent.reason,
           "max_num_seqs": seqs.reason, "max_model_len": context.reason}
    if kv.value:
        args["kv_cache_memory_bytes"] = kv.value
        why["kv_cache_memory_bytes"] = kv.reason
    args["gpu_memory_utilization"] = share.value
    why["gpu_memory_utilization"] = share.reason
    warnings = card.warnings + kv_dtype.warnings + share.warnings + concurrent.warnings
    plan = EnginePlan(profile="auto", device="cuda", gpu=gpu, engine_args=args, reasons=why,
                      max_concurrent=concurrent.value, warnings=warnings, env=card.value, planned_bytes=planned,
                      user_set=mine, kv_bytes_per_token=kv_per_token)
    starter = _gpu_starter(settings, plan, shape)
    why["quick_start"] = starter.reason
    return replace(plan, starter=starter.value)


def _card(gpu: GpuInfo, gpus: Sequence[GpuInfo], build: VllmBuild) -> Choice:
    """Which card, and whether this vLLM build can run on it; the value is the environment it needs."""
    if gpu.sm < SM_VOLTA:
        raise UnsupportedHardwareError(
            f"{gpu.name} (sm{gpu.sm}) is older than Volta (sm{SM_VOLTA}), which vLLM needs; use --profile cpu, "
            "or run vLLM on a newer card and use its OpenAI API (docs/scale-out.md)")
    if (gpu.sm == SM_VOLTA and build.installed and build.device == "cuda"
            and (build.cuda_major or 0) >= CUDA_WITHOUT_SM70):
        raise UnsupportedHardwareError(
            f"{gpu.name} is sm70 (Volta) and the installed vLLM {build.version} is built with CUDA "
            f"{build.torch_cuda}, which has no sm_70 code. Install a CUDA 12 build instead: "
            f"{cuda12_fix(build.version)}")
    warnings: tuple[str, ...] = ()
    if gpu.sm < SM_VLLM_MINIMUM:
        warnings = (f"sm{gpu.sm} is below vLLM's stated minimum (sm{SM_VLLM_MINIMUM}): runs with a CUDA 12 build "
                    "on a best-effort basis",)
    env: dict[str, str] = {}
    if len(gpus) > 1:
        reason = (f"GPU {gpu.index} ({gpu.name}): most free memory of {len(gpus)} visible; one card, no "
                  "tensor parallelism: a 0.7 GB model only loses speed to cross-GPU traffic")
        if gpu.index != 0:
            env["CUDA_VISIBLE_DEVICES"] = gpu.uuid or str(gpu.index)
    else:
        reason = f"GPU {gpu.index} ({gpu.name}), compute capability {gpu.sm / 10:.1f}"
    return Choice(env, reason, warnings)


def _dtype(settings: EngineSettings, gpu: GpuInfo, mine: frozenset[str]) -> Choice:
    """bf16 needs sm80 (vLLM refuses it below); the model was trained in bf16 and fp16 is fine for it."""
    if "dtype" in mine:
        if settings.dtype == "bfloat16" and gpu.sm < SM_BF16:
            raise SettingsError(f"invalid setting --dtype = 'bfloat16': {gpu.name} (sm{gpu.sm}) has no bf16; "
                                "allowed here: float16, float32, auto")
        return Choice(settings.dtype, SET_BY_YOU)
    if gpu.sm >= SM_BF16:
        return Choice("bfloat16", f"bfloat16: the model's own dtype, native on sm{gpu.sm}")
    return Choice("float16", f"float16: sm{gpu.sm} has no bf16 (it needs sm{SM_BF16}+)")


def _attention_backend(gpu: GpuInfo) -> str:
    """vLLM picks FlashAttention on sm80+ and its Triton/Flex fallback below; both are right for this model,
    so we never force one (forcing one is how fp8 set-ups break on older cards)."""
    if gpu.sm >= SM_BF16:
        return f"left to vLLM: FlashAttention on sm{SM_BF16}+"
    return f"left to vLLM: FlashAttention needs sm{SM_BF16}, vLLM falls back by itself on sm{gpu.sm}"


def _cuda_graphs(settings: EngineSettings, mine: frozenset[str]) -> Choice:
    """CUDA graphs + torch.compile: 4.5x faster single-stream decode than eager on an H200."""
    if settings.enforce_eager:
        return Choice(True, f"{SET_BY_YOU} (CUDA graphs off: measured 4.5x slower decode)")
    if "enforce_eager" in mine:
        return Choice(False, SET_BY_YOU)
    return Choice(False, "False: CUDA graphs and torch.compile on; the model is dense (not MoE), graphs "
                         "work and forcing eager cost 4.5x decode speed on an H200")


def _kv_dtype(settings: EngineSettings, gpu: GpuInfo) -> Choice:
    """fp16/bf16 KV: fp8 saves nothing measurable for one user of a 0.7 GB model, and cards without fp8
    (below sm89) switch attention backends or fail."""
    asked = settings.kv_cache_dtype
    if not asked or asked == "auto":
        return Choice("auto", "auto (model dtype): fp8 KV buys nothing measurable for one user of a 0.7 GB model")
    if gpu.sm >= SM_FP8:
        return Choice(asked, f"{asked}: asked for, and sm{gpu.sm} supports fp8")
    return Choice("auto", f"auto: fp8 asked for but sm{gpu.sm} lacks it",
                  (f"--kv-cache-dtype {asked} ignored: sm{gpu.sm} has no fp8 (needs sm{SM_FP8}+); "
                   "using the model dtype",))


# engine_bench on an H200 (docs/benchmarks.md), aggregate decode of 12 concurrent chats
GRAPH_BATCH_MEASURED = "12 chats on an H200: 2,137-2,742 tok/s at max_num_seqs 12, 3,650-6,275 at 16"


def decode_graph_batch(chats: int) -> int:
    """The smallest batch vLLM captures a CUDA graph for that holds ``chats`` decodes: 1, 2, 4, then steps of 8
    up to 256, then steps of 16 (vLLM's default capture sizes, 0.26-0.29)."""
    if chats <= 4:
        return 1 if chats <= 1 else 2 if chats == 2 else 4
    step = 8 if chats <= 256 else 16
    return -(-chats // step) * step


def _max_concurrent(settings: EngineSettings, mine: frozenset[str]) -> Choice:
    """Answers generated at once: the fair queue, the warm-up and max_num_seqs all read this one number."""
    chats = settings.max_concurrent_chats
    how = SET_BY_YOU if "max_concurrent_chats" in settings.model_fields_set else "the default"
    warnings: tuple[str, ...] = ()
    if "max_num_seqs" in mine and _given(settings.max_num_seqs, "max_num_seqs") < chats:
        warnings = (f"--max-num-seqs {settings.max_num_seqs} is below --max-concurrent-chats {chats}: the app lets "
                    f"{chats} answers through at once and vLLM runs {settings.max_num_seqs} of them, the rest wait "
                    "inside vLLM where the queue cannot tell them their place; raise --max-num-seqs or lower "
                    "--max-concurrent-chats",)
    return Choice(chats, f"{chats} (--max-concurrent-chats, {how}): answers generated at once; more wait in the "
                         "app's fair queue, each user in turn, told their place; vLLM's max_num_seqs is sized from "
                         "it, and a GPU's warm-up batches no more than it", warnings)


def _max_num_seqs(chats: int, settings: EngineSettings, mine: frozenset[str], graphs: bool) -> Choice:
    """vLLM's batch: the plan's answers at once (``chats``), rounded up to a full CUDA graph's batch size."""
    if "max_num_seqs" in mine:
        return Choice(settings.max_num_seqs, SET_BY_YOU)
    seqs = decode_graph_batch(chats) if graphs else chats
    if seqs == chats:
        return Choice(seqs, f"{seqs} = max_concurrent: the app never sends more at once"
                      + (", and a batch size vLLM captures a full CUDA graph for" if graphs else ""))
    # vLLM captures its full decode graphs only for batch sizes up to max_num_seqs: with 12, a batch of 9-12
    # chats had no full graph to pad to (the next is 16) and ran on piecewise graphs at half the speed.
    return Choice(seqs, f"{seqs}: max_concurrent ({chats}) rounded up to a batch size vLLM captures a full "
                        f"CUDA graph for; it captures those only up to max_num_seqs, so at {chats} the decode of "
                        f"{chats} chats fell back to piecewise graphs ({GRAPH_BATCH_MEASURED})")


def _kv_budget_and_context(settings: EngineSettings, gpu: GpuInfo, shape: ModelShape, fixed: int,
                           kv_per_token: int, mine: frozenset[str], chats: int) -> tuple[Choice, Choice]:
    """(max_model_len, kv_cache_memory_bytes), sized from FREE memory (another process may hold the card),
    never from a share of the total. A kv value of 0 leaves the cache to vLLM (the user set a share)."""
    usable = gpu.free_bytes - reserve_bytes(gpu)
    longest = min(shape.max_position_embeddings, CONTEXT_TIERS[0])
    minimum = fixed + MIN_CONTEXT * kv_per_token
    if usable < minimum:
        raise InsufficientMemoryError(
            f"GPU {gpu.index} ({gpu.name}) has {gib(gpu.free_bytes)} free; the model needs at least "
            f"{gib(minimum + reserve_bytes(gpu))} (weights, runtime, {MIN_CONTEXT} tokens of KV cache and "
            f"{gib(reserve_bytes(gpu))} left for other programs). Close what nvidia-smi shows on that card, "
            "or use --profile cpu")
    if "kv_cache_memory_bytes" in mine:
        kv_bytes = _given(settings.kv_cache_memory_bytes, "kv_cache_memory_bytes")
        if fixed + kv_bytes > usable:
            raise InsufficientMemoryError(
                f"--kv-cache-memory-bytes {kv_bytes} ({gib(kv_bytes)}) plus the model "
                f"({gib(fixed)}) exceeds the {gib(usable)} usable on GPU {gpu.index}; "
                f"at most {max(0, usable - fixed)} fits")
        if "max_model_len" in mine:
            return _user_context(settings, shape), Choice(kv_bytes, SET_BY_YOU)
        tokens = _largest_context(kv_bytes // kv_per_token, longest)
        return Choice(tokens, f"{tokens}: the longest tier the KV cache you set can hold"), Choice(kv_bytes, SET_BY_YOU)
    if "gpu_memory_utilization" in mine:  # vLLM sizes the cache from the share the user chose
        context = _user_context(settings, shape) if "max_model_len" in mine else Choice(longest, f"{longest}")
        return context, Choice(0, "")
    if "max_model_len" in mine:
        context = _user_context(settings, shape)
        kv_bytes = _kv_tokens(context.value, chats) * kv_per_token
        if fixed + kv_bytes > usable:
            fits = (usable - fixed) // kv_per_token
            raise InsufficientMemoryError(
                f"--max-model-len {context.value} with {chats} chats needs {gib(fixed + kv_bytes)} on GPU "
                f"{gpu.index}, {gib(usable)} is usable; at most {fits} tokens of KV cache fit")
    else:
        tiers = [c for c in CONTEXT_TIERS if c <= longest]
        tokens = next((c for c in tiers if fixed + _kv_tokens(c, chats) * kv_per_token <= usable), 0)
        if tokens:
            kv_bytes = _kv_tokens(tokens, chats) * kv_per_token
        else:
            # A crowded card: the longest context that fits alone; the chats share what is left
            # (paged attention gives each chat only the blocks it uses).
            tokens = next((c for c in tiers if fixed + c * kv_per_token <= usable), MIN_CONTEXT)
            kv_bytes = usable - fixed
        context = Choice(tokens, f"{tokens} tokens: the longest of {list(CONTEXT_TIERS)} whose KV cache fits "
                                 f"the {gib(usable)} usable of {gib(gpu.free_bytes)} free")
    kv = Choice(kv_bytes, f"{gib(kv_bytes)} at {kv_per_token / 1000:.1f} KB/token: one chat at the full "
                          f"{context.value} tokens, or {chats} chats of {min(context.value, TYPICAL_CHAT_TOKENS)} "
                          "tokens at once; not 85-90% of the card (the tutorial's 0.9 takes ~127 GiB of an H200)")
    return context, kv


def _user_context(settings: EngineSettings, shape: ModelShape) -> Choice:
    context = _given(settings.max_model_len, "max_model_len")
    if context > shape.max_position_embeddings:
        raise SettingsError(f"invalid setting --max-model-len = {context}: the model supports at "
                            f"most {shape.max_position_embeddings}")
    return Choice(context, SET_BY_YOU)


def _memory_share(settings: EngineSettings, gpu: GpuInfo, planned: int, mine: frozenset[str]) -> Choice:
    """gpu_memory_utilization: vLLM refuses to start unless free >= utilization x total, even with
    kv_cache_memory_bytes set; so ask for exactly the plan, rounded up, and leave the rest of the card alone."""
    if "gpu_memory_utilization" in mine:
        share = _given(settings.gpu_memory_utilization, "gpu_memory_utilization")
        warnings: tuple[str, ...] = ()
        if share * gpu.total_bytes > gpu.free_bytes:
            warnings = (f"--gpu-memory-utilization {share} asks for {gib(int(share * gpu.total_bytes))} but "
                        f"only {gib(gpu.free_bytes)} is free: vLLM will refuse to start",)
        return Choice(share, SET_BY_YOU, warnings)
    share = startup_share(planned, gpu.total_bytes)
    return Choice(share, f"{share}: just the planned {gib(planned)}, so vLLM's start-up check "
                         "(free >= utilization x total) passes on a card others share")


def startup_share(planned: int, total: int) -> float:
    """The gpu_memory_utilization that covers the planned bytes, rounded up by a point (at most 0.95)."""
    return min(0.95, math.ceil((planned / total) * 100 + 1) / 100)


def _largest_context(tokens: int, longest: int) -> int:
    return next((c for c in CONTEXT_TIERS if c <= min(tokens, longest)), max(256, min(tokens, longest)))


def plan_tutorial(profile: str, gpus: Sequence[GpuInfo], build: VllmBuild,
                  settings: EngineSettings) -> EnginePlan:
    """The tutorial's exact flags (app/planning/tutorial_lines.py), with a warning on each one its measurement
    contradicts."""
    gpu = choose_gpu(gpus)
    args = dict(TUTORIAL_LINES[profile])
    reasons = {k: f"the tutorial's {TUTORIAL_CARDS[profile]} line" for k in args}
    warnings = tutorial_warnings(profile, gpu.sm)
    if gpu.sm == SM_VOLTA and (build.cuda_major or 0) >= CUDA_WITHOUT_SM70:
        warnings.append(f"vLLM {build.version} is a CUDA {build.torch_cuda} build: no sm_70 code, it cannot run "
                        f"on {gpu.name}. Fix: {cuda12_fix(build.version)}")
    planned = int(gpu.total_bytes * args["gpu_memory_utilization"])
    concurrent = _max_concurrent(settings, user_set(settings))
    reasons["max_concurrent"] = concurrent.reason
    return EnginePlan(profile=profile, device="cuda", gpu=gpu, engine_args=args, reasons=reasons,
                      max_concurrent=concurrent.value, warnings=tuple(warnings) + concurrent.warnings,
                      planned_bytes=planned)


def plan_remote(settings: EngineSettings, url: str) -> EnginePlan:
    """No local engine: a vLLM server at ``url`` answers. Nothing about this machine's card matters."""
    # Not vLLM arguments (nothing starts here); the same shape so --print-config and /readyz read alike.
    args: dict[str, Any] = {"remote_url": url}
    chats = settings.max_concurrent_chats
    reasons = {"max_concurrent": f"{chats} (--max-concurrent-chats): answers this app asks the server for at once; "
                                 "more wait in the app's fair queue, told their place; the server batches them with "
                                 "other clients'",
               "remote_url": "the engine is a vLLM server there (--remote-url); this machine needs no card"}
    if settings.max_model_len is not None:
        args["max_model_len"] = settings.max_model_len
        reasons["max_model_len"] = "set by you (no larger than the server's)"
    else:
        reasons["max_model_len"] = "the server's, read from its /v1/models at start"
    return EnginePlan(profile="remote", device="remote", gpu=None, engine_args=args, reasons=reasons,
                      max_concurrent=chats)


def _apply_overrides(plan: EnginePlan, settings: EngineSettings) -> EnginePlan:
    """Flags the user typed win over a tutorial line."""
    mine = user_set(settings)
    args = {**plan.engine_args, **{name: getattr(settings, name) for name in mine}}
    reasons = {**plan.reasons, **{name: SET_BY_YOU for name in mine}}
    return replace(plan, engine_args=args, reasons=reasons, user_set=mine)


def with_smaller_kv(plan: EnginePlan, factor: float = 0.5) -> Optional[EnginePlan]:
    """The same plan with a smaller KV cache, for one retry after an out-of-memory start; None if minimal."""
    kv = plan.engine_args.get("kv_cache_memory_bytes")
    context = plan.engine_args.get("max_model_len", MIN_CONTEXT)
    if not kv or plan.device != "cuda":
        return None
    per_token = plan.kv_bytes_per_token or max(1, kv // context)  # unknown: at most one full context's share
    smaller = int(kv * factor)
    new_context = context
    while new_context > MIN_CONTEXT and new_context * per_token > smaller:
        new_context //= 2
    if new_context * per_token > smaller:
        return None
    args = {**plan.engine_args, "kv_cache_memory_bytes": smaller, "max_model_len": new_context}
    reasons = {**plan.reasons, "kv_cache_memory_bytes": f"{gib(smaller)}: halved after an out-of-memory start",
               "max_model_len": f"{new_context}: fits the halved KV cache"}
    planned = plan.planned_bytes - (kv - smaller)
    if plan.gpu and "gpu_memory_utilization" in args and "gpu_memory_utilization" not in plan.user_set:
        # vLLM's start-up check asks for utilization x total free: the share must shrink with the plan, or
        # a start refused for too little free memory is refused again.
        args["gpu_memory_utilization"] = startup_share(planned, plan.gpu.total_bytes)
        reasons["gpu_memory_utilization"] = f"{args['gpu_memory_utilization']}: the halved plan's share"
    return replace(plan, engine_args=args, reasons=reasons, planned_bytes=planned)


__all__ = ["CpuFacts", "plan_engine", "plan_tutorial", "with_smaller_kv", "TUTORIAL_LINES", "cuda12_fix"]
