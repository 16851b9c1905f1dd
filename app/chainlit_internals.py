"""Every use of Chainlit's private parts, behind one door: upgrading Chainlit touches this file and its test
(tests/unit/test_chainlit_internals.py pins each one).

Public Chainlit (``import chainlit as cl``, its decorators, ``mount_chainlit``, ``BaseDataLayer``) is used
where it is needed; what Chainlit does not offer publicly is here, each with why we need it.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import asyncio

    from starlette.requests import Request
    from starlette.responses import Response

# Chainlit's route for the files of a session: a file attached to a message (POST), an element's content (GET).
CHAINLIT_FILE_ROUTE = "/project/file"


# ----- the login token (Chainlit's JWT in a cookie it may split into chunks) -------------------------------
def auth_cookie_name() -> str:
    """Chainlit's login cookie (CHAINLIT_AUTH_COOKIE_NAME); a long token is split into <name>_0, <name>_1, ..."""
    from chainlit.auth.cookie import _auth_cookie_name

    return _auth_cookie_name


def login_token(cookies: dict[str, str]) -> Optional[str]:
    """The login token from a request's cookies, whole or from its chunks, as Chainlit reads it."""
    from chainlit.auth import get_token_from_cookies

    return get_token_from_cookies(cookies)


def logged_in_identifier(token: str) -> Optional[str]:
    """The user a login token was signed for; None when it is not valid (expired, forged, signed before a
    restart: the signing secret is made per start)."""
    from chainlit.auth.jwt import decode_jwt

    try:
        return decode_jwt(token).identifier
    except Exception:
        return None


def issue_login(request: Request, response: Response, identifier: str, metadata: dict[str, Any]) -> None:
    """Log the browser in: a signed token for this user in Chainlit's cookie (the local user's page)."""
    import chainlit as cl
    from chainlit.auth import create_jwt, set_auth_cookie

    set_auth_cookie(request, response, create_jwt(cl.User(identifier=identifier, metadata=metadata)))


def set_login_lifetime(seconds: int) -> None:
    """Chainlit signs its login token and sets its cookie for ``user_session_timeout`` seconds (default 15 days),
    read from .chainlit/config.toml at import; --login-lifetime sets it for this run."""
    from chainlit.config import config

    config.project.user_session_timeout = seconds


def set_upload_limits(max_size_mb: int, max_files: int) -> None:
    """The page reads its upload limits from ``config.features.spontaneous_file_upload`` (loaded from
    .chainlit/config.toml at import) and refuses a larger file or one file too many before sending it."""
    from chainlit.config import SpontaneousFileUploadFeature, config

    feature = config.features.spontaneous_file_upload or SpontaneousFileUploadFeature(enabled=True)
    feature.max_size_mb = max_size_mb
    feature.max_files = max_files
    config.features.spontaneous_file_upload = feature


def name_the_page(title: str, description: str, welcome_folder: Path) -> None:
    """Chainlit writes the page's <title> and description from ``config.ui`` (read from .chainlit/config.toml at
    import, so it cannot know the model) on each page load, and reads the welcome text from
    ``chainlit[_<language>].md`` in ``config.root`` on each /project/settings; point both at the running model."""
    from chainlit.config import config

    config.ui.name = title
    config.ui.description = description
    config.root = str(welcome_folder)


def avatar_for_everyone(url: str) -> None:
    """Every message's avatar from ``url``. The page otherwise asks ``/avatars/<author>``, with ``config.ui.name``
    for its own "running" avatar: that name is the page title ("SmolLM2-135M-Instruct · ernie-chat"), which
    Chainlit's avatar route refuses ('·' is not in [a-zA-Z0-9_ .-]): a 400 in the console with every answer
    (issue 35). Each author's avatar was the favicon already (the route falls back to it; public/ has no avatars)."""
    from chainlit.config import config

    config.ui.default_avatar_file_url = url


