"""Each private Chainlit part the app uses (app/chainlit_internals.py), pinned: a Chainlit upgrade that moves one
fails here first."""
import pytest

from app import chainlit_internals


def test_the_login_token_round_trip_through_chainlits_cookie(monkeypatch):
    from starlette.requests import Request
    from starlette.responses import Response

    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", "x" * 48)
    assert chainlit_internals.auth_cookie_name() == "access_token"
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""})
    response = Response("page")
    chainlit_internals.issue_login(request, response, "alice", {"provider": "accounts"})
    cookie = response.headers["set-cookie"]
    token = cookie.split("access_token=", 1)[1].split(";", 1)[0]
    assert chainlit_internals.login_token({"access_token": token}) == token
    half = len(token) // 2  # Chainlit's chunked form, for tokens over 3,000 characters
    assert chainlit_internals.login_token({"access_token_0": token[:half], "access_token_1": token[half:]}) == token
    assert chainlit_internals.logged_in_identifier(token) == "alice"
    assert chainlit_internals.logged_in_identifier(token[:-2] + "xx") is None  # forged
    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", "y" * 48)
    assert chainlit_internals.logged_in_identifier(token) is None  # signed before a restart


def test_login_lifetime_and_files_folder_reach_chainlit(tmp_path):
    import chainlit.config
    import chainlit.server

    before = chainlit.config.config.project.user_session_timeout
    folder_before = chainlit.config.FILES_DIRECTORY
    try:
        chainlit_internals.set_login_lifetime(600)
        assert chainlit.config.config.project.user_session_timeout == 600
        chainlit_internals.use_files_directory(tmp_path)
        assert tmp_path == chainlit.config.FILES_DIRECTORY and tmp_path == chainlit.server.FILES_DIRECTORY
    finally:
        chainlit_internals.set_login_lifetime(before)
        chainlit_internals.use_files_directory(folder_before)


def test_upload_limits_reach_the_page_settings_chainlit_sends():
    import chainlit.config

    features = chainlit.config.config.features
    before = features.spontaneous_file_upload
    kept = (before.max_size_mb, before.max_files) if before else None
    try:
        chainlit_internals.set_upload_limits(7, 3)
        feature = features.spontaneous_file_upload
        assert (feature.max_size_mb, feature.max_files) == (7, 3)
        # /project/settings hands the page its features as they are in the config (Chainlit's own dump).
        assert features.model_dump()["spontaneous_file_upload"]["max_size_mb"] == 7
    finally:
        if kept:
            before.max_size_mb, before.max_files = kept
        features.spontaneous_file_upload = before


def test_closed_sessions_chat_contexts_are_dropped_and_open_ones_kept():
    from chainlit.chat_context import chat_contexts
    from chainlit.session import ws_sessions_id

    chat_contexts["gone-session"] = ["a message"]
    chat_contexts["open-session"] = ["another"]
    ws_sessions_id["open-session"] = object()
    try:
        assert chainlit_internals.forget_chat_contexts_of_closed_sessions() >= 1
        assert "gone-session" not in chat_contexts and chat_contexts["open-session"] == ["another"]
    finally:
        chat_contexts.pop("open-session", None)
        ws_sessions_id.pop("open-session", None)


def test_stop_cancels_the_task_set_on_the_session(monkeypatch):
    import inspect

    import chainlit as cl
    import chainlit.socket

    # Chainlit's Stop cancels exactly this attribute of the session
    assert "current_task.cancel()" in inspect.getsource(chainlit.socket)
    session = type("Session", (), {"current_task": None})()
    monkeypatch.setattr(cl, "context", type("Context", (), {"session": session})())
    marker = object()
    chainlit_internals.make_stoppable(marker)
    assert session.current_task is marker


def test_chainlits_own_stop_message_is_the_text_the_app_removes():
    import inspect

    import chainlit.socket

    assert f'Message(content="{chainlit_internals.CHAINLIT_STOP_TEXT}")' in inspect.getsource(chainlit.socket)


