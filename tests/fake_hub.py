"""A local stand-in for the Hugging Face Hub, serving one model folder over HTTP.

No model hub is reachable from the test machines, yet the download path (first run, progress, offline
cache, unreachable hub) must run for real: this serves a folder the tests built (the tiny model) through
the few routes ``huggingface_hub.snapshot_download`` calls (repo info, tree listing, file HEAD/GET). Files
are sent in chunks with a short pause, so a progress display has something to show.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """``with FakeHub("baidu/ERNIE-4.5-0.3B-PT", folder) as hub:`` then point HF_ENDPOINT at ``hub.url``."""

    def __init__(self, repo_id: str, folder: Path, chunk_pause_s: float = 0.0) -> None:
        self.repo_id = repo_id
        self.files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
                      if p.is_file()}
        self.chunk_pause_s = chunk_pause_s
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _send(self, code: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head and body:
                    step = max(1, len(body) // 8)
                    for start in range(0, len(body), step):
                        self.wfile.write(body[start:start + step])
                        self.wfile.flush()
                        time.sleep(hub.chunk_pause_s)

            def _json(self, value: object) -> None:
                self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

            def _route(self, head: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                models = f"/api/models/{hub.repo_id}"
                if path.startswith(models + "/revision/"):
                    return self._json({"id": hub.repo_id, "modelId": hub.repo_id, "sha": COMMIT, "private": False,
                                       "siblings": [{"rfilename": name} for name in hub.files]})
                if path.startswith(models + "/tree/"):
                    return self._json([{"type": "file", "path": name, "size": len(data), "oid": _git_blob_id(data)}
                                       for name, data in hub.files.items()])
                prefix = f"/{hub.repo_id}/resolve/"
                if path.startswith(prefix):
                    name = path[len(prefix):].split("/", 1)[1]
                    if name in hub.files:
                        data = hub.files[name]
                        return self._send(200, data, {"X-Repo-Commit": COMMIT, "ETag": f'"{_git_blob_id(data)}"',
                                                      "Content-Type": "application/octet-stream"}, head)
                if path.startswith("/api/models/") or "/resolve/" in path:
                    return self._send(404, b'{"error":"Repository not found"}',
                                      {"X-Error-Code": "RepoNotFound", "Content-Type": "application/json"}, head)
                return self._send(404, b"not found", head=head)

            def do_GET(self) -> None:
                self._route(head=False)

            def do_HEAD(self) -> None:
                self._route(head=True)

        return Handler
