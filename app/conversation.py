"""Chat rules without Chainlit: clean input, defaults, sampling bounds, the prompt from the chat's messages.

The chat UI and /v1 both build every prompt here, so they follow the same rules (never a silent cut, oldest
turns dropped with a notice, the model's own sampling defaults), unit-tested without a browser or an engine.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from app.control_characters import CONTROLS_IN_TEXT as _CONTROL
from app.engine.protocol import Sampling
from app.errors import PromptTooLongError
from app.settings import ANSWERS, ANSWERS_AT_ONCE, SAMPLING_BOUNDS, Bound, ChatSettings
from app.token_count import count_with

Message = dict[str, str]  # {"role": "user" | "assistant" | "system", "content": str}


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


class ChatTemplate:
    """The model's chat template and tokenizer, as the prompt rules use them."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def encode(self, messages: list[Message]) -> list[int]:
        """The prompt's token ids: the messages rendered with the model's own template, ready to answer.

        When the last message is the assistant's, it is an answer cut off at its length limit and the prompt ends
        with its text (no end of turn, no new assistant turn): the model writes on where it stopped."""
        continuing = bool(messages) and messages[-1]["role"] == "assistant"
        ids = self._tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=not continuing,
                                                  continue_final_message=continuing)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)

    def count(self, texts: list[str]) -> list[int]:
        """Tokens of each text alone, in one batch call (linear in the total length)."""
        if not texts:
            return []
        backend = getattr(self._tokenizer, "backend_tokenizer", None)
        if backend is not None:  # a fast tokenizer: skip transformers' per-text wrapping (a third of the time)
            return count_with(backend, texts)
        return [len(ids) for ids in self._tokenizer(texts, add_special_tokens=False)["input_ids"]]


# Below this many answer tokens a reply is useless; refuse rather than answer in three words.
MIN_ANSWER_TOKENS = int(SAMPLING_BOUNDS["max_tokens"].low)


