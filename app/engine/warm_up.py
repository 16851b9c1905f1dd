"""The warm-up before "ready": one-time costs paid by the start, not by a user's first answer, and the engine's
prefill rate measured (app/engine/prefill_rate.py). A part of EngineHost (app/engine/host.py)."""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from app.engine.prefill_rate import MIN_MEASURED_TOKENS, PrefillRate
from app.engine.protocol import Delta, Sampling
from app.engine.slots import EngineSlot

# Batch sizes the warm-up runs besides one request: one of each class vLLM's Triton sampler compiles for.
WARMUP_BATCHES = (8, 16)


async def drain(stream: AsyncIterator[Delta]) -> None:
    async for _ in stream:
        pass


class EngineWarmUp:
    """EngineHost's warm-up of a freshly built engine."""

    # The host's state and request path (app/engine/host.py), as used here.
    prefill_rate: PrefillRate
    _raw_stream: Callable[..., AsyncIterator[Delta]]

    async def _warm_up(self, slot: EngineSlot) -> None:
        """Pay one-time costs before "ready" instead of in a user's first answer.

        The first request after start costs seconds (allocations, lazy init). On CUDA, vLLM also
        JIT-compiles a Triton top-p kernel the first time it samples a batch of 8 or more requests,
        once per batch-size class (Triton specialises on "divisible by 16"); on an H200 that added
        1.5 s to the first token of 12 concurrent chats. So: one request, then a batch of 8, then 16
        when the plan allows that many, all sampled the way chats are (temperature, top_p < 1, and no
        seed: a seeded warm-up left the unseeded path cold, and the first chat on the CPU waited 1.85 s
        for its first token where later ones took 0.014 s). A seeded request rides along in the first
        round for /v1 clients that send a seed. The CPU build has no Triton (vLLM samples with plain torch
        there): that first round is all it needs.
        """
        sampled = Sampling(temperature=0.8, top_p=0.8, max_tokens=2)
        plan = slot.plan
        most = plan.max_concurrent if plan.device != "cpu" else 1  # the app never sends more at once
        for batch in [1] + [n for n in WARMUP_BATCHES if n <= most]:
            rounds = [sampled] * batch + ([replace(sampled, seed=0)] if batch == 1 else [])
            await asyncio.gather(*(drain(self._raw_stream([1, 2, 3, 4], params,
                                                          f"warmup-{uuid.uuid4().hex[:8]}", slot))
                                   for params in rounds))
            if batch == 1:
                await self._calibrate_prefill(slot, replace(sampled, max_tokens=1))

    async def _calibrate_prefill(self, slot: EngineSlot, sampled: Sampling) -> None:
        """Read a prompt long enough for vLLM to measure how fast this engine reads (app/engine/prefill_rate.py), so the
        first long document gets a time estimate (issue 35 item 2). Twice: the first read of a prompt this long
        pays one-time costs too (on the CPU it measured 55 tokens/s where documents were then read at 155), and
        only the second is measured. Other tokens the second time, so the prefix cache does not serve it."""
        length = min(MIN_MEASURED_TOKENS, slot.engine.max_model_len // 2)
        for round_ in range(2):
            if round_ == 1:
                self.prefill_rate.start_measuring()
            prompt = [5 + round_ + i % 89 for i in range(length)]
            await drain(self._raw_stream(prompt, sampled, f"warmup-{uuid.uuid4().hex[:8]}", slot))
