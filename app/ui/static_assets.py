"""The page's own files, served by the app: KaTeX's CSS and fonts, and ernie-chat's page style and script.

Chainlit's page links KaTeX 0.16.22's CSS from cdn.jsdelivr.net; offline the page hung waiting for it,
so that link is stripped (server.OfflinePageMiddleware) and the same version is vendored in
app/ui/static/katex (npm `katex@0.16.22`, MIT: the CSS and its woff2 fonts, 332 KB; every current browser
takes woff2, so the CSS's woff/ttf fallbacks are left out).

Chainlit links one stylesheet and one script of the app's (.chainlit/config.toml ``custom_css``,
``custom_js``, prefixed with --root-path behind a proxy): app/ui/static/ui/face.css (which imports KaTeX's
CSS) and face.js (the status panel on a phone; it loads paste_to_file.js, a long paste becomes a file). The
logo and favicon are Chainlit's to serve, from public/.
"""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).with_name("static")
# URL -> folder under app/static
MOUNTS = {"/katex": "katex", "/ui": "ui"}


def mount_static_assets(app: FastAPI) -> None:
    """Serve them (before Chainlit is mounted: its catch-all route would shadow them)."""
    for url, folder in MOUNTS.items():
        app.mount(url, StaticFiles(directory=STATIC_DIR / folder), name=folder)
