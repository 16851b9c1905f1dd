"""This chat's settings panel: system prompt, temperature, top_p, the answer's length and the answers written at once,
drawn with the chat's values (the defaults where one is missing) and saved with the chat whenever they change."""
from __future__ import annotations

from typing import Any

import chainlit as cl
from chainlit.input_widget import Slider, TextInput

from app.chainlit_internals import save_session_now
from app.conversation import ANSWERS, chat_defaults, max_tokens_cap
from app.history.chat_metadata import typed_settings
from app.i18n import t
from app.runtime import Runtime
from app.settings import ANSWERS_AT_ONCE, SAMPLING_BOUNDS
from app.ui.chat_messages import language
from app.ui.session_keys import CHAT_SETTINGS


def answer_cap(rt: Runtime) -> int:
    """The longest answer this engine's context allows (the max_tokens slider's end)."""
    return max_tokens_cap(rt.max_model_len)


async def send_settings(rt: Runtime, values: dict[str, Any]) -> dict[str, Any]:
    """The settings panel with ``values`` (the defaults where one is missing); returns what it holds."""
    defaults = chat_defaults(rt.settings.chat, rt.generation_defaults, rt.max_model_len)
    initial = {**defaults, **typed_settings(values)}  # a stored or sent value of another type is not drawn
    page_language = language()
    top_p, max_tokens = SAMPLING_BOUNDS["top_p"], SAMPLING_BOUNDS["max_tokens"]
    temperature = SAMPLING_BOUNDS["temperature"]
    settings = await cl.ChatSettings([
        TextInput(id="system_prompt", label=t(page_language, "setting_system_prompt"),
                  initial=initial["system_prompt"], multiline=True),
        Slider(id="temperature", label=t(page_language, "setting_temperature"), initial=initial["temperature"],
               min=temperature.low, max=temperature.high, step=0.05),
        Slider(id="top_p", label=t(page_language, "setting_top_p"), initial=initial["top_p"],
               min=top_p.low, max=top_p.high, step=0.05),
        Slider(id=ANSWERS, label=t(page_language, "setting_answers"), initial=initial[ANSWERS],
               min=ANSWERS_AT_ONCE.low, max=ANSWERS_AT_ONCE.high, step=1),
        Slider(id="max_tokens", label=t(page_language, "setting_max_tokens"), initial=initial["max_tokens"],
               min=max_tokens.low, max=answer_cap(rt), step=max_tokens.low),
    ]).send()
    CHAT_SETTINGS.set(settings)
    return settings


async def keep_settings(settings: dict[str, Any]) -> None:
    """This chat's settings, saved with the chat now, not only when the page closes (a crash would lose them)."""
    CHAT_SETTINGS.set(settings)
    await save_session_now()


async def use_preset(rt: Runtime, values: dict[str, Any]) -> None:
    """A preset's settings put in place: drawn in the panel and saved with the chat. The answers written at once are
    the chat's own (no preset keeps them) and stay as they were."""
    kept = {ANSWERS: CHAT_SETTINGS.get()[ANSWERS]} if ANSWERS in CHAT_SETTINGS.get() else {}
    await keep_settings(await send_settings(rt, {**values, **kept}))
