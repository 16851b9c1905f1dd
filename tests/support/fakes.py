"""Stand-ins for unit tests that need no engine: a fake engine and a data layer's logged-in user."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass



async def logged_in_user(layer, identifier: str):
    """A user made as Chainlit makes one at login, and set as the current request's user (whom the data layer
    checks and stamps on new chats)."""
    from chainlit.context import init_http_context
    from chainlit.user import User

    user = await layer.create_user(User(identifier=identifier))
    init_http_context(user=user)
    return user


def start_until_settled(host, timeout: float = 30) -> None:
    """Start an EngineHost on an event loop of its own, wait until it is ready or has failed, shut it down."""
    from app.engine.status import EngineState

    async def run():
        host.start_in_background()
        deadline = time.time() + timeout
        while host.status.state not in (EngineState.READY, EngineState.FAILED) and time.time() < deadline:
            await asyncio.sleep(0.02)
        await host.shutdown()

    asyncio.run(run())


class FakeEngine:
    """The engine protocol (app/engine/protocol.py) for EngineHost tests without vLLM: answers "ok" at once."""

    def __init__(self, plan):
        self.max_model_len = plan.engine_args["max_model_len"]

    async def generate(self, token_ids, sampling, request_id):
        from app.engine.protocol import Delta

        yield Delta("ok", 1, True, "length")

    async def check_health(self):
        return None

    async def abort(self, request_id):
        return None

    def dead_reason(self):
        return None

    def unfinished_requests(self):
        return 0

    def shutdown(self):
        pass
