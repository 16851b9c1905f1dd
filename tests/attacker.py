"""A web page on another origin, as issue 16's attacker: a real HTTP server on its own port that serves a
page and counts what browsers fetch from it, and the socket.io handshake a page can try against the app."""
from __future__ import annotations

import contextlib
import http.server
import threading

from tests.support.app_process import free_port

# Opens Chainlit's socket the way its page does (engine.io v4 over a websocket, then socket.io's connect
# packet with Chainlit's auth fields). 'connected' means the server accepted a chat session.
SOCKET_PROBE_JS = """async (base) => await new Promise(resolve => {
  const ws = new WebSocket(base.replace(/^http/, 'ws') + '/ws/socket.io/?EIO=4&transport=websocket');
  const done = (what) => { resolve(what); try { ws.close(); } catch (e) {} };
  ws.onmessage = (e) => {
    if (e.data.startsWith('0{')) ws.send('40' + JSON.stringify({sessionId: 's' + Math.random(),
        clientType: 'webapp', userEnv: '{}', chatProfile: null, threadId: null}));
    else if (e.data.startsWith('40')) done('connected');
    else if (e.data.startsWith('44')) done('refused by socket.io: ' + e.data);
    else if (e.data === '2') ws.send('3');
  };
  ws.onerror = () => done('handshake failed');
  setTimeout(() => done('timeout'), 15000);
})"""


class AttackerSite:
    """http://127.0.0.1:<port>/ serving one HTML page; ``hits`` lists every path a browser asked for."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.hits: list[str] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                site.hits.append(self.path)
                body = b"<!doctype html><title>another site</title><p>hello</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if self.path == "/" else "image/png")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def attacker_site():
    site = AttackerSite()
    try:
        yield site
    finally:
        site.close()
