"""What EngineHost may ask of an engine, and what an engine hands back: no vLLM type crosses this line.

Two engines implement it: ``app/engine/vllm_engine.py`` (vLLM's AsyncLLM in this process) and
``app/engine/remote.py`` (a vLLM server's OpenAI API). EngineHost, the chat UI and /v1 see only ``Delta``s and
the errors below, so a machine that only talks to a remote server never imports vLLM, and a new engine is one module.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Optional, Protocol

from app.errors import EngineDied, RequestRefused  # noqa: F401  (what generate() may raise)
from app.planning.engine_plan import EnginePlan


@dataclass(frozen=True)
class Sampling:
    """How one answer is sampled. The chat UI and /v1 build it with ``conversation.answer_sampling``; each engine
    translates it (vLLM's SamplingParams, a vLLM server's completion fields)."""

    temperature: float
    top_p: float
    max_tokens: int  # the answer's budget: what the prompt left of the context, at most what was asked for
    seed: Optional[int] = None  # /v1's seed: the same seed and prompt give the same answer
    ignore_eos: bool = False  # write all max_tokens even past the answer's end (benchmarks, long-answer tests)
    # The answer ends at any of these: the chat template's end of a turn and eos (app/engine/end_of_turn.py).
    stop_token_ids: tuple[int, ...] = ()

    @property
    def ends_at(self) -> list[int]:
        """The token ids the engine stops at: none with ignore_eos (as vLLM itself then drops generation_config's
        eos ids), so a benchmark's answer writes all max_tokens."""
        return [] if self.ignore_eos else list(self.stop_token_ids)


@dataclass(frozen=True)
class Delta:
    """One streamed piece of an answer."""

    text: str
    new_tokens: int
    finished: bool = False
    finish_reason: Optional[str] = None


class Engine(Protocol):
    """An engine as EngineHost drives it. Every coroutine runs on the host's engine loop."""

    max_model_len: int  # the context (prompt + answer, in tokens) this engine really serves

    def generate(self, token_ids: list[int], sampling: Sampling, request_id: str) -> AsyncIterator[Delta]:
        """Stream the answer to a token-id prompt.

        Raises EngineDied when the engine is gone, RequestRefused when only this request is refused."""
        ...

    async def abort(self, request_id: str) -> None: ...

    async def check_health(self) -> None:
        """Raise when the engine cannot answer."""
        ...

    def dead_reason(self) -> Optional[str]:
        """None while the engine lives; why it died otherwise."""
        ...

    def unfinished_requests(self) -> int: ...

    def shutdown(self) -> None: ...


# Builds an engine for a model directory and a plan; runs on the engine loop (it may block for the load).
EngineFactory = Callable[[str, EnginePlan], Engine]