# ----- sessions, files, chat contexts ---------------------------------------------------------------------
def use_files_directory(folder: Path) -> None:
    """Chainlit keeps per-chat files (uploads, our status panel's text) under <project>/.files, created once at
    import and deleted whole when any Chainlit server stops; each session reads the folder from
    ``chainlit.config`` and Chainlit's own lifespan (not run here) from ``chainlit.server``."""
    import chainlit.config
    import chainlit.server

    chainlit.config.FILES_DIRECTORY = folder
    chainlit.server.FILES_DIRECTORY = folder


def files_directory() -> Path:
    """The folder ``use_files_directory`` gave Chainlit (this process's private one, 0700, removed at exit)."""
    import chainlit.config

    return Path(chainlit.config.FILES_DIRECTORY)


def forget_chat_contexts_of_closed_sessions() -> int:
    """Chainlit keeps every chat's messages in a module-level dict (``chat_contexts``) and never removes them,
    even after it deletes the session; drop those whose session is gone. Returns how many were dropped."""
    from chainlit.chat_context import chat_contexts
    from chainlit.session import ws_sessions_id

    gone = [session_id for session_id in list(chat_contexts) if session_id not in ws_sessions_id]
    for session_id in gone:
        chat_contexts.pop(session_id, None)
    return len(gone)


_ANSWER_TASKS = "__ernie_chat_answer_tasks__"  # an attribute of Chainlit's session object (see answer_tasks)


def answer_tasks() -> set[asyncio.Task]:
    """This chat tab's answers, running or queued: the per-chat limit counts them, and a closed page cancels them
    (on SIGTERM too: the server closes every page). Kept on Chainlit's session object, not in ``cl.user_session``:
    Chainlit replaces a session's whole user-session dict with the chat's stored metadata when it resumes a chat
    (socket.py ``resume_thread``), and a page's "connection_successful" can resume the chat its first message has
    just stored. The set was then lost while its answers ran; on SIGTERM the page's close cancelled none of them,
    they ran on past the engine's shutdown and reached their cut save 6 s later, after the chat database had
    closed (issue 35)."""
    import chainlit as cl

    session = cl.context.session
    tasks = getattr(session, _ANSWER_TASKS, None)
    if tasks is None:
        tasks = set()
        setattr(session, _ANSWER_TASKS, tasks)
    return tasks


_BRANCHES_HELD = "__ernie_chat_branches_held__"  # an attribute of Chainlit's session object (see branches_held)


@contextmanager
def branches_held() -> Iterator[bool]:
    """Hold this chat tab's questions' branches while one switch, edit or fork changes or reads them: True when
    held here (let go on leaving), False when another holds them (that change must not start). Each arrow click
    and each edit arrives as a task of its own, and each change awaits the page between its steps: a second one
    read the half-shown chat as the branch being left (issue 32 item 2). Kept on Chainlit's session object, as
    ``answer_tasks`` is, so a resumed chat keeps it."""
    import chainlit as cl

    session = cl.context.session
    if getattr(session, _BRANCHES_HELD, False):
        yield False
        return
    setattr(session, _BRANCHES_HELD, True)
    try:
        yield True
    finally:
        setattr(session, _BRANCHES_HELD, False)


def make_stoppable(task: Any) -> None:
    """Make ``task`` the one the page's Stop cancels: Chainlit registers only the task of a new message, not
    that of an edit or an action."""
    import chainlit as cl

    cl.context.session.current_task = task


async def save_session_now() -> None:
    """Save this chat's session (its settings panel's values among it) with the chat now: Chainlit saves it only
    when the page goes away, so a crash lost settings changed since."""
    import chainlit as cl
    from chainlit.data import get_data_layer

    session = cl.context.session
    data_layer = get_data_layer()
    if data_layer is not None and session.has_first_interaction:
        await data_layer.update_thread(session.thread_id, metadata=session.to_persistable())


CHAINLIT_STOP_TEXT = "Task manually stopped."  # chainlit/socket.py stop(): sent as a message of its own


