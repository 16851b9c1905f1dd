"""How fast the engine reads a prompt (prefill), as vLLM measures it: the rate behind the "reading" line of a long
prompt (issue 35 item 2: a long document on the CPU meant 80-100 s of silence before the first token).

vLLM's stat logger records, for each finished request, the prompt tokens it computed (cached ones left out:
``vllm:request_prefill_kv_computed_tokens``) and the time from scheduling it to its first token
(``vllm:request_prefill_time_seconds``), as histograms in prometheus_client's default registry (the engine runs in
this process, so its logger does too; ``/metrics`` serves the same series). Their sums give tokens per second over
every prompt read so far, weighted by size, so the long prompts that matter here dominate it. A remote engine
(``--remote-url``) records none here: no rate, and the line says only what it knows.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

PREFILL_TOKENS = "vllm:request_prefill_kv_computed_tokens"
PREFILL_SECONDS = "vllm:request_prefill_time_seconds"
# Below this many computed tokens the sums are the warm-up's few-token prompts, where the per-step cost hides the
# per-token one; the warm-up reads one prompt of this size (app/engine/warm_up.py), so the first chat has a rate.
MIN_MEASURED_TOKENS = 256


def registry_sums(registry: Any) -> tuple[float, float]:
    """Prompt tokens computed and seconds spent reading them, summed over every engine in ``registry``."""
    tokens = seconds = 0.0
    for family in registry.collect():
        if family.name not in (PREFILL_TOKENS, PREFILL_SECONDS):
            continue
        total = sum(sample.value for sample in family.samples if sample.name.endswith("_sum"))  # every engine
        if family.name == PREFILL_TOKENS:
            tokens += total
        else:
            seconds += total
    return tokens, seconds


class PrefillRate:
    """The engine's prompt-reading rate since ``start_measuring()``: called once an engine has paid its one-time
    costs (its first warm-up request took 1.85 s for 4 tokens on the CPU, a rate nothing like a document's), and
    again for each engine built later (a restart or the full-speed engine registers vLLM's series anew)."""

    def __init__(self, sums: Optional[Callable[[], Optional[tuple[float, float]]]] = None) -> None:
        """``sums``: the engine's (tokens, seconds) now, None when it cannot be asked; by default vLLM's series in
        this process's registry (an engine process answers for its own: app/engine/engine_link.py)."""
        if sums is None:
            from prometheus_client import REGISTRY

            sums = lambda: registry_sums(REGISTRY)  # noqa: E731
        self._sums = sums
        self._base: Optional[tuple[float, float]] = None

    def start_measuring(self) -> None:
        self._base = self._sums()

    def tokens_per_second(self) -> Optional[float]:
        """Prompt tokens read per second; None while too little has been measured (or nothing is, here)."""
        now = self._sums() if self._base is not None else None
        if self._base is None or now is None:
            return None
        tokens, seconds = now
        tokens, seconds = tokens - self._base[0], seconds - self._base[1]
        if tokens < MIN_MEASURED_TOKENS or seconds <= 0:
            return None
        return tokens / seconds
