"""What more than one test module (and the bench scripts) use: start `python launch.py` as a subprocess on a
free port, poll it, stop it, and find its children (the pattern of vLLM's RemoteOpenAIServer: fail fast if the
process dies, kill children at teardown); chat with it from a browser page or over its socket; and a stand-in
engine for EngineHost tests. Test modules import from here, never from each other."""
from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import psutil

if TYPE_CHECKING:
    import httpx
    import socketio

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 3.0, headers: Optional[dict] = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class LaunchedApp:
    """``terminal=True`` runs it on a pseudo-terminal, as in a user's shell (progress bar, no vLLM INFO); ``root``: the
    checkout whose launch.py runs (a benchmark compares an older one)."""

    def __init__(self, model_dir: Path, tmp: Path, *extra: str, env: Optional[dict] = None,
                 terminal: bool = False, root: Path = ROOT) -> None:
        self.port = free_port()
        self.log_file = tmp / "llm.log"
        self.stdout = open(tmp / "stdout.txt", "w+")
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--model", str(model_dir), "--port", str(self.port), "--log-file", str(self.log_file), *extra]
        # ERNIE_CHAT_OPEN=0: a developer's desktop must not get a browser window per launched test app.
        full_env = {**os.environ, "ERNIE_CHAT_OPEN": "0", **(env or {})}
        self.started = time.time()
        if terminal:
            primary, secondary = pty.openpty()
            # 40 rows x 160 columns, like a terminal window (a fresh pty reports 0 x 0)
            fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
            self.proc = subprocess.Popen([sys.executable, "launch.py", *self.args], cwd=root, env=full_env,
                                         stdout=secondary, stderr=secondary, stdin=subprocess.DEVNULL)
            os.close(secondary)
            threading.Thread(target=self._copy_terminal, args=(primary,), daemon=True).start()
        else:
            self.proc = subprocess.Popen([sys.executable, "launch.py", *self.args], cwd=root, env=full_env,
                                         stdout=self.stdout, stderr=subprocess.STDOUT)

    def _copy_terminal(self, fd: int) -> None:
        with open(self.stdout.name, "ab") as out:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the app closed the terminal (exited)
                    break
                if not chunk:
                    break
                out.write(chunk)
                out.flush()
        os.close(fd)

    def output(self) -> str:
        self.stdout.flush()
        return Path(self.stdout.name).read_text(errors="replace")

    def wait_http(self, timeout: float = 60) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"launch.py exited {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                if get(self.url + "/healthz", 1)[0] == 200:
                    return time.time() - self.started
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError("no HTTP answer")

    def readyz(self) -> tuple[int, dict]:
        code, body = get(self.url + "/readyz")
        return code, json.loads(body)

    def wait_ready(self, timeout: float = 300) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"launch.py exited {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                if self.readyz()[0] == 200:
                    return time.time() - self.started
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"not ready:\n{self.output()[-3000:]}")

    def descendants(self) -> list[int]:
        try:
            return [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def descendant_names(self) -> list[str]:
        names = []
        for pid in self.descendants():
            with contextlib.suppress(psutil.NoSuchProcess):
                names.append(psutil.Process(pid).name())
        return names

    def check(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "launch.py", "check", "--port", str(self.port),
                               "--log-file", str(self.log_file), *self._root_path_args()],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)

    def _root_path_args(self) -> list[str]:
        if "--root-path" in self.args:
            return ["--root-path", self.args[self.args.index("--root-path") + 1]]
        return []

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30) -> float:
        start = time.time()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return time.time() - start

    def kill(self) -> None:
        for pid in self.descendants():
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def alive(process: psutil.Process) -> bool:
    """Running, and not a zombie (a killed process whose parent has not reaped it is gone for every purpose)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def engine_processes(pid: int) -> list[psutil.Process]:
    """vLLM's processes (VLLM::EngineCore, VLLM::Worker, ...) below the process ``pid``."""
    from app.engine.orphan_guard import is_engine_process

    found = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if is_engine_process(process.name(), " ".join(process.cmdline())):
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


@contextlib.contextmanager
def running_app(model_dir: Path, tmp: Path, *extra: str, env: Optional[dict] = None):
    """A launched app, ready to chat; stopped (and its children killed) afterwards."""
    app = LaunchedApp(model_dir, tmp, *extra, env=env)
    try:
        app.wait_http()
        app.wait_ready()
        yield app
    finally:
        app.stop()
        app.kill()


def metric_value(text: str, name: str) -> float:
    """Sum of a Prometheus series' samples (all labels)."""
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    if not found:
        raise KeyError(name)
    return total


def status_panel_text(page, *words: str, timeout_ms: int = 15000) -> str:
    """The status panel's text once it holds every one of `words`.

    The panel is a side element whose text the page fetches anew when it redraws (a new state, the move to
    the chat's own address): read right after one word shows, it can be empty for a moment.
    """
    page.wait_for_function(
        """words => { const el = document.querySelector('#side-view-content');
                     return !!el && words.every(w => el.innerText.includes(w)); }""",
        arg=list(words), timeout=timeout_ms)
    return page.inner_text("#side-view-content")