def test_socket_events_after_connect_are_checked_and_a_refused_one_never_reaches_chainlit(monkeypatch):
    import asyncio

    import chainlit.socket  # noqa: F401 - its handlers
    from chainlit.server import sio

    handlers = sio.handlers["/"]
    monkeypatch.setattr(sio, "handlers", {"/": dict(handlers)})
    reached, closed = [], []
    original = sio.handlers["/"]["stop"]

    async def stop(sid):
        reached.append(sid)

    async def disconnect(sid, namespace=None):
        closed.append(sid)

    sio.handlers["/"]["stop"] = stop
    monkeypatch.setattr(sio, "disconnect", disconnect)
    monkeypatch.setattr(chainlit_internals, "_SOCKET_EVENT_CHECK", [lambda sid: True])
    chainlit_internals.check_chat_socket_events(lambda sid: True)
    once = dict(sio.handlers["/"])
    chainlit_internals.check_chat_socket_events(lambda sid: sid == "allowed")  # the latest check wins
    wrapped = sio.handlers["/"]
    assert wrapped == once  # and nothing is wrapped twice
    assert wrapped["connect"] is handlers["connect"] and wrapped["disconnect"] is handlers["disconnect"]
    assert original is handlers["stop"] and {"client_message", "edit_message", "window_message"} <= set(wrapped)
    asyncio.run(wrapped["stop"]("allowed"))
    asyncio.run(wrapped["stop"]("ended"))
    assert reached == ["allowed"] and closed == ["ended"]
    assert chainlit_internals.chat_socket_token("no-such-socket") is None
    assert chainlit_internals.open_chat_sockets() == []


def test_the_login_chainlit_offers_follows_the_mode(monkeypatch):
    from chainlit.config import config

    async def form(username, password):
        return None

    async def header(headers):
        return None

    monkeypatch.setattr(config.code, "password_auth_callback", form)
    monkeypatch.setattr(config.code, "header_auth_callback", header)
    monkeypatch.setattr(chainlit_internals, "_LOGIN_CALLBACKS", {})
    chainlit_internals.follow_login_mode(asks_for_login=False)  # no users yet: the local user, no form
    assert (config.code.password_auth_callback, config.code.header_auth_callback) == (None, header)
    chainlit_internals.follow_login_mode(asks_for_login=True)  # a user was added: the form, no header login
    assert (config.code.password_auth_callback, config.code.header_auth_callback) == (form, None)


def test_a_socket_event_is_checked_before_chainlits_handler_takes_it(monkeypatch):
    import asyncio

    from chainlit.server import sio

    seen = []

    async def chainlits(sid, payload):
        seen.append((sid, payload))

    monkeypatch.setitem(sio.handlers["/"], "client_message_for_test", chainlits)
    chainlit_internals.check_socket_event("client_message_for_test", lambda payload: {**payload, "checked": True})
    asyncio.run(sio.handlers["/"]["client_message_for_test"]("sid-1", {"message": {}}))
    assert seen == [("sid-1", {"message": {}, "checked": True})]
    assert "client_message" in sio.handlers["/"]  # the event the app checks is registered under this name


def test_thread_sharing_is_chainlits_allow_thread_sharing_feature(monkeypatch):
    import chainlit.config

    features = chainlit.config.config.features
    assert chainlit_internals.thread_sharing_allowed() is False  # the default, and .chainlit/config.toml's
    monkeypatch.setattr(features, "allow_thread_sharing", True)
    assert chainlit_internals.thread_sharing_allowed() is True


def test_a_socket_refused_for_another_users_chat_connects_again_as_a_new_chat(monkeypatch):
    """Chainlit's connect refuses a socket naming another user's chat ("authorization failed"); the wrapper connects
    it again without that chat and marks its user session. A socket refused for its login stays refused."""
    import asyncio

    import chainlit.socket  # noqa: F401 - its handlers
    from chainlit.server import sio
    from chainlit.user_session import user_sessions

    calls = []

    async def connect(sid, environ, auth):  # Chainlit's rule: alice's chat is refused, and so is a bad login
        calls.append(auth.get("threadId"))
        if auth.get("threadId") == "alices-chat" or environ.get("login") != "bob":
            raise ConnectionRefusedError("authorization failed")
        return True

    monkeypatch.setattr(sio, "handlers", {"/": {**sio.handlers["/"], "connect": connect}})
    chainlit_internals.open_refused_chats_as_new()
    chainlit_internals.open_refused_chats_as_new()  # wrapped once
    wrapped = sio.handlers["/"]["connect"]
    auth = {"sessionId": "bobs-tab", "threadId": "alices-chat"}
    try:
        assert asyncio.run(wrapped("sid", {"login": "bob"}, auth)) is True
        assert calls == ["alices-chat", None]  # refused by Chainlit, then a new chat
        assert user_sessions["bobs-tab"][chainlit_internals.REFUSED_CHAT] == "alices-chat"
        with pytest.raises(ConnectionRefusedError):
            asyncio.run(wrapped("sid", {"login": "nobody"}, {"sessionId": "other-tab", "threadId": "alices-chat"}))
        assert "other-tab" not in user_sessions
        assert asyncio.run(wrapped("sid", {"login": "bob"}, {"sessionId": "own-tab", "threadId": "own"})) is True
        assert chainlit_internals.REFUSED_CHAT not in user_sessions.get("own-tab", {})
    finally:
        user_sessions.pop("bobs-tab", None)


