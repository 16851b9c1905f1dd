"""Every check a request passes before the app sees it, in one package; the order is kept here.

- web.py: Host, Origin, body size, /v1 content type, CSP (outermost: refuses before anything reads the body);
- login.py: login rate limit, logout, logins of removed users; identity.py: who may log in, as whom;
- login_words.py: a failed login's line in the page's language;
- account_sockets.py: the chat sockets of removed users (or of a changed secret) closed, their events refused;
- api_token.py: the Bearer token of /metrics and /v1; local_user.py: the local user's login on loopback;
- ownership.py: feedback only on one's own chats (Chainlit checks the other routes itself);
- sharing.py: Chainlit's share routes refused while sharing is off;
- uploads.py: how much each chat tab, and each user over all their tabs, may upload;
- page_input.py: what the page sends over the socket with a message (its metadata: nothing of it is kept);
- another user's chat asked for by its address: Chainlit refuses it, the page gets a new chat of its own
  (chainlit_internals.open_refused_chats_as_new; the line is app/ui/chat.py's);
- requests.py: the path, the Bearer token and the one error body every guard uses.
"""
from __future__ import annotations

from typing import Any

from app import telemetry
from app.chainlit_internals import open_refused_chats_as_new
from app.documents.limits import upload_body_bytes
from app.guards import (
    account_sockets,
    api_token,
    local_user,
    login,
    login_words,
    ownership,
    page_input,
    sharing,
    uploads,
    web,
)
from app.guards.identity import LoginMode


def install_guards(app, runtime: Any) -> None:
    """Add them to the FastAPI app (``runtime`` is app.runtime.Runtime): the last one added runs first."""
    server_settings = runtime.settings.server
    if runtime.login.start_mode is LoginMode.LOCAL:
        if runtime.history is not None:  # the sidebar needs a login
            app.add_middleware(local_user.LocalUserCookie, policy=runtime.login)
        app.add_middleware(local_user.LoginModeFollower, policy=runtime.login)  # a user added later: the login page
    app.add_middleware(sharing.SharingOff, root_path=server_settings.root_path)
    if runtime.uploads is not None:  # each tab's and each user's share of uploads, before Chainlit reads one
        app.add_middleware(uploads.UploadQuota, ledger=runtime.uploads,
                           max_file_bytes=upload_body_bytes(runtime.settings.chat.max_upload_mb),
                           root_path=server_settings.root_path)
    app.add_middleware(ownership.FeedbackOwnerCheck, history=lambda: runtime.history,
                       root_path=server_settings.root_path)
    app.add_middleware(api_token.ApiTokenCheck, token=server_settings.auth_token,
                       root_path=server_settings.root_path)
    if runtime.login.has_login_page:  # a failed login in the page's language, not "Unauthorized: credentialssignin"
        app.add_middleware(login_words.LoginWords, root_path=server_settings.root_path)
    login.install(app, runtime.login, server_settings)
    account_sockets.install(runtime.login)  # the socket's events, which no HTTP middleware sees
    # Host/Origin/size checks refuse before the login rules or the app see anything.
    web.install(app, server_settings, upload_body_bytes(runtime.settings.chat.max_upload_mb))
    page_input.install()  # socket events, checked before Chainlit's handlers (mounted by now) take them
    open_refused_chats_as_new()  # another user's /thread/<id>: refused by Chainlit, and a new chat instead
    # Outermost: every exception any of them lets out is written to the log file.
    app.add_middleware(telemetry.ErrorLogMiddleware)