PHONE = {"width": 390, "height": 844}
NARROW_BELOW = 768  # Chainlit's own breakpoint: below it a side element is a sheet over the chat


def wait_chat_opened(page, locale: str = "en-US", timeout_ms: int = 30000) -> None:
    """The chat's socket is up and its status panel drawn (on_chat_start): on a wide page the panel shows the
    engine's ready word in the page's language; on a phone the sheet nobody asked for came and was closed
    (app/ui/static/ui/face.js counts it on <html>)."""
    from app.i18n import t

    page.wait_for_selector("#chat-input", timeout=timeout_ms)
    if page.viewport_size["width"] < NARROW_BELOW:
        page.wait_for_function("() => Number(document.documentElement.dataset.unaskedStatusClosed || 0) > 0",
                               timeout=timeout_ms)
    else:
        page.locator("#side-view-content").get_by_text(t(locale, "state_ready")).wait_for(timeout=timeout_ms)


def covering(locator) -> str:
    """What a tap at the element's centre reaches instead of it: '' when it reaches the element (in the viewport,
    on top), else what is there (the start of its HTML) or where the element is (outside the viewport)."""
    return locator.evaluate("""e => { const r = e.getBoundingClientRect();
        const x = r.left + r.width / 2, y = r.top + r.height / 2;
        if (r.width === 0 || x < 0 || y < 0 || x > innerWidth || y > innerHeight)
            return 'outside the viewport: ' + JSON.stringify(r);
        const hit = document.elementFromPoint(x, y);
        return hit && (e === hit || e.contains(hit)) ? '' : (hit ? hit.outerHTML.slice(0, 300) : 'nothing'); }""")


# The stats line under a finished answer (app/ui/streamed_answer.py), English UI.
STATS_EN = re.compile(r"prompt (\d+) tokens · answer (\d+) tokens · first token ([\d.]+) s · ([\d.]+) tokens/s")


def wait_stats(page, count, pattern=STATS_EN, timeout=60):
    """Wait for the count-th finished answer (its stats line) and return the numbers."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = pattern.findall(page.inner_text("body"))
        if len(found) >= count:
            return found[count - 1]
        time.sleep(0.2)
    raise AssertionError(f"no stats line #{count}; page says:\n{page.inner_text('body')[-1500:]}")


def send(page, text):
    page.fill("#chat-input", text)
    page.click("#chat-submit")  # not Enter: on a phone-width page Enter adds a new line


def sign_in(page, name: str, secret: str) -> None:
    """Fill in and send Chainlit's login form."""
    page.fill("#email", name)
    page.fill("#password", secret)
    page.click("button[type=submit]")


def open_sidebar(page):
    """The history sidebar, opened (and waited for) as a user opens it."""
    history = page.locator("#thread-history")
    history.wait_for(state="attached", timeout=10000)
    # A closed sidebar is still in the page, slid out of the viewport (the UI starts with it closed).
    if history.evaluate("e => e.getBoundingClientRect().right <= 0"):
        page.locator("#header #sidebar-trigger-button").click()
    page.wait_for_function("() => document.querySelector('#thread-history').getBoundingClientRect().left >= 0",
                           timeout=10000)


def set_max_answer_tokens(page, key):
    page.click("#chat-settings-open-modal")
    slider = page.get_by_role("slider").last
    slider.wait_for(timeout=10000)
    slider.focus()
    page.keyboard.press(key)  # Home -> 16 tokens, End -> the cap
    page.click("#confirm")


def attach(page, *paths: Path) -> None:
    """Pick files with Chainlit's upload button (the composer's paperclip) and wait until the server has taken
    every one: the page sends a message with only the files already uploaded."""
    done = []
    page.on("response", lambda r: done.append(r.status) if r.request.method == "POST" and "/project/file" in r.url
            else None)
    page.set_input_files("#upload-button-input", [str(p) for p in paths])
    while len(done) < len(paths):
        page.wait_for_event("response", timeout=30000)
    assert done == [200] * len(paths), done


def prompt_tokens(app):
    """The engine's own count of prompt tokens it has taken (vLLM's counter)."""
    return metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")


def generated_tokens(app):
    return metric_value(get(app.url + "/metrics")[1], "vllm:generation_tokens_total")


