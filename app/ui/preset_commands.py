"""Presets in the chat, through the composer's commands (the "/" menu): "Save preset" keeps this chat's
settings under the name typed; each saved preset is a command of its own that starts the message's chat
with those settings. Commands (not Chainlit's chat profiles) because the list is sent over the chat's socket
and so shows a new preset at once; profiles are read only when the page loads."""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Optional

import chainlit as cl

from app.errors import ErnieChatError
from app.history.presets import PresetStore, preset_settings
from app.i18n import STRINGS, t
from app.ui.answers_command import ANSWERS_COMMANDS, answers_command
from app.ui.session_keys import CHAT_SETTINGS

if TYPE_CHECKING:
    from chainlit.types import CommandDict

log = logging.getLogger("ernie_chat.presets")
SAVE_COMMANDS = frozenset(strings["preset_save_command"] for strings in STRINGS.values())  # each language's
RESERVED_COMMANDS = SAVE_COMMANDS | ANSWERS_COMMANDS  # the app's own: a preset of that name is no command of its own
SUMMARY_PROMPT_CHARS = 40


def summary(language: str, settings: dict[str, Any]) -> str:
    prompt = " ".join(str(settings.get("system_prompt") or "").split())
    if len(prompt) > SUMMARY_PROMPT_CHARS:
        prompt = prompt[:SUMMARY_PROMPT_CHARS] + "..."
    return t(language, "preset_summary", temperature=settings.get("temperature"), top_p=settings.get("top_p"),
             max_tokens=settings.get("max_tokens"),
             prompt=t(language, "preset_summary_prompt", text=prompt) if prompt else "")


def is_preset_command(message: cl.Message) -> bool:
    """A "Save preset" message: the preset's name, not a turn of the chat."""
    return message.command in SAVE_COMMANDS


def _user() -> Optional[str]:
    user = cl.context.session.user
    return user.identifier if user else None


async def offer_presets(store: Optional[PresetStore], language: str) -> None:
    """Send this chat's commands: "Several answers" (app/ui/answers_command.py), and with a chat history "Save
    preset" and one per saved preset."""
    commands: list[CommandDict] = [answers_command(language)]
    user = _user()
    if store is not None and user is not None:
        saved = await store.all(user)
        commands.append({"id": t(language, "preset_save_command"), "icon": "bookmark-plus",
                         "description": t(language, "preset_save_description"), "button": False,
                         "persistent": False, "selected": False})
        commands += [{"id": name, "icon": "sliders-horizontal", "button": False, "persistent": False,
                      "selected": False,
                      "description": t(language, "preset_use_description", summary=summary(language, settings))}
                     for name, settings in saved.items() if name not in RESERVED_COMMANDS]
    await cl.context.emitter.set_commands(commands)


async def run_preset_command(store: Optional[PresetStore], message: cl.Message, language: str,
                             notice: Callable[[str], Awaitable[Any]],
                             use_settings: Callable[[dict[str, Any]], Awaitable[None]]) -> bool:
    """Act on the message's command. True when the message was a "Save preset" (done: it is no question to
    answer; it stays in the chat as a record, and ``is_preset_command`` keeps it out of every prompt); False
    when the message is to be answered (with a preset's settings put in place first, when it named one)."""
    user = _user()
    if store is None or user is None or not message.command:
        return False
    if is_preset_command(message):
        try:
            name = await store.save(user, message.content, preset_settings(CHAT_SETTINGS.get()))
        except ErnieChatError as err:
            await notice(t(language, "preset_refused", detail=err))
            return True
        log.info("preset saved")  # not its name or text: the log holds no user text
        await notice(t(language, "preset_saved", name=name))
        await offer_presets(store, language)
        return True
    saved = None if message.command in ANSWERS_COMMANDS else (await store.all(user)).get(message.command)
    if saved is not None:
        await use_settings(saved)
        await notice(t(language, "preset_applied", name=message.command, summary=summary(language, saved)))
    return False
