"""The tutorial's vLLM command lines, flag for flag, and what the measurements say about each flag.

The tutorial this project started from printed one `python -m vllm.entrypoints.api_server` line per card
(tests/data/tutorial-flags.md is its table; tests/integration/test_print_config.py compares every
profile's `--print-config --json` with it). `--profile tutorial-*` runs those lines in this app, so its
readers can compare them with `auto`. Every warning cites a run of that exact line (docs/benchmarks.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from app.hardware import SM_BF16, SM_FP8

# Every line also carries these.
_ONE_GPU = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1}
_A10 = {**_ONE_GPU, "max_model_len": 4096, "dtype": "bfloat16", "gpu_memory_utilization": 0.85, "enforce_eager": True}
_A100 = {**_ONE_GPU, "max_model_len": 8192, "dtype": "bfloat16", "gpu_memory_utilization": 0.9,
         "kv_cache_dtype": "fp8", "quantization": "fp8"}

TUTORIAL_LINES: dict[str, dict[str, Any]] = {
    "tutorial-a10": _A10,
    # The A10 line with the tutorial's tip ("frees 1.2 GB of the 21.5 GB it uses").
    "tutorial-a10-lean": {**_A10, "disable_custom_all_reduce": True, "max_num_batched_tokens": 1024},
    # As printed: no --enforce-eager on this line, so vLLM's default (CUDA graphs) applies.
    "tutorial-a100": _A100,
    # Its text says graphs were "turned off everywhere" for first-token jitter; the A100 line with that done.
    "tutorial-a100-eager": {**_A100, "enforce_eager": True},
    "tutorial-v100": {**_ONE_GPU, "max_model_len": 2048, "dtype": "float16", "gpu_memory_utilization": 0.75,
                      "enforce_eager": True},
}
TUTORIAL_CARDS = {"tutorial-a10": "A10", "tutorial-a10-lean": "A10 (with its tip)", "tutorial-a100": "A100",
                  "tutorial-a100-eager": "A100 (graphs off, as its text says)", "tutorial-v100": "V100"}



@dataclass(frozen=True)
class Measured:
    """One profile on the H200, interleaved with the others (bench/engine_bench.py; docs/benchmarks.md)."""

    decode_tps: str  # single-stream decode, one figure per pass
    chats12_tps: str  # 12 chats at once, aggregate
    gpu_gib: float  # NVML "used" after load, whole card


MEASURED_ON = "H200, docs/benchmarks.md, 2026-12-03"
AUTO_MEASURED: Optional[Measured] = None
MEASURED: dict[str, Measured] = {}


def tutorial_warnings(profile: str, sm: int) -> list[str]:
    """A warning on each flag of this line that a measurement of this very line contradicts."""
    args = TUTORIAL_LINES[profile]
    seen, auto = MEASURED.get(profile), AUTO_MEASURED
    warnings = []
    if args.get("dtype") == "bfloat16" and sm < SM_BF16:
        warnings.append(f"dtype=bfloat16 on sm{sm}: vLLM refuses to start (\"Bfloat16 is only supported on GPUs "
                        "with compute capability of at least 8.0\"); this line was written for an sm80+ card")
    if not (seen and auto):
        return warnings + [f"{profile} has not been measured against auto yet"]
    util = args["gpu_memory_utilization"]
    warnings.append(f"gpu_memory_utilization={util}: this line held {seen.gpu_gib:.1f} GiB of the H200 after load "
                    f"(auto: {auto.gpu_gib:.1f} GiB) for a model that needs ~1.4 GiB plus 18.4 KB/token of KV "
                    f"cache; vLLM refuses to start unless {util} of the card is free ({MEASURED_ON})")
    if args.get("enforce_eager"):
        warnings.append(f"enforce_eager=True: the tutorial assumed an MoE model that breaks CUDA graphs; "
                        f"ERNIE-4.5-0.3B is dense. This line decoded {seen.decode_tps} tok/s single-stream, "
                        f"auto (graphs on) {auto.decode_tps} ({MEASURED_ON})")
    if args.get("quantization") == "fp8" or args.get("kv_cache_dtype") == "fp8":
        where = ("" if sm >= SM_FP8 else f"; sm{sm} has no fp8 hardware, so there vLLM runs fp8 weights through "
                 "a weight-only kernel and an fp8 KV cache through another attention backend (not measured)")
        warnings.append(f"quantization=fp8, kv_cache_dtype=fp8: no gain for a 0.7 GB model: on the H200 (native "
                        f"fp8) this line gave {seen.decode_tps} tok/s single-stream and {seen.chats12_tps} for 12 "
                        f"chats, auto (bf16) {auto.decode_tps} and {auto.chats12_tps} ({MEASURED_ON}){where}")
    if args.get("max_num_batched_tokens"):
        base = MEASURED.get("tutorial-a10")
        held = f"{seen.gpu_gib:.1f} GiB" + (f" against the A10 line's {base.gpu_gib:.1f}" if base else "")
        warnings.append(f"the A10 tip (--disable-custom-all-reduce --max-num-batched-tokens 1024) frees nothing "
                        f"on one GPU: custom all-reduce only runs with tensor parallelism, and what a smaller "
                        f"batch frees, gpu_memory_utilization={util} hands to the KV cache; this line held {held} "
                        f"({MEASURED_ON})")
    return warnings