async def remove_chainlits_stop_message() -> None:
    """Chainlit answers Stop with a separate "Task manually stopped." message (kept in the history too); the app
    marks the stopped answer itself instead, so that message goes."""
    import chainlit as cl

    for message in reversed(cl.chat_context.get()):
        if message.content == CHAINLIT_STOP_TEXT:
            await message.remove()
            return


# ----- the chat socket: its logins checked after it connects ------------------------------------------------
_GATED = "__ernie_chat_gated__"  # marks a wrapped socket handler, so a second call leaves it as it is


def open_chat_sockets() -> list[tuple[str, Optional[str]]]:
    """(socket id, login token) of every chat socket connected now. Chainlit keeps a session (with the token it
    connected with) for a while after its socket goes; those are left out."""
    from chainlit.server import sio
    from chainlit.session import ws_sessions_sid

    return [(sid, session.token) for sid, session in list(ws_sessions_sid.items())
            if sio.manager.is_connected(sid, "/")]


def chat_socket_token(sid: str) -> Optional[str]:
    """The login token the chat socket ``sid`` connected with (None: no login, or no such socket)."""
    from chainlit.session import WebsocketSession

    session = WebsocketSession.get(sid)
    return session.token if session is not None else None


def session_user(session_id: str) -> tuple[bool, Optional[str]]:
    """(whether the chat session ``session_id`` exists, the identifier of its user: None without a login)."""
    from chainlit.session import WebsocketSession

    session = WebsocketSession.get_by_id(session_id) if session_id else None
    if session is None:
        return False, None
    return True, session.user.identifier if session.user else None


def delete_session_files(file_ids: list[str]) -> None:
    """Delete files of the current chat session (uploads it no longer needs) from disk and from its file list;
    Chainlit deletes a session's files only when it drops the session, 10 minutes after its socket went."""
    import chainlit as cl

    files = cl.context.session.files
    for file_id in file_ids:
        kept = files.pop(file_id, None)
        if kept is not None:
            Path(kept["path"]).unlink(missing_ok=True)


async def close_chat_socket(sid: str) -> None:
    """Close a chat socket from the server: the page gets socket.io's "io server disconnect" (it does not try again
    by itself), and Chainlit's disconnect handler runs the app's on_chat_end, which cancels its answers."""
    from chainlit.server import sio

    await sio.disconnect(sid)


def check_chat_socket_events(allowed: Callable[[str], bool]) -> None:
    """Ask ``allowed(socket id)`` before each of Chainlit's chat socket events (a message, an edit, Stop, ...); an
    event it refuses is dropped, and its socket closed. Chainlit checks the login only when the socket connects, so
    a login that ended afterwards went on chatting over the open socket (issue 36 N2). Connect (the login is checked
    there by Chainlit and app/guards/login.py) and disconnect (it must always clean up) pass. Chainlit's server is
    one per process: a later call replaces the check (an app made again in the same process, as tests do)."""
    import chainlit.socket  # noqa: F401 - registers Chainlit's handlers on its server
    from chainlit.server import sio

    _SOCKET_EVENT_CHECK[0] = allowed
    handlers = sio.handlers.get("/", {})
    for event, handler in list(handlers.items()):
        if event in ("connect", "disconnect") or getattr(handler, _GATED, False):
            continue

        async def checked(sid: str, *args: Any, _handler: Callable[..., Any] = handler) -> Any:
            if not _SOCKET_EVENT_CHECK[0](sid):
                await sio.disconnect(sid)
                return None
            return await _handler(sid, *args)

        setattr(checked, _GATED, True)
        handlers[event] = checked


_SOCKET_EVENT_CHECK: list[Callable[[str], bool]] = [lambda sid: True]


# ----- another user's chat, opened by its address --------------------------------------------------------------
REFUSED_CHAT = "refused_chat"  # in Chainlit's user session: the id of another user's chat this page asked for