def fit_to_context(system_prompt: str, history: list[Message], user_text: str, max_model_len: int,
                   max_tokens: int, template: ChatTemplate, answer_so_far: str = "") -> FittedPrompt:
    """Render history + the new message with the chat template, leaving out the oldest turns to fit.

    ``answer_so_far``: the answer to ``user_text`` that stopped at its length limit, to be continued (the
    prompt ends with it; see ``ChatTemplate.encode``).

    Bounded by the context, not by the chat: messages are counted from the newest back, each tokenized once,
    until the context is spent (older ones are never tokenized), and the template renders only what is kept
    (a request of 1,000 turns once took 8.7 s when each attempt re-rendered everything). Oldest turns leave
    in pairs (a question and its answer together).
    Raises PromptTooLongError when the new message alone (with the system prompt) leaves no room to answer.
    """
    system = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    new = [{"role": "user", "content": user_text}]
    if answer_so_far:
        new.append({"role": "assistant", "content": answer_so_far})
    alone = template.encode(system + new)
    if len(alone) + MIN_ANSWER_TOKENS > max_model_len:
        raise PromptTooLongError(len(alone), max_model_len - MIN_ANSWER_TOKENS)
    if not history:
        return _answer_budget(alone, 0, max_model_len, max_tokens)
    # What a message costs beyond its text (role markers, separators), read off a real render of the
    # newest turn: a small render, and the same template and roles as the rest of the chat.
    last = history[-2:]
    with_last = template.encode(system + last + new)
    per_message = max(0, (len(with_last) - len(alone) - sum(template.count([m["content"] for m in last])))
                      // len(last))
    budget = max_model_len - max_tokens - len(alone)
    suffix = _suffix_costs(history, template, per_message, budget)
    dropped = _fewest_to_drop(len(history), lambda d: (cost := suffix[d]) is not None and cost <= budget)
    while True:
        ids = template.encode(system + history[dropped:] + new)
        room = max_model_len - len(ids)
        if room >= max_tokens or dropped >= len(history):
            break
        # The estimate was short by (max_tokens - room): leave out at least that much more.
        dropped = _fewest_to_drop(len(history), _drops_at_least(suffix, dropped, max_tokens - room))
    return _answer_budget(ids, dropped, max_model_len, max_tokens)


def _answer_budget(ids: list[int], dropped: int, max_model_len: int, max_tokens: int) -> FittedPrompt:
    answer = min(max_tokens, max_model_len - len(ids))
    if answer < min(MIN_ANSWER_TOKENS, max_tokens):
        raise PromptTooLongError(len(ids), max_model_len - MIN_ANSWER_TOKENS)
    return FittedPrompt(ids, dropped, answer, shortened=answer < max_tokens)


def _suffix_costs(history: list[Message], template: ChatTemplate, per_message: int,
                  enough: int) -> list[Optional[int]]:
    """suffix[i]: the estimated tokens of history[i:], counted from the newest message back in growing
    batches until more than ``enough``; older entries stay None (those messages cannot fit)."""
    suffix: list[Optional[int]] = [None] * (len(history) + 1)
    suffix[-1] = 0
    end, batch = len(history), 32
    while end > 0 and suffix[end] <= enough:  # type: ignore[operator]
        start = max(0, end - batch)
        counts = template.count([m["content"] for m in history[start:end]])
        for i in range(end - 1, start - 1, -1):
            suffix[i] = suffix[i + 1] + counts[i - start] + per_message  # type: ignore[operator]
        end, batch = start, batch * 2
    return suffix


def _drops_at_least(suffix: list[Optional[int]], start: int, short: int) -> Callable[[int], bool]:
    """Whether leaving out the oldest ``d`` messages frees ``short`` more tokens than leaving out ``start``: every
    count from ``start`` on is known (``start`` already fitted the estimate), older ones are not needed."""
    def frees_enough(d: int) -> bool:
        known_start, known_d = suffix[start], suffix[d]
        return d > start and known_start is not None and known_d is not None and known_start - known_d >= short
    return frees_enough


def _fewest_to_drop(length: int, fits: Callable[[int], bool]) -> int:
    """The fewest oldest messages to leave out, in pairs (0, 2, 4, ...; all of them last), for ``fits``."""
    for dropped in range(0, length, 2):
        if fits(dropped):
            return dropped
    return length

def chat_defaults(chat: ChatSettings, generation_config: Mapping[str, Any], max_model_len: int) -> dict[str, Any]:
    """A new chat's settings: the model's generation_config (ERNIE: 0.8 / 0.8) unless the user set ours."""
    explicit = chat.model_fields_set
    return {
        "system_prompt": chat.system_prompt,
        "temperature": chat.temperature if "temperature" in explicit
        else float(generation_config.get("temperature", chat.temperature)),
        "top_p": chat.top_p if "top_p" in explicit else float(generation_config.get("top_p", chat.top_p)),
        "max_tokens": min(chat.max_tokens, max_tokens_cap(max_model_len)),
        ANSWERS: int(ANSWERS_AT_ONCE.low),
    }


def max_tokens_cap(max_model_len: int) -> int:
    """The longest answer a chat may ask for: half the context, so a question always has room."""
    return max(int(SAMPLING_BOUNDS["max_tokens"].low), max_model_len // 2)


@dataclass(frozen=True)
class ChatSampling:
    """How a chat asks to be answered, every default filled in: the one value the settings panel (and a preset,
    which fills the panel) and a /v1 request each end in, made only by ``clamp_sampling``."""

    temperature: float
    top_p: float
    max_tokens: int  # asked for; the answer gets at most what the prompt leaves (FittedPrompt.max_tokens)
    seed: Optional[int] = None  # /v1's seed; the settings panel has none
    answers: int = 1  # written at once, each a version of one answer (/v1: n choices)


@dataclass(frozen=True)
class SamplingChoice:
    chosen: ChatSampling
    corrections: list[tuple[str, object, Bound, float]] = field(default_factory=list)


def clamp_sampling(raw: Mapping[str, object], defaults: Mapping[str, Any], answer_cap: Optional[int] = None,
                   bounds: Mapping[str, Bound] = SAMPLING_BOUNDS) -> SamplingChoice:
    """What was asked for, checked, else the chat's defaults (``chat_defaults``): the one place they are filled in.

    A value missing or None takes the default (/v1 leaves an unset field None; 0 is a value). An out-of-range or
    garbled value (the settings panel's, a stored chat's) is replaced and reported. ``answer_cap``: the longest
    answer the settings panel may ask for (``max_tokens_cap``); /v1 passes none and its own ``bounds``
    (API_SAMPLING_BOUNDS), which its request model has already checked."""
    values: dict[str, float] = {}
    corrections: list[tuple[str, object, Bound, float]] = []
    for name, bound in {**bounds, ANSWERS: ANSWERS_AT_ONCE}.items():
        high = min(bound.high, answer_cap) if name == "max_tokens" and answer_cap is not None else bound.high
        default = defaults.get(name, bound.low)  # answers: one, unless the chat asks for more
        value: object = raw.get(name)
        if value is None:
            value = default
        try:
            number = float(value)  # type: ignore[arg-type]
            if number != number:  # NaN
                raise ValueError
        except (TypeError, ValueError):
            number = float(default)
            corrections.append((name, value, Bound(bound.low, high), number))
        else:
            clamped = min(max(number, bound.low), high)
            if clamped != number:
                corrections.append((name, value, Bound(bound.low, high), clamped))
            number = clamped
        values[name] = number
    seed = raw.get("seed")
    chosen = ChatSampling(temperature=values["temperature"], top_p=values["top_p"],
                          max_tokens=int(values["max_tokens"]), answers=int(values[ANSWERS]),
                          seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None)
    return SamplingChoice(chosen, corrections)


def answer_sampling(chosen: ChatSampling, fitted: FittedPrompt, stop_token_ids: tuple[int, ...] = ()) -> Sampling:
    """How one answer is sampled, for the chat UI and /v1 alike: the chat's sampling (``clamp_sampling``), with the
    answer budget the prompt left and the tokens the answer ends at (the model's, ``ModelFiles.stop_token_ids``)."""
    return Sampling(temperature=chosen.temperature, top_p=chosen.top_p, max_tokens=fitted.max_tokens,
                    seed=chosen.seed, stop_token_ids=tuple(stop_token_ids))


def several_samplings(sampling: Sampling, count: int) -> list[Sampling]:
    """How each of ``count`` answers written at once is sampled: alike, except that a seed asked for gives answer
    ``i`` the seed ``seed + i`` (as vLLM's own ``n`` does), so they differ and the same request gives the same
    answers again. Without a seed each answer draws its own; at temperature 0 they are the same answer."""
    if sampling.seed is None:
        return [sampling] * count
    return [replace(sampling, seed=_wrapped_seed(sampling.seed + i)) for i in range(count)]


def _wrapped_seed(seed: int) -> int:
    """A seed within vLLM's range (a 64-bit signed integer): the largest one asked for plus ``i`` wraps around."""
    return (seed + 2**63) % 2**64 - 2**63


def stats_line_values(tokens: int, ttft: Optional[float], decode_seconds: float) -> dict[str, float]:
    tps = (tokens - 1) / decode_seconds if tokens > 1 and decode_seconds > 0 else 0.0
    return {"tokens": tokens, "ttft": ttft or 0.0, "tps": tps}
