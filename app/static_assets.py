"""KaTeX's CSS and fonts, served by the app itself so LaTeX renders and the page still loads offline.

Chainlit's page links KaTeX 0.16.22's CSS from cdn.jsdelivr.net; offline the page hung waiting for it,
so that link is stripped (server.OfflinePageMiddleware) and the same version is vendored in
app/static/katex (npm `katex@0.16.22`, MIT: the CSS and its woff2 fonts, 332 KB; every current browser
takes woff2, so the CSS's woff/ttf fallbacks are left out). .chainlit/config.toml's
``custom_css = "/katex/katex.min.css"`` links it; Chainlit prefixes it with --root-path behind a proxy.
"""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

KATEX_DIR = Path(__file__).with_name("static") / "katex"
KATEX_URL = "/katex"


def mount_katex(app: FastAPI) -> None:
    """Serve KaTeX under /katex (before Chainlit is mounted: its catch-all route would shadow it)."""
    app.mount(KATEX_URL, StaticFiles(directory=KATEX_DIR), name="katex")