def open_refused_chats_as_new() -> None:
    """Chainlit refuses a chat socket that asks for another user's chat (``/thread/<id>``: connect raises
    ConnectionRefusedError "authorization failed"), and its page then shows "Could not reach the server" with the
    composer off until a reload (issue 35 item 7). Connect such a socket again without the chat: Chainlit's own
    check has refused the chat (nothing of it is loaded), and the page gets a new chat of the user's own, whose
    user session holds ``REFUSED_CHAT``. A socket refused for anything else (its login) is refused again."""
    import chainlit.socket  # noqa: F401 - registers Chainlit's handlers on its server
    from chainlit.server import sio
    from chainlit.user_session import user_sessions

    handlers = sio.handlers["/"]
    connect = handlers["connect"]
    if _wraps(connect, _GATED):
        return

    async def connect_or_open_new(sid: str, environ: dict, auth: Any) -> Any:
        try:
            return await connect(sid, environ, auth)
        except ConnectionRefusedError:
            if not (isinstance(auth, dict) and auth.get("threadId")):
                raise
            accepted = await connect(sid, environ, {**auth, "threadId": None})  # raises again if the login is refused
            user_sessions.setdefault(auth["sessionId"], {})[REFUSED_CHAT] = auth["threadId"]
            return accepted

    setattr(connect_or_open_new, _GATED, True)
    connect_or_open_new.__wrapped__ = connect  # type: ignore[attr-defined]
    handlers["connect"] = connect_or_open_new


def _wraps(handler: Any, mark: str) -> bool:
    """Whether ``handler``, or a handler it wraps (``__wrapped__``), carries ``mark``: two wrappers of Chainlit's
    connect handler are installed each time an app is made, in turn, and each must wrap it once however they nest."""
    while handler is not None:
        if getattr(handler, mark, False):
            return True
        handler = getattr(handler, "__wrapped__", None)
    return False


async def leave_refused_chat(line: str) -> None:
    """Take the page away from the refused chat's address: Chainlit's page answers "resume_thread_error" with a
    toast ("Couldn't resume chat: " + ``line``) and a move to "/", where the new chat's composer works. Without it
    the page waits for that chat forever (a spinner, no composer)."""
    import chainlit as cl

    await cl.context.emitter.send_resume_thread_error(line)


# ----- a closed tab's chat, out of memory until the tab comes back ----------------------------------------------
def held_messages(session: Any) -> list[Any]:
    """The messages Chainlit holds for this tab's chat (``chat_contexts``): every prompt is built from them."""
    from chainlit.chat_context import chat_contexts

    return list(chat_contexts.get(session.id, ()))


def drop_held_messages(session: Any) -> None:
    """Let go of this tab's messages (the documents' text in their metadata with them); ``chat_context`` starts
    an empty list for the tab on its next use."""
    from chainlit.chat_context import chat_contexts

    chat_contexts.pop(session.id, None)


def messages_from_steps(session: Any, steps: Iterable[Any]) -> list[Any]:
    """This tab's messages from its chat's stored steps, as Chainlit's resume makes them (chainlit/socket.py
    ``connection_successful``: ``Message.from_dict`` of each message step, in the session's context, which gives
    each message its chat id)."""
    import contextvars

    from chainlit.context import init_ws_context
    from chainlit.message import Message

    def made() -> list[Any]:
        init_ws_context(session)
        return [Message.from_dict(step) for step in steps if "message" in str(step.get("type") or "")]

    return contextvars.copy_context().run(made)  # the caller's own context is left as it was


def hold_messages(session: Any, messages: list[Any]) -> None:
    """Make ``messages`` this tab's chat, in place of whatever it holds."""
    from chainlit.chat_context import chat_contexts

    chat_contexts[session.id] = list(messages)


