"""Chat sharing is off unless .chainlit/config.toml turns it on (``features.allow_thread_sharing``, default false).

Chainlit 2.12 reads that setting only to show or hide the page's share button: its routes work whatever it says.
With it false, a chat's owner could still ``PUT /project/thread/share`` (or import a chat whose metadata says
``is_shared``), and then anyone logged in read the chat, attached documents included, through
``GET /project/share/<id>`` (issue 36, N11). Both routes are refused here while the setting is off.
"""
from __future__ import annotations

from app.chainlit_internals import thread_sharing_allowed
from app.errors import NotFoundError
from app.guards.requests import local_path, send_error

SHARE_ROUTES = (("PUT", "/project/thread/share"), ("GET", "/project/share/"))  # Chainlit's: set, and read shared
SHARING_OFF = "chat sharing is off (features.allow_thread_sharing = false in .chainlit/config.toml)"


def is_share_route(method: str, path: str) -> bool:
    return any(method == m and (path == p or (p.endswith("/") and path.startswith(p))) for m, p in SHARE_ROUTES)


class SharingOff:
    """Pure ASGI: Chainlit's share routes answer 404 (one line naming the setting) while sharing is off: as routes
    that are not there, for any chat id, so no id is confirmed either."""

    def __init__(self, app, root_path: str = "") -> None:
        self.app, self.root_path = app, root_path

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] == "http" and not thread_sharing_allowed()
                and is_share_route(scope.get("method", ""), local_path(scope.get("path", ""), self.root_path))):
            await send_error(send, NotFoundError(SHARING_OFF))
            return
        await self.app(scope, receive, send)