def test_answer_tasks_live_on_the_session_object_which_chainlits_resume_leaves_in_place(monkeypatch):
    """Chainlit replaces a session's whole user-session dict when it resumes a chat; the answers being tracked must
    not go with it (on SIGTERM a closed page then cancelled none of them, issue 35)."""
    import inspect

    import chainlit as cl
    import chainlit.socket

    assert "user_sessions[session.id] = metadata.copy()" in inspect.getsource(chainlit.socket.resume_thread)
    session = type("Session", (), {})()
    monkeypatch.setattr(cl, "context", type("Context", (), {"session": session})())
    tasks = chainlit_internals.answer_tasks()
    tasks.add("an answer")
    assert chainlit_internals.answer_tasks() is tasks
    assert tasks == {"an answer"}


def test_an_elements_file_url_is_the_one_the_page_builds_and_chainlit_serves():
    # The page's bundle builds `${route}/${chainlitKey}?session_id=${sessionId}` for an element event, and
    # Chainlit's server answers GET on that route: the URL the app puts on a resumed chat's status panel.
    from pathlib import Path

    import chainlit
    from chainlit.server import app

    bundle = "".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in (Path(chainlit.__file__).parent / "frontend" / "dist" / "assets").glob("index-*.js"))
    route = chainlit_internals.CHAINLIT_FILE_ROUTE
    assert f"getElementUrl(t,e){{let n=`?session_id=${{e}}`;return this.buildEndpoint(`{route}/${{t}}${{n}}`)}}" \
        in bundle
    assert any(getattr(r, "path", "") == route + "/{file_id}" and "GET" in r.methods for r in app.routes)
    assert chainlit_internals.element_file_url("/chat", "k1", "s1") == "/chat/project/file/k1?session_id=s1"


def test_an_edit_is_kept_before_chainlits_edit_handler_removes_the_later_messages(monkeypatch):
    import asyncio
    import sys
    from contextlib import contextmanager
    from types import SimpleNamespace

    import chainlit.chat_context
    import chainlit.socket  # noqa: F401 - its handlers
    from chainlit.server import sio
    from chainlit.session import WebsocketSession

    monkeypatch.setattr(sio, "handlers", {"/": dict(sio.handlers["/"])})
    assert "edit_message" in sio.handlers["/"]  # Chainlit's edit handler, under the name the page sends
    edited, kept = [], []

    async def chainlits_edit(sid, payload):
        edited.append(payload["message"]["output"])

    question = SimpleNamespace(id="q", type="user_message")
    answer = SimpleNamespace(id="a", type="assistant_message")
    sio.handlers["/"]["edit_message"] = chainlits_edit
    monkeypatch.setattr(WebsocketSession, "get", classmethod(lambda cls, sid: object() if sid == "s" else None))
    # chainlit.context is Chainlit's lazy context object, not its module, once chainlit is imported
    monkeypatch.setattr(sys.modules["chainlit.context"], "init_ws_context", lambda session: None)
    shown = SimpleNamespace(get=lambda: [question, answer])
    monkeypatch.setitem(vars(sys.modules["chainlit.chat_context"]), "chat_context", shown)  # not its lazy proxy

    async def keep(asked, later, new_text, free):
        kept.append((asked.id, [m.id for m in later], new_text))
        return free and new_text != "refused"

    @contextmanager
    def free_branches():
        yield True

    monkeypatch.setattr(chainlit_internals, "branches_held", free_branches)

    chainlit_internals.keep_turns_on_edit(keep)
    wrapped = sio.handlers["/"]["edit_message"]
    chainlit_internals.keep_turns_on_edit(keep)  # a second call wraps nothing twice
    assert sio.handlers["/"]["edit_message"] is wrapped

    def edit(sid, message_id, text):
        asyncio.run(wrapped(sid, {"message": {"id": message_id, "output": text}}))

    edit("s", "q", "new")
    edit("s", "q", "refused")  # the keeper refused it: Chainlit never removes anything
    edit("s", "a", "an answer is no question")  # the page edits only user messages
    edit("gone", "q", "no session")
    asyncio.run(wrapped("s", {"message": "not a message"}))
    assert kept == [("q", ["a"], "new"), ("q", ["a"], "refused")]
    assert edited == ["new"]