def make_room_for_resumed_messages(thread: dict[str, Any]) -> None:
    """Take out of this tab's chat the messages of ``thread`` that Chainlit is about to add to it. Chainlit resumes a
    chat (chainlit/socket.py ``connection_successful``) by calling on_chat_resume, then adding each of its stored
    messages to the chat's context, whatever it holds already (``chat_context.add`` skips only the same objects). A
    tab opened on a chat's address connects with the chat's id, and a socket that comes back to its session after a
    network blip is resumed again: every message was held twice, and the next prompt held each turn twice (1,373
    tokens instead of 722). Called last in on_chat_resume: nothing is awaited between it and Chainlit's adds."""
    import chainlit as cl

    coming = {step.get("id") for step in thread.get("steps") or () if "message" in str(step.get("type") or "")}
    for message in cl.chat_context.get():
        if message.id in coming:
            cl.chat_context.remove(message)


_TAB_BACK = "__ernie_chat_tab_back__"  # marks the connect wrapper of ``when_a_tab_comes_back``
TabBack = Callable[[Any], Awaitable[None]]


def when_a_tab_comes_back(back: TabBack) -> None:
    """Await ``back(session)`` when a socket connects to a session Chainlit kept (the page's socket.io reconnects
    with the same ``sessionId`` after a network blip, within ``session_timeout``), before the socket is accepted:
    the page sends nothing until then, so the chat ``back`` puts in place is there for its next message. An
    exception from ``back`` refuses the socket.

    Chainlit's ``restore_existing_session`` (chainlit/socket.py), which gives the kept session the new socket, is
    a plain function its connect handler calls, with no hook and nothing awaited: the connect handler is wrapped,
    and a session restored is the one the tab's ``sessionId`` named before Chainlit's handler ran, now this
    socket's. A later call replaces ``back`` (an app made again in the same process, as tests do)."""
    import chainlit.socket  # noqa: F401 - registers Chainlit's handlers on its server
    from chainlit.server import sio
    from chainlit.session import WebsocketSession

    _TAB_BACK_CALL[0] = back
    handlers = sio.handlers["/"]
    connect = handlers["connect"]
    if _wraps(connect, _TAB_BACK):
        return

    async def connect_then_restore(sid: str, environ: dict, auth: Any) -> Any:
        session_id = auth.get("sessionId") if isinstance(auth, dict) else None
        kept = WebsocketSession.get_by_id(session_id) if isinstance(session_id, str) else None
        accepted = await connect(sid, environ, auth)
        if kept is not None and WebsocketSession.get(sid) is kept:
            await _TAB_BACK_CALL[0](kept)
        return accepted

    setattr(connect_then_restore, _TAB_BACK, True)
    connect_then_restore.__wrapped__ = connect  # type: ignore[attr-defined]
    handlers["connect"] = connect_then_restore


async def _nothing_to_restore(session: Any) -> None:
    return None


_TAB_BACK_CALL: list[TabBack] = [_nothing_to_restore]


# ----- which login Chainlit offers ------------------------------------------------------------------------------
_LOGIN_CALLBACKS: dict[str, Any] = {}  # the callbacks the app registered, kept while Chainlit is told to hide one


def follow_login_mode(asks_for_login: bool) -> None:
    """Chainlit offers its login form when ``config.code.password_auth_callback`` is set, and logs the page in from
    its headers (our local user, app/guards/local_user.py) when ``header_auth_callback`` is; it reads both on each
    /auth/config and login. An app started without users registers both, and this sets only the one for the mode in
    force: the local user until a user is added, then the form (issue 35 item 6)."""
    from chainlit.config import config

    code = config.code
    for name in ("password_auth_callback", "header_auth_callback"):
        if getattr(code, name) is not None:  # registered (again) since the last call: that one is kept
            _LOGIN_CALLBACKS[name] = getattr(code, name)
    code.password_auth_callback = _LOGIN_CALLBACKS.get("password_auth_callback") if asks_for_login else None
    code.header_auth_callback = None if asks_for_login else _LOGIN_CALLBACKS.get("header_auth_callback")