def finished_requests(app, reason: str) -> float:
    """Requests the engine finished for ``reason`` ("stop": an end token, "length": max_tokens; vLLM's counter)."""
    text = get(app.url + "/metrics")[1]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{") and f'finished_reason="{reason}"' in line)


def running_requests(app):
    return metric_value(get(app.url + "/metrics")[1], "vllm:num_requests_running")


async def socket_connect(app, client: httpx.Client, thread_id: str, events: list,
                         session_id: Optional[str] = None) -> socketio.AsyncClient:
    """Chainlit's chat socket, opened as the page opens it (socket.io, the login cookie of ``client``, or its
    Authorization header where it has one); what the app sends lands in ``events`` as (name, data). Files are
    uploaded to the session ``session_id`` (POST /project/file?session_id=...)."""
    import socketio

    sio = socketio.AsyncClient(reconnection=False)
    headers = {"Cookie": f"access_token={client.cookies.get('access_token')}"}
    if "authorization" in client.headers:
        headers["Authorization"] = client.headers["authorization"]
    for name in ("resume_thread", "new_message", "update_message", "first_interaction"):
        sio.on(name, (lambda n: lambda data=None: events.append((n, data)))(name))
    await sio.connect(app.url, socketio_path="/ws/socket.io", transports=["websocket"],
                      headers=headers,
                      auth={"sessionId": session_id or str(uuid.uuid4()), "threadId": thread_id, "clientType": "webapp",
                            "userEnv": "{}"}, wait_timeout=20)
    await sio.emit("connection_successful")
    return sio


def finished_answer(events: list) -> str | None:
    """The text of the first finished answer among the socket's events (it ends with its stats line)."""
    for name, data in events:
        if (name in ("new_message", "update_message") and isinstance(data, dict)
                and data.get("type") == "assistant_message" and "prompt" in (data.get("output") or "")):
            return data["output"]
    return None


async def answer_over_socket(app, client: httpx.Client, thread_id: str, text: str, events: list,
                             also: Callable[[list], bool] = lambda events: True) -> tuple[float, str]:
    """Send one message as the page does; seconds until its answer is finished, and the answer. ``also``: what
    else the events must hold before the socket closes (a notice that follows the answer)."""
    sio = await socket_connect(app, client, thread_id, events)
    try:
        started = time.monotonic()
        await sio.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "local",
            "output": text, "createdAt": "2026-12-04T10:00:00.000Z"}, "fileReferences": []})
        seconds = None
        while time.monotonic() - started < 120:
            answer = finished_answer(events)
            if answer is not None and seconds is None:
                seconds = time.monotonic() - started
            if answer is not None and also(events):
                return seconds, answer
            await asyncio.sleep(0.1)
        raise AssertionError(f"no answer; events: {[e for e, _ in events][-10:]}")
    finally:
        await sio.disconnect()


def upload_request(session_id: str, name: str, body: bytes) -> dict:
    """The arguments of ``client.post`` that send a file to Chainlit's upload route as the page sends it. The
    multipart body is written by hand: httpx escapes control characters in a file name, a hostile client need not."""
    boundary = uuid.uuid4().hex
    form = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: text/plain\r\n\r\n").encode() + body + f"\r\n--{boundary}--\r\n".encode()
    return {"url": "/project/file", "params": {"session_id": session_id}, "content": form,
            "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}


def upload(client: httpx.Client, session_id: str, name: str, body: bytes) -> str:
    """A file uploaded to the tab ``session_id``; its id."""
    answer = client.post(**upload_request(session_id, name, body))
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


async def send_and_wait(app, client: httpx.Client, thread_id: str, message: dict,
                        files: tuple[tuple[str, bytes], ...] = (), wait_s: float = 180) -> str:
    """Send ``message`` (the page's fields, overridden by what is given) down the socket, with ``files`` (name,
    contents) uploaded first; its finished answer (within ``wait_s``)."""
    events: list = []
    session_id = str(uuid.uuid4())
    sio = await socket_connect(app, client, thread_id, events, session_id=session_id)
    try:
        references = [{"id": upload(client, session_id, name, body)} for name, body in files]
        await sio.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "alice",
            "output": "what is in the file?", "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "metadata": {"location": app.url}, **message}, "fileReferences": references})
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            answer = finished_answer(events)
            if answer is not None:
                return answer
            await asyncio.sleep(0.2)
        raise AssertionError(f"no answer; events: {[e for e, _ in events][-10:]}")
    finally:
        await sio.disconnect()


async def logged_in_user(layer, identifier: str):
    """A user made as Chainlit makes one at login, and set as the current request's user (whom the data layer
    checks and stamps on new chats)."""
    from chainlit.context import init_http_context
    from chainlit.user import User

    user = await layer.create_user(User(identifier=identifier))
    init_http_context(user=user)
    return user


def history_states_until(app, final: str, deadline_s: float = 30) -> list[str]:
    """/readyz's history state, read until it starts with ``final``: every distinct state seen, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        state = app.readyz()[1]["history"]
        if not seen or seen[-1].split()[0] != state.split()[0]:  # "waiting 4 s ...", "waiting 5 s ...": one state
            seen.append(state)
        if state.startswith(final):
            return seen
        time.sleep(0.2)
    raise AssertionError(f"/readyz history never read {final!r}: {seen}")


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
