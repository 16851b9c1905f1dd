"""Chats that last (the README's "Chats that last"): the database (database.py), its schema (schema.py),
the one writer (writer.py), Chainlit's data layer over them (data_layer.py), export and import (export.py,
restore.py; their commands in transfer.py).

``HistoryStore`` is what the running app holds: ``write_failing`` is True while chats are not being saved
(read-only file, full disk, database gone), for /readyz and the page.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from app.history.data_layer import HistoryDataLayer, session_user_identifier
from app.history.database import DatabaseLocation, create_engine, locate, prepare_database
from app.history.writer import HistoryWriter

__all__ = ["DatabaseLocation", "HistoryDataLayer", "HistoryStore", "locate", "prepare_database"]


@dataclass
class HistoryStore:
    location: DatabaseLocation
    layer: HistoryDataLayer

    @classmethod
    def open(cls, location: DatabaseLocation, on_write_error: Optional[Callable[[], None]] = None) -> HistoryStore:
        """Engine and writer for a prepared database (``prepare_database`` first); connects lazily, in the
        event loop that first uses it."""
        engine = create_engine(location)
        writer = HistoryWriter(engine, on_write_error, whose=session_user_identifier)  # each user's share of it
        return cls(location, HistoryDataLayer(engine, writer))

    @property
    def write_failing(self) -> bool:
        return self.layer.writer.write_failing

    @property
    def unsaved_seconds(self) -> float:
        """How long the oldest write not yet in the database has waited (the page says so past a few seconds)."""
        return self.layer.writer.unsaved_seconds

    def over_share(self, user: Optional[str]) -> bool:
        """Whether this user's changes are being refused for now: too many of them wait for the database."""
        return user in self.layer.writer.over_share

    @property
    def last_error(self) -> Optional[str]:
        return self.layer.writer.last_error

    async def close(self) -> None:
        await self.layer.close()
