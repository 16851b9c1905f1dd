"""The line an answer shows while the engine reads its prompt (prefill), before the first token: how many tokens,
how long so far, and the time left by the engine's measured rate (app/engine/prefill_rate.py). A long document on the
CPU meant 80-100 s with nothing on the page (issue 35 item 2). The answer's first words replace the line; Stop
turns it into the "stopped" line (app/ui/streamed_answer.py)."""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Optional

from app.i18n import t
from app.ui.background import spawn

SHOW_FROM_SECONDS = 1.0  # a prompt read faster than this needs no line: it would only flash before the answer
SHOW_UNMEASURED_FROM_TOKENS = 1024  # no rate measured yet (a remote engine): a prompt this long gets the line
TICK_SECONDS = 1.0  # the line's clock moves once a second


def worth_showing(tokens: int, rate: Optional[float]) -> bool:
    if rate is None:
        return tokens >= SHOW_UNMEASURED_FROM_TOKENS
    return tokens / rate >= SHOW_FROM_SECONDS


def reading_text(language: str, tokens: int, elapsed: float, rate: Optional[float]) -> str:
    """The line after ``elapsed`` seconds of reading ``tokens`` at ``rate`` tokens/s (None: not measured)."""
    if rate is None:
        text = t(language, "reading", tokens=tokens, elapsed=elapsed)
    else:
        estimate = tokens / rate
        if elapsed < estimate:
            text = t(language, "reading_left", tokens=tokens, elapsed=elapsed, left=max(estimate - elapsed, 1),
                     rate=rate)
        else:
            text = t(language, "reading_late", tokens=tokens, elapsed=elapsed, estimate=estimate)
    return "`" + text + "`"


class ReadingLine:
    """Shows the line through ``show`` from ``start()`` (the engine has the prompt) until ``stop()``."""

    def __init__(self, show: Callable[[str], Awaitable[None]], language: str, tokens: int,
                 rate: Optional[float]) -> None:
        self.show, self.language, self.tokens, self.rate = show, language, tokens, rate
        self.shown = False
        self._task: Optional[asyncio.Task] = None

    def start(self) -> None:
        if self._task is None and worth_showing(self.tokens, self.rate):
            self._task = spawn(self._tick(), name="reading-line")

    async def _tick(self) -> None:
        started = time.monotonic()
        while True:
            self.shown = True  # before the send: a stop during it must still replace what reached the page
            await self.show(reading_text(self.language, self.tokens, time.monotonic() - started, self.rate))
            await asyncio.sleep(TICK_SECONDS)

    async def stop(self) -> bool:
        """Stop the clock; whether the line was shown (then the answer's first words must replace it)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        return self.shown
