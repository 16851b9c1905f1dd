"""A chat database that cannot be written: answers still come, the failures are counted, and the app's
history flag says chats are not being saved (issue 12, item 7).

The database is opened read-only by SQLite itself (``?mode=ro``): every write fails with SQLite's own
"attempt to write a readonly database", as for a read-only file (a chmod would not stop root, who runs CI)."""
from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from app.history import prepare_database
from app.history.database import DatabaseLocation
from tests.support.app_process import get, running_app
from tests.support.chat_socket import answer_over_socket
from tests.support.metrics import metric_value

pytestmark = pytest.mark.timeout(600)


def notice_shown(events: list) -> bool:
    return any(name == "new_message" and isinstance(data, dict)
               and "This chat is not saved yet" in data.get("output", "") for name, data in events)


def test_answers_come_and_failures_are_counted_when_the_database_is_read_only(tiny_model_dir, tmp_path):
    path = tmp_path / "chats.db"
    asyncio.run(prepare_database(DatabaseLocation(f"sqlite+aiosqlite:///{path}", path)))
    url = f"sqlite+aiosqlite:///file:{path}?mode=ro&uri=true"
    with running_app(tiny_model_dir, tmp_path, "--database-url", url, "--max-tokens", "16") as app:
        client = httpx.Client(base_url=app.url, timeout=30)
        client.get("/")  # the page logs the local user in (a cookie)
        events: list = []
        _, answer = asyncio.run(answer_over_socket(app, client, str(uuid.uuid4()), "is anyone saving this?", events,
                                                   also=notice_shown))  # the page's one warning follows the answer
        assert "prompt" in answer
        # The page says so once, and /readyz tells it (the app stays ready: answers come).
        shown = [data.get("output", "") for name, data in events if name == "new_message" and isinstance(data, dict)]
        assert sum("This chat is not saved yet" in text for text in shown) == 1, shown
        code, ready = app.readyz()
        assert code == 200 and ready["history"].startswith("not saving: "), ready
        errors = metric_value(get(app.url + "/metrics")[1], "ernie_chat_history_write_errors_total")
        assert errors >= 1
        assert "chat history is not being saved" in app.output()
        assert "attempt to write a readonly database" in app.output()
        client.close()