def _kept_session(thread_id="chat"):
    from chainlit.session import WebsocketSession

    return WebsocketSession(id=f"tab-{thread_id}", socket_id="old-socket", emit=lambda *a: None,
                            emit_call=lambda *a: None, client_type="webapp", user_env={}, user=None, token=None,
                            thread_id=thread_id)


def test_a_tab_back_to_its_kept_session_is_told_before_its_socket_is_accepted(monkeypatch):
    """Chainlit's connect gives a kept session the new socket (``restore_existing_session``, before it would make a
    new session); the wrapper awaits ``back(session)`` for that one only, and wraps Chainlit's handler once however
    it nests with the refused-chat wrapper."""
    import asyncio
    import inspect

    import chainlit.socket
    from chainlit.server import sio
    from chainlit.session import WebsocketSession

    source = inspect.getsource(chainlit.socket.connect)
    assert source.index("restore_existing_session(") < source.index("WebsocketSession(")
    assert "session.restore(new_socket_id=sid)" in inspect.getsource(chainlit.socket.restore_existing_session)
    kept = _kept_session()
    told = []

    async def connect(sid, environ, auth):  # Chainlit's, as far as a kept session goes
        session = WebsocketSession.get_by_id(auth["sessionId"])
        if session is not None:
            session.restore(new_socket_id=sid)
        return True

    async def back(session):
        told.append(session)

    monkeypatch.setattr(sio, "handlers", {"/": {**sio.handlers["/"], "connect": connect}})
    try:
        chainlit_internals.when_a_tab_comes_back(back)
        chainlit_internals.open_refused_chats_as_new()
        chainlit_internals.when_a_tab_comes_back(back)  # an app made again: each wrapper once, nested as they are
        chainlit_internals.open_refused_chats_as_new()
        wrapped = sio.handlers["/"]["connect"]
        assert wrapped.__wrapped__.__wrapped__ is connect
        assert asyncio.run(wrapped("new-socket", {}, {"sessionId": "a-new-tab"})) is True
        assert told == []
        assert asyncio.run(wrapped("new-socket", {}, {"sessionId": kept.id})) is True
        assert told == [kept] and WebsocketSession.get("new-socket") is kept
    finally:
        asyncio.run(kept.delete())
        chainlit_internals.when_a_tab_comes_back(chainlit_internals._nothing_to_restore)


def test_a_resumed_chats_messages_make_room_for_those_chainlit_adds_after_on_chat_resume():
    """Chainlit adds each stored message of a resumed chat once on_chat_resume returns, nothing awaited between: the
    messages already held under those ids go first, so none is held twice."""
    import asyncio
    import inspect

    import chainlit.socket
    from chainlit.context import init_ws_context

    source = inspect.getsource(chainlit.socket.connection_successful)
    after_hook = source.split("await config.code.on_chat_resume(thread)", 1)[1]
    assert after_hook.lstrip().startswith('for step in thread.get("steps", []):')
    assert "chat_context.add(Message.from_dict(step))" in after_hook.split("await", 1)[0]
    session = _kept_session("resumed")
    steps = [{"id": f"m{n}", "type": kind, "output": f"text {n}", "createdAt": "2026-12-06T10:00:00.000Z"}
             for n, kind in enumerate(("user_message", "assistant_message", "user_message"))]

    async def body():
        chainlit_internals.hold_messages(session, chainlit_internals.messages_from_steps(session, steps))
        init_ws_context(session)
        chainlit_internals.make_room_for_resumed_messages({"steps": steps[:2] + [{"id": "run", "type": "run"}]})
        return [m.id for m in chainlit_internals.held_messages(session)]

    try:
        assert asyncio.run(body()) == ["m2"]  # the one not in the resumed chat stays
    finally:
        chainlit_internals.drop_held_messages(session)
        asyncio.run(session.delete())
