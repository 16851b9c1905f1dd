"""Where an answer ends: at the token the model's chat template closes an assistant turn with, or at eos.

A model learns to end its turn the way its template writes a finished turn. ERNIE-4.5's template closes each
assistant message with ``<|end_of_sentence|>`` while its generation_config names only ``</s>`` (id 2) as the end,
so vLLM, which stops at eos and generation_config's ids, let an answer run on past its own end (issue 35);
SmolLM2's template closes with ``<|im_end|>``. As llama.cpp builds its end-of-generation set from the vocabulary's
end-of-turn tokens as well as eos, the answer here ends at either. Pure (a tokenizer in, ids out): the chat UI,
/v1 and ``--print-config`` read the same set.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

# Stands for an answer's text when the template renders a finished turn: what follows it closes the turn.
_ANSWER = "ernie-chat-answer-4f1c"


@dataclass(frozen=True)
class EndToken:
    token_id: int
    text: str
    why: str


def template_turn_end(tokenizer: Any) -> Optional[int]:
    """The special token the chat template writes right after an assistant message's text, if it writes one.

    Only a special token counts: a template that closes a turn with plain text (a newline) would otherwise end
    every answer at its first line break. Whitespace before the token (Llama 2's ``' ' + eos``) is skipped.
    """
    try:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": _ANSWER}], tokenize=False)
    except Exception:  # noqa: BLE001 - a template that cannot render this turn: eos alone ends the answer
        return None
    if not isinstance(rendered, str) or _ANSWER not in rendered:
        return None
    after = rendered.split(_ANSWER, 1)[1]
    special = set(tokenizer.all_special_ids) | {
        token_id for token_id, token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items()
        if getattr(token, "special", False)}
    for token_id in tokenizer.encode(after, add_special_tokens=False):
        if token_id in special:
            return int(token_id)
        if tokenizer.decode([token_id]).strip():
            return None  # text first: the turn ends in plain text, no token to stop at
    return None


def answer_end_tokens(tokenizer: Any, generation_config: Mapping[str, Any]) -> tuple[EndToken, ...]:
    """Every token an answer ends at: the template's end of a turn, the tokenizer's eos, generation_config's."""
    found: dict[int, str] = {}
    turn_end = template_turn_end(tokenizer)
    if turn_end is not None:
        found[turn_end] = "the chat template ends an assistant turn with it"
    if tokenizer.eos_token_id is not None:
        found.setdefault(int(tokenizer.eos_token_id), "the tokenizer's eos")
    configured = generation_config.get("eos_token_id")
    for token_id in [configured] if isinstance(configured, int) else (configured or []):
        found.setdefault(int(token_id), "generation_config.json's eos_token_id")
    return tuple(EndToken(token_id, tokenizer.convert_ids_to_tokens(token_id), why)
                 for token_id, why in found.items())


def describe(ends: Optional[tuple[EndToken, ...]]) -> str:
    if ends is None:
        return "read from the model's chat template once its files are here"
    return ", ".join(f"{end.text} (id {end.token_id}: {end.why})" for end in ends)
