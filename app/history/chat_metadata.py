"""What an imported chat's metadata may bring: the chat's settings panel, each value of its own type; nothing else.

Chainlit puts a resumed chat's stored metadata back into the session whole (``chainlit/socket.py``
``resume_thread``), where the app keeps its own state: an imported chat whose metadata said
``"answer_tasks": [1, 2, 3]`` refused every message ("already has 3 answers running"), and ``is_shared`` opened
it to others (issue 36, N15 and N11). A file is checked field by field, as any input: the settings the panel
shows are kept when each has its type (their ranges are the panel's, applied with a notice when the chat answers:
app/conversation.py ``clamp_sampling``); every other key is dropped.
"""
from __future__ import annotations

from typing import Any

from app.settings import ANSWERS

CHAT_SETTINGS = "chat_settings"  # the key Chainlit keeps the settings panel's values under


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The type of each of the panel's settings: those presets keep (app/history/presets.py PRESET_KEYS), and the
# answers written at once (app/settings.py ANSWERS), which is the chat's own and no preset's.
# Numbers of either kind: the panel's sliders keep floats (an answer length of 512.0), the sampling rules make the
# length whole and bring each value into its range.
SETTING_TYPES = {"system_prompt": lambda v: isinstance(v, str), "temperature": _number, "top_p": _number,
                 "max_tokens": _number, ANSWERS: _number}


def typed_settings(settings: Any) -> dict[str, Any]:
    """The settings panel's values in ``settings`` that have their type (a text, a number): a stored temperature of
    "hot" made the panel itself fail to draw when the chat was opened."""
    if not isinstance(settings, dict):
        return {}
    return {key: settings[key] for key, typed in SETTING_TYPES.items() if key in settings and typed(settings[key])}


def imported_metadata(metadata: Any) -> dict[str, Any]:
    """The metadata an imported chat is stored with: its settings panel's values of the right type, else {}."""
    kept = typed_settings(metadata.get(CHAT_SETTINGS) if isinstance(metadata, dict) else None)
    return {CHAT_SETTINGS: kept} if kept else {}
