"""Saved chat settings ("presets"): a user's system prompt, temperature, top_p and answer length under a name,
kept per user in the chat database (table ``presets``) and in export/import."""
from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import delete, select

from app.errors import BadRequestError
from app.history.data_layer import USER_ACTION_WAIT_S, HistoryDataLayer
from app.history.schema import presets
from app.i18n import Phrase

PRESET_KEYS = ("system_prompt", "temperature", "top_p", "max_tokens")
MAX_NAME_CHARS = 40
MAX_PRESETS_PER_USER = 50


def check_preset_name(name: str) -> str:
    name = " ".join(name.split())  # one line, single spaces: it is shown as a command in the composer
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        raise BadRequestError(Phrase("preset_name_length", limit=MAX_NAME_CHARS, chars=len(name)))
    return name


def preset_settings(chat_settings: dict[str, Any]) -> dict[str, Any]:
    """What a preset keeps of a chat's settings: the four the settings panel shows, nothing else."""
    return {key: chat_settings[key] for key in PRESET_KEYS if key in chat_settings}


class PresetStore:
    """Presets through the history's one writer (in order with the chats' writes, retried while busy)."""

    def __init__(self, layer: HistoryDataLayer) -> None:
        self.layer = layer

    async def all(self, user: str) -> dict[str, dict[str, Any]]:
        """name -> settings, oldest first."""
        async with self.layer.reading() as conn:
            rows = (await conn.execute(select(presets.c.name, presets.c.settings)
                                       .where(presets.c.user_identifier == user)
                                       .order_by(presets.c.created_at, presets.c.name))).all()
        return {row.name: json.loads(row.settings) for row in rows}

    async def by_user(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Every user's presets (user -> name -> settings), for the export."""
        async with self.layer.reading() as conn:
            rows = (await conn.execute(select(presets.c.user_identifier, presets.c.name, presets.c.settings)
                                       .order_by(presets.c.created_at, presets.c.name))).all()
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for row in rows:
            found.setdefault(row.user_identifier, {})[row.name] = json.loads(row.settings)
        return found

    async def save(self, user: str, name: str, settings: dict[str, Any]) -> str:
        """Save (or replace) ``name``; returns the name as kept. Raises BadRequestError past the cap."""
        from chainlit.utils import utc_now

        name = check_preset_name(name)
        kept = await self.all(user)
        if name not in kept and len(kept) >= MAX_PRESETS_PER_USER:
            raise BadRequestError(Phrase("preset_too_many", limit=MAX_PRESETS_PER_USER))
        body = json.dumps(preset_settings(settings), ensure_ascii=False)

        async def write(conn) -> None:
            await conn.execute(delete(presets).where((presets.c.user_identifier == user) & (presets.c.name == name)))
            await conn.execute(presets.insert().values(id=str(uuid.uuid4()), user_identifier=user, name=name,
                                                       settings=body, created_at=utc_now()))

        await self.layer.writer.write(write, "saving a preset", wait=USER_ACTION_WAIT_S, raise_errors=True)
        return name

    async def remove(self, user: str, name: str) -> None:
        async def write(conn) -> None:
            await conn.execute(delete(presets).where((presets.c.user_identifier == user) & (presets.c.name == name)))

        await self.layer.writer.write(write, "deleting a preset", wait=USER_ACTION_WAIT_S, raise_errors=True)