# ----- what the page sends over the socket, and chat sharing ----------------------------------------------
def check_socket_event(event: str, check: Callable[[Any], Any]) -> None:
    """Run ``check`` on the payload of the page's socket ``event`` before Chainlit's own handler sees it (and
    stores it): Chainlit registers its handlers on its python-socketio server (``chainlit.server.sio``, handlers
    kept per namespace in ``sio.handlers``) and takes what the page sends as it is."""
    from chainlit.server import sio

    handle = sio.handlers["/"][event]

    async def checked(sid: str, payload: Any) -> Any:
        return await handle(sid, check(payload))

    sio.on(event, checked)


def thread_sharing_allowed() -> bool:
    """``features.allow_thread_sharing`` of .chainlit/config.toml (default false). Chainlit 2.12 reads it only to
    tell the page whether to show a share button: its share routes work whatever it says."""
    from chainlit.config import config

    return bool(getattr(config.features, "allow_thread_sharing", False))


def element_file_url(root_path: str, chainlit_key: str, session_id: str) -> str:
    """Where the page reads a session element's content: the URL its ``element`` event handler builds from the
    element's ``chainlitKey`` (``getElementUrl``). The page builds none for the elements of a chat it is sent
    whole (``resume_thread``), so an element added to such a chat carries it."""
    return f"{root_path}{CHAINLIT_FILE_ROUTE}/{chainlit_key}?session_id={session_id}"


# ----- an edited question: the turns it replaces are kept ------------------------------------------------------
_KEEPS_EDITS = "__ernie_chat_keeps_edits__"  # marks the wrapped edit handler, so a second call leaves it as it is
# keep(question, later messages, new text, whether the branches were free to hold) -> whether to edit
EditKeeper = Callable[[Any, list[Any], str, bool], Awaitable[bool]]


def keep_turns_on_edit(keep: EditKeeper) -> None:
    """Chainlit's ``edit_message`` handler (chainlit/socket.py) sets the message's new text, ``remove()``s every
    later message of the chat (deleting them from the page and, through our data layer, from the database) and
    calls on_message. Before it does, ``keep(question, later messages, new text, free)`` runs in the chat's
    context; it keeps what would be removed, or returns False to drop the edit (Chainlit's handler is not called).
    The question's branches are held (``branches_held``) from the keeper until Chainlit's handler returns, its
    removal done (and the answer it starts, during which no switch is made anyway); ``free`` is False when another
    switch or edit held them first, and the keeper must then refuse. An edit of
    anything but a shown user message (the page offers it on those only) is dropped too. A later call replaces
    ``keep`` (an app made again in the same process, as tests do)."""
    import chainlit.socket  # noqa: F401 - registers Chainlit's handlers on its server
    from chainlit.chat_context import chat_context
    from chainlit.context import init_ws_context
    from chainlit.server import sio
    from chainlit.session import WebsocketSession

    _EDIT_KEEPER[0] = keep
    handlers = sio.handlers["/"]
    edit = handlers["edit_message"]
    if getattr(edit, _KEEPS_EDITS, False):
        return

    async def kept_then_edited(sid: str, payload: Any) -> Any:
        message = payload.get("message") if isinstance(payload, dict) else None
        asked_id = message.get("id") if isinstance(message, dict) else None
        new_text = message.get("output") if isinstance(message, dict) else None
        session = WebsocketSession.get(sid)
        if session is None or not isinstance(asked_id, str) or not isinstance(new_text, str):
            return None
        init_ws_context(session)
        shown = chat_context.get()
        place = next((n for n, m in enumerate(shown) if m.id == asked_id and m.type == "user_message"), None)
        if place is None:
            return None
        with branches_held() as free:
            if not await _EDIT_KEEPER[0](shown[place], shown[place + 1:], new_text, free) or not free:
                return None
            return await edit(sid, payload)

    setattr(kept_then_edited, _KEEPS_EDITS, True)
    handlers["edit_message"] = kept_then_edited


async def _keep_nothing(question: Any, later: list[Any], new_text: str, free: bool) -> bool:
    return free


_EDIT_KEEPER: list[EditKeeper] = [_keep_nothing]
