"""The web app: our routes first, then Chainlit mounted under them, one process, one port.

Chainlit is mounted into our FastAPI app (``mount_chainlit``) rather than run by ``run_chainlit``: its
catch-all route would shadow routes added later (Chainlit #1819), and its own lifespan ends in
``os._exit(0)``, which would orphan vLLM's engine processes. Our lifespan starts the engine in the
background and shuts it down before the process exits.
"""
from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import os
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.middleware.base import BaseHTTPMiddleware

from app.chainlit_internals import use_files_directory
from app.engine.orphan_guard import FILES_PREFIX
from app.engine.status import EngineState
from app.guards import install_guards
from app.history.writer import SLOW_SAVE_S
from app.private_files import make_private_temp_folder
from app.runtime import Runtime, set_current_runtime

log = logging.getLogger("ernie_chat.server")
CHAINLIT_TARGET = str(Path(__file__).with_name("ui") / "chainlit_app.py")
# Chainlit's page pulls Google Fonts and KaTeX CSS from CDNs; offline (dropped packets) the page hangs
# until they time out. The system font stack is fine; KaTeX's CSS is served by the app (app/ui/static_assets.py).
_CDN_TAGS = re.compile(r'<link[^>]+(fonts\.googleapis\.com|fonts\.gstatic\.com|cdn\.jsdelivr\.net)[^>]*>')


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime


class OfflinePageMiddleware(BaseHTTPMiddleware):
    """Strip CDN <link> tags from the HTML page (only text/html GETs; everything else passes untouched)."""

    async def dispatch(self, request: Request, call_next):
        response = await call_next(request)
        if request.method != "GET" or not response.headers.get("content-type", "").startswith("text/html"):
            return response
        body = b"".join([chunk async for chunk in response.body_iterator])
        if response.headers.get("content-encoding") == "gzip":  # Chainlit gzips its page
            body = gzip.decompress(body)
        html = _CDN_TAGS.sub("", body.decode("utf-8"))
        headers = {k: v for k, v in response.headers.items()
                   if k.lower() not in ("content-length", "content-encoding")}
        return Response(html, status_code=response.status_code, headers=headers, media_type="text/html")


def private_files_dir() -> Path:
    """Give this process its own folder for Chainlit's per-chat files (the status panel's text, uploads).

    Chainlit keeps them under <project>/.files, creates that folder once (at import) and deletes all of it when
    one of its servers stops: another Chainlit app run from the same folder (a second ernie-chat, the tests'
    Markdown echo app) took the running app's folder away, and its status panel could no longer be drawn.
    A private folder (mode 0700: other local users cannot read chats' files) is removed by our lifespan."""
    # Named with this pid, so that a later start removes it if this process is killed (app/engine/orphan_guard.py).
    folder = make_private_temp_folder(f"{FILES_PREFIX}{os.getpid()}-")
    use_files_directory(folder)
    return folder


def _history_state(rt: Runtime) -> str:
    """Whether chats are being saved: answers go on either way, so this does not make the app unready."""
    store = rt.history
    if store is None:
        return "off"
    if store.write_failing:
        return f"not saving: {store.last_error}"
    waited = store.unsaved_seconds
    return f"waiting {waited:.0f} s for the database" if waited > SLOW_SAVE_S else "saving"


def create_app(runtime: Runtime) -> FastAPI:
    """Build the app: /healthz, /readyz, /metrics, then the Chainlit UI at the root."""
    set_current_runtime(runtime)
    files_dir = private_files_dir()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The first step of the log's timeline: what the imports and set-up before listening cost.
        log.info("web server starts %.1fs after launch", time.time() - runtime.host.launched_at)
        runtime.host.start_in_background()
        from app.ui.chat import keep_forgetting_closed_chats

        janitor = asyncio.create_task(keep_forgetting_closed_chats(), name="forget-closed-chats")
        from app.guards.account_sockets import keep_closing_ended_logins

        ended_logins = asyncio.create_task(keep_closing_ended_logins(runtime.login), name="close-ended-logins")
        watch = runtime.gpu_memory
        sampler = asyncio.create_task(watch.follow(lambda: runtime.host.gate.active > 0, runtime.metrics),
                                      name="gpu-memory-sampler") if watch else None
        try:
            yield
        finally:
            janitor.cancel()
            ended_logins.cancel()
            if sampler:
                sampler.cancel()
            log.info("shutdown: stopping the engine")
            await runtime.host.shutdown()
            log.info("shutdown: engine stopped")
            if runtime.history is not None:  # the chat database's last queued writes
                await runtime.history.close()
                log.info("shutdown: chat database closed")
            shutil.rmtree(files_dir, ignore_errors=True)

    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None,
                  root_path=runtime.settings.server.root_path)
    app.state.runtime = runtime

    @app.get("/healthz")
    async def healthz() -> dict:
        """The process is up (answers at once, even while the model loads)."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        """200 only when the engine answers its health check; 503 with the state otherwise."""
        rt = runtime_of(request)
        status = {**rt.host.status.to_dict(), "history": _history_state(rt)}
        if rt.host.status.state is EngineState.READY:
            problem = await rt.host.health_problem()
            if problem is None:
                return JSONResponse({"ready": True, **status})
            status = {**status, "state": "unhealthy", "detail": problem}
        return JSONResponse({"ready": False, **status}, status_code=503)

    @app.get("/metrics")
    async def metrics(request: Request) -> PlainTextResponse:
        """Prometheus text: vLLM's own series (the engine process's) and the app's."""
        from prometheus_client import generate_latest

        rt = runtime_of(request)
        body = await asyncio.to_thread(rt.engine_metrics) + generate_latest(rt.metrics.registry)
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4")

    from app.api import build_router

    app.include_router(build_router())
    from app.ui.chat_history import history_router

    app.include_router(history_router())  # /history/chats/{id}/export.md|json

    from chainlit.utils import mount_chainlit

    from app.ui.branding import show_model
    from app.ui.static_assets import mount_static_assets

    mount_static_assets(app)
    # the page's title and welcome text, and the app's icon as the avatar
    show_model(runtime.settings.model.model, files_dir / "welcome", runtime.settings.server.root_path)
    mount_chainlit(app, CHAINLIT_TARGET, path="")
    app.add_middleware(OfflinePageMiddleware)
    install_guards(app, runtime)  # app/guards: feedback owner, API token, login rules, Host/Origin/size outermost
    return app
