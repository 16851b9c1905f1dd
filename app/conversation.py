"""Chat logic without Chainlit: clean input, fit the history into the context, clamp sampling values.

Pure functions, so the rules (never a silent cut, oldest turns dropped with a notice) are unit-tested
without a browser or an engine.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Optional

Message = dict[str, str]  # {"role": "user" | "assistant" | "system", "content": str}

# C0/C1 controls except tab and newline; they confuse the tokenizer and mean nothing in a chat.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class CleanText:
    text: str
    changed: bool


def clean_message(text: str) -> CleanText:
    """Drop control characters and lone surrogates (which cannot be encoded); keep everything else."""
    fixed = text.replace("\r\n", "\n").replace("\r", "\n")
    fixed = fixed.encode("utf-8", "replace").decode("utf-8") if _has_surrogates(fixed) else fixed
    fixed = _CONTROL.sub("", fixed)
    fixed = unicodedata.normalize("NFC", fixed)
    return CleanText(fixed, fixed != text.replace("\r\n", "\n"))


def _has_surrogates(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@dataclass(frozen=True)
class FittedPrompt:
    """What goes to the model: token ids, how many old messages were left out, the answer budget."""

    token_ids: list[int]
    dropped_messages: int
    max_tokens: int
    shortened: bool = False


class PromptTooLong(Exception):
    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"{tokens} tokens > {limit}")
        self.tokens, self.limit = tokens, limit


# Below this many answer tokens a reply is useless; refuse rather than answer in three words.
MIN_ANSWER_TOKENS = 16


def fit_to_context(system_prompt: str, history: list[Message], user_text: str, max_model_len: int,
                   max_tokens: int, encode: Callable[[list[Message]], list[int]]) -> FittedPrompt:
    """Render history + the new message with the chat template, dropping the oldest turns to fit.

    Raises PromptTooLong when the new message alone (with the system prompt) leaves no room to answer.
    """
    system = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    new = [{"role": "user", "content": user_text}]
    alone = encode(system + new)
    if len(alone) + MIN_ANSWER_TOKENS > max_model_len:
        raise PromptTooLong(len(alone), max_model_len - MIN_ANSWER_TOKENS)
    dropped = 0
    while True:
        kept = history[dropped:]
        ids = encode(system + kept + new)
        room = max_model_len - len(ids)
        if room >= max_tokens or not kept:
            break
        dropped += 2 if len(kept) >= 2 else 1  # a user turn and its answer leave together
    answer = min(max_tokens, room)
    if answer < min(MIN_ANSWER_TOKENS, max_tokens):
        raise PromptTooLong(len(ids), max_model_len - MIN_ANSWER_TOKENS)
    return FittedPrompt(ids, min(dropped, len(history)), answer, shortened=answer < max_tokens)


@dataclass(frozen=True)
class Bound:
    low: float
    high: float
    integer: bool = False


SAMPLING_BOUNDS = {
    "temperature": Bound(0.0, 2.0),
    "top_p": Bound(0.05, 1.0),
    "max_tokens": Bound(16, 32768, integer=True),
}


@dataclass
class SamplingChoice:
    values: dict[str, float] = field(default_factory=dict)
    corrections: list[tuple[str, object, Bound, float]] = field(default_factory=list)


def clamp_sampling(raw: dict[str, object], defaults: dict[str, float], max_tokens_cap: int) -> SamplingChoice:
    """Values from the settings panel, checked; an out-of-range or garbled value is replaced and reported."""
    choice = SamplingChoice()
    for name, bound in SAMPLING_BOUNDS.items():
        high = min(bound.high, max_tokens_cap) if name == "max_tokens" else bound.high
        value: object = raw.get(name, defaults[name])
        try:
            number = float(value)  # type: ignore[arg-type]
            if number != number:  # NaN
                raise ValueError
        except (TypeError, ValueError):
            number = float(defaults[name])
            choice.corrections.append((name, value, Bound(bound.low, high), number))
        else:
            clamped = min(max(number, bound.low), high)
            if clamped != number:
                choice.corrections.append((name, value, Bound(bound.low, high), clamped))
            number = clamped
        choice.values[name] = int(number) if bound.integer else number
    return choice


def stats_line_values(tokens: int, ttft: Optional[float], decode_seconds: float) -> dict[str, float]:
    tps = (tokens - 1) / decode_seconds if tokens > 1 and decode_seconds > 0 else 0.0
    return {"tokens": tokens, "ttft": ttft or 0.0, "tps": tps}
