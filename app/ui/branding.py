"""The app's face: its own name and pictures, and the model it serves named in the page title and welcome text.

Any model may be served (``--model`` pointed at SmolLM2 is what the tests run), so nothing on the page may say
ERNIE unless ERNIE runs. Chainlit writes the page's ``<title>`` from ``config.ui.name`` and reads the welcome
text from ``chainlit[_<language>].md`` in ``config.root`` on every page load (chainlit/server.py
``get_html_template``, ``/project/settings``); the welcome files in the project are templates with
``{model}`` where the model's name goes, written out, filled in, into a private folder Chainlit is pointed
at. The logo and favicon are files in ``public/`` (drawn by scripts/draw_brand.py), served by Chainlit's
``/logo`` and ``/favicon``.
"""
from __future__ import annotations

from pathlib import Path

from app.chainlit_internals import avatar_for_everyone, name_the_page
from app.private_files import make_private_folder
from app.settings import PROJECT_ROOT

APP_NAME = "ernie-chat"
MODEL_PLACEHOLDER = "{model}"
# Chainlit's default welcome file and its per-language ones (the page asks for its browser's language).
WELCOME_FILES = ("chainlit.md", "chainlit_en-US.md", "chainlit_zh-CN.md")


def model_name(model: str) -> str:
    """The model's own name from its folder or hub id: 'baidu/ERNIE-4.5-0.3B-PT' -> 'ERNIE-4.5-0.3B-PT'."""
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def page_title(model: str) -> str:
    """'SmolLM2-135M-Instruct · ernie-chat': what is served, then the app serving it."""
    return f"{model_name(model)} · {APP_NAME}"


def page_description(model: str) -> str:
    return f"{APP_NAME}: {model_name(model)} running on this machine with vLLM"


def write_welcome(model: str, folder: Path, templates: Path = PROJECT_ROOT) -> None:
    """The welcome files with the model's name filled in, into ``folder`` (one that only this process uses)."""
    make_private_folder(folder)
    for name in WELCOME_FILES:
        text = (templates / name).read_text(encoding="utf-8")
        (folder / name).write_text(text.replace(MODEL_PLACEHOLDER, model_name(model)), encoding="utf-8")


def show_model(model: str, folder: Path, root_path: str = "") -> None:
    """Name ``model`` in the page's title and welcome text (the welcome files go to ``folder``); the app's icon is
    the avatar of every message (under ``root_path`` behind a proxy)."""
    write_welcome(model, folder)
    name_the_page(page_title(model), page_description(model), folder)
    avatar_for_everyone(f"{root_path}/favicon")
