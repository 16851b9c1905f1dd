"""The page names the model it serves, in both languages, through Chainlit's own title and welcome-text code
(app/ui/branding.py), and the app's pictures are where Chainlit serves an app's branding from."""
from __future__ import annotations

import re

import pytest

from app.settings import PROJECT_ROOT
from app.ui.branding import WELCOME_FILES, model_name, page_title, show_model, write_welcome

SMOL = "/models/SmolLM2-135M-Instruct"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize(("model", "name"), [("baidu/ERNIE-4.5-0.3B-PT", "ERNIE-4.5-0.3B-PT"),
                                             ("/models/SmolLM2-135M-Instruct/", "SmolLM2-135M-Instruct"),
                                             ("tiny", "tiny")])
def test_the_models_name_comes_from_its_folder_or_hub_id(model, name):
    assert model_name(model) == name


def test_the_welcome_files_name_the_running_model_and_never_claim_ernie(tmp_path):
    write_welcome(SMOL, tmp_path / "welcome")
    texts = {name: (tmp_path / "welcome" / name).read_text(encoding="utf-8") for name in WELCOME_FILES}
    assert "You are chatting with **SmolLM2-135M-Instruct**" in texts["chainlit_en-US.md"]
    assert "您正在与 **SmolLM2-135M-Instruct** 对话" in texts["chainlit_zh-CN.md"]
    assert not CJK.search(texts["chainlit_en-US.md"])  # each language's page gets its own language only
    assert "**SmolLM2-135M-Instruct**" in texts["chainlit.md"] and CJK.search(texts["chainlit.md"])  # others: both
    for text in texts.values():
        assert "ERNIE" not in text and "{model}" not in text and text.startswith("# SmolLM2-135M-Instruct · ernie-chat")


def test_chainlit_serves_the_models_name_as_the_title_and_welcome_text(tmp_path, monkeypatch):
    from chainlit.config import config
    from chainlit.markdown import get_markdown_str
    from chainlit.server import get_html_template

    for field in ("name", "description", "default_avatar_file_url"):
        monkeypatch.setattr(config.ui, field, getattr(config.ui, field))
    monkeypatch.setattr(config, "root", config.root)
    show_model(SMOL, tmp_path / "welcome", "/chat")
    # Every avatar is the app's icon: the page never asks /avatars/<the title>, which Chainlit refuses ('·').
    assert config.ui.default_avatar_file_url == "/chat/favicon"
    assert f"<title>{page_title(SMOL)}</title>" in get_html_template("")
    assert page_title(SMOL) == "SmolLM2-135M-Instruct · ernie-chat"
    assert get_markdown_str(config.root, "zh-CN").startswith("# SmolLM2-135M-Instruct · ernie-chat")
    assert "You are chatting with **SmolLM2-135M-Instruct**" in get_markdown_str(config.root, "en-US")


def test_the_logo_and_favicon_are_where_chainlit_looks_for_an_apps_own():
    """chainlit/server.py: /logo?theme=T serves public/logo_T.*, /favicon serves public/favicon.*."""
    for name in ("logo_light.png", "logo_dark.png", "favicon.png"):
        assert (PROJECT_ROOT / "public" / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert len(list((PROJECT_ROOT / "public").glob("favicon.*"))) == 1  # Chainlit serves the first it finds
