"""How many answers one message gets at once: the settings panel's "Answers at once", or the composer's "Several
answers" command (a button beside the composer, and in the "/" menu), which asks for several even when the panel
says one. Its own module: the command list (app/ui/preset_commands.py) and the answer (app/ui/answer.py) both read
it, and neither imports the other."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from app.i18n import STRINGS, t
from app.settings import ANSWERS_AT_ONCE

if TYPE_CHECKING:
    from chainlit.types import CommandDict

ANSWERS_COMMANDS = frozenset(strings["answers_command"] for strings in STRINGS.values())  # each language's
# What the command writes when the panel says one answer: enough to compare, within ANSWERS_AT_ONCE.
COMMAND_ANSWERS = 3


def answers_command(language: str) -> CommandDict:
    """The composer's "Several answers" command, in the page's language."""
    return {"id": t(language, "answers_command"), "icon": "copy", "button": True, "persistent": False,
            "selected": False, "description": t(language, "answers_command_description")}


def answers_asked(setting: int, command: Optional[str]) -> int:
    """How many answers a new message gets: the panel's count (already within ANSWERS_AT_ONCE), or with the
    "Several answers" command at least two (COMMAND_ANSWERS when the panel says one)."""
    if command in ANSWERS_COMMANDS and setting < 2:
        return min(COMMAND_ANSWERS, int(ANSWERS_AT_ONCE.high))
    return setting
