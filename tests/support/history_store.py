"""A chat database for tests without the app: a store opened on it, and chats written as Chainlit writes them."""
from __future__ import annotations

import asyncio
import uuid

from app.history import HistoryStore, prepare_database
from app.history.database import DatabaseLocation
from tests.support.fakes import logged_in_user


def run_with_store(location: DatabaseLocation, body):
    """Prepare the database, open a store, run ``body(store)`` in one event loop, close the store."""
    async def main():
        await prepare_database(location)
        store = HistoryStore.open(location)
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(main())


def message(thread_id: str, text: str, kind: str = "user_message", created: str = "2026-12-03T10:00:00.000Z"):
    return {"id": str(uuid.uuid4()), "threadId": thread_id, "type": kind, "name": "User" if kind == "user_message"
            else "Assistant", "output": text, "input": "", "createdAt": created, "metadata": {"k": [1, 2]},
            "tags": ["a", "b"], "modes": {"model": "ernie"}, "streaming": False}


async def start_chat(store: HistoryStore, identifier: str, first: str) -> tuple[str, str]:
    """A chat as Chainlit makes one: the user, the first message, then the chat's name and owner."""
    layer = store.layer
    user = await logged_in_user(layer, identifier)
    thread_id = str(uuid.uuid4())
    await layer.create_step(message(thread_id, first))
    await layer.update_thread(thread_id, name=first, user_id=user.id, metadata={"chat_settings": {"top_p": 0.5}})
    await layer.writer.drain()  # the writes are queued, not awaited: landed, for tests that read the tables
    return user.id, thread_id
