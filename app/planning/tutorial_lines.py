"""The tutorial's vLLM command lines, flag for flag, and what the measurements say about each flag.

The tutorial this project started from printed one `python -m vllm.entrypoints.api_server` line per card
(tests/data/tutorial-flags.md is its table; tests/integration/test_print_config.py compares every
profile's `--print-config --json` with it). `--profile tutorial-*` runs those lines in this app, so its
readers can compare them with `auto`. Every warning cites a run of that exact line (docs/benchmarks.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.planning.hardware import SM_BF16, SM_FP8

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
    """One line on an H200 through bench/engine_bench.py, interleaved with auto (docs/benchmarks.md)."""

    run: str  # which run, where its table is
    decode_tps: str  # single-stream decode, one figure per pass ("" when that was not measured)
    chats12_tps: str  # 12 chats at once, aggregate, one figure per pass
    gpu_gib: float  # NVML "used" for the whole card after load
    differs: str = ""  # how the line that ran differed from this one; "" when it was this exact line

    def source(self) -> str:
        return f"H200, {self.run}: " + (f"measured {self.differs}" if self.differs else "this exact line")


RUN_2026_12_03 = "docs/benchmarks.md, the exact lines' run of 2026-12-03 (3 passes)"
AUTO_MEASURED = Measured(RUN_2026_12_03, "608 / 648 / 488", "2,685 / 2,318 / 2,121", 2.5)
MEASURED: dict[str, Measured] = {
    "tutorial-a10": Measured(RUN_2026_12_03, "115 / 132 / 100", "1,190 / 1,482 / 845", 119.6),
    "tutorial-a10-lean": Measured(RUN_2026_12_03, "119 / 74", "1,223 / 821", 119.6),
    "tutorial-a100": Measured(RUN_2026_12_03, "636 / 466 / 488", "5,218 / 6,120 / 4,119", 126.6),
    "tutorial-a100-eager": Measured(RUN_2026_12_03, "78 / 60 / 85", "692 / 606 / 904", 126.6),
    "tutorial-v100": Measured(RUN_2026_12_03, "120 / 115 / 106", "1,323 / 842 / 904", 105.6),
}


# 12 chats at once once auto's max_num_seqs gave 9-12 chats a full CUDA graph (one run, interleaved); the
# 2026-12-03 passes measured auto without it, at half its speed there.
CHATS12_RUN = "docs/benchmarks.md, many chats at once, 2026-12-04"
CHATS12_AFTER_FIX = {"auto": "6,035 / 4,875 / 6,275", "tutorial-a100": "4,688 / 4,475"}


def tutorial_warnings(profile: str, sm: int) -> list[str]:
    """A warning on each flag of this line that a measurement contradicts; each names the run it cites."""
    args, seen, auto = TUTORIAL_LINES[profile], MEASURED[profile], AUTO_MEASURED
    warnings = []
    if args.get("dtype") == "bfloat16" and sm < SM_BF16:
        warnings.append(f"dtype=bfloat16 on sm{sm}: vLLM refuses to start (its error: \"Bfloat16 is only supported "
                        "on GPUs with compute capability of at least 8.0\"); this line was written for an sm80+ card")
    util = args["gpu_memory_utilization"]
    warnings.append(f"gpu_memory_utilization={util}: held {seen.gpu_gib:.1f} GiB of an H200 after load (auto: "
                    f"{auto.gpu_gib:.1f} GiB) for a model that needs ~1.4 GiB plus 18.4 KB/token of KV cache, "
                    f"and vLLM refuses to start unless {util} of the card is free ({seen.source()})")
    if args.get("enforce_eager") and seen.decode_tps:
        warnings.append(f"enforce_eager=True: the tutorial assumed an MoE model that breaks CUDA graphs; "
                        f"ERNIE-4.5-0.3B is dense. Eager decoded {seen.decode_tps} tok/s single-stream, auto "
                        f"(graphs on) {auto.decode_tps} in the same passes ({seen.source()})")
    fp8 = args.get("quantization") == "fp8" or args.get("kv_cache_dtype") == "fp8"
    if fp8 and seen.decode_tps:
        chats = (f"12 chats {CHATS12_AFTER_FIX[profile]}, auto {CHATS12_AFTER_FIX['auto']} ({CHATS12_RUN})"
                 if profile in CHATS12_AFTER_FIX else f"12 chats {seen.chats12_tps} ({seen.source()})")
        warnings.append(f"quantization=fp8, kv_cache_dtype=fp8: the weights are rounded to fp8, so answers differ "
                        f"from the model's own bf16 ones; single-stream {seen.decode_tps} tok/s, auto (bf16) "
                        f"{auto.decode_tps} ({seen.source()}); {chats}")
    if fp8 and sm < SM_FP8:
        warnings.append(f"fp8 on sm{sm}: no fp8 hardware before sm{SM_FP8}; vLLM runs fp8 weights through a "
                        "weight-only kernel and an fp8 KV cache through another attention backend there "
                        "(not measured on such a card)")
    if args.get("max_num_batched_tokens"):
        warnings.append("the A10 tip (--disable-custom-all-reduce --max-num-batched-tokens 1024) cannot free "
                        "memory on one GPU: custom all-reduce only runs with tensor parallelism, and what a "
                        f"smaller batch frees, gpu_memory_utilization={util} hands to the KV cache; the share "
                        f"held {seen.gpu_gib:.1f} GiB ({seen.source()})")
    return warnings
