"""Every string of the app's own UI has its 简体中文 twin (app/i18n.py): the status panel's words among them, the
engine's states and start steps included, which the host keeps as Phrases (English for the log and /readyz)."""
from __future__ import annotations

import re
import string
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.engine.host import EngineHost, EngineHostOptions
from app.engine.status import EngineState, Speed
from app.errors import BadRequestError
from app.i18n import STRINGS, Phrase, t, worded
from app.planning.engine_plan import EnginePlan
from app.telemetry import AppMetrics
from app.ui.status_panel import status_markdown
from tests.support.fakes import FakeEngine, start_until_settled

APP = Path(__file__).resolve().parents[2] / "app"
# t(language, "key", ...) and Phrase("key", ...) anywhere in app/
USED_KEY = re.compile(r"""(?:\bt\([^,()]+,\s*|\bPhrase\()["']([a-z0-9_]+)["']""")
PLAN = EnginePlan(profile="cpu", device="cpu", gpu=None, reasons={}, engine_args={"max_model_len": 4096})


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def keys_used_in_app() -> set[str]:
    """Whole keys only: the state and speed words ("state_" + the state) are checked against their enums below."""
    return {key for path in APP.rglob("*.py") for key in USED_KEY.findall(path.read_text(encoding="utf-8"))
            if not key.endswith("_")}


def test_every_english_string_has_a_chinese_one_with_the_same_placeholders():
    assert set(STRINGS["en"]) == set(STRINGS["zh"])
    for key, english in STRINGS["en"].items():
        assert placeholders(english) == placeholders(STRINGS["zh"][key]), key


def test_every_key_the_app_uses_is_in_both_languages():
    used = keys_used_in_app()
    assert {"panel_engine", "detail_loading_engine", "ready_took", "preset_name_length"} <= used  # the scan works
    assert used - set(STRINGS["en"]) == set()
    assert used - set(STRINGS["zh"]) == set()


@pytest.mark.parametrize("key", [f"state_{state.value}" for state in EngineState]
                         + [f"speed_{speed.value}" for speed in Speed])
def test_each_engine_state_and_speed_has_a_word_in_both_languages(key):
    assert STRINGS["en"][key] and STRINGS["zh"][key]
    words = re.sub(r"\{[^}]*\}", "", STRINGS["zh"][key]).replace("eager", "")  # vLLM's own term stays
    assert not re.search("[A-Za-z]", words), STRINGS["zh"][key]


def test_a_phrase_is_english_text_that_the_page_words_in_its_own_language():
    phrase = Phrase("detail_gave_up", reason=Phrase("detail_retrying_after", error="OSError: boom"), restarts=3)
    assert phrase == "retrying after: OSError: boom; gave up after 3 restarts"  # the log and /readyz
    assert worded("zh-CN", phrase) == "出错后重试：OSError: boom；重启 3 次后放弃"  # an error's own words stay
    assert worded("zh-CN", "plain text") == "plain text"
    refusal = BadRequestError(Phrase("preset_too_many", limit=50))
    assert str(refusal) == "at most 50 presets per user"
    assert t("zh-CN", "preset_refused", detail=refusal) == "预设未保存：每位用户最多 50 个预设。"


def test_the_chinese_panel_words_every_step_of_a_start():
    """A real EngineHost start (a stand-in engine): at each state the Chinese panel's engine line is Chinese."""
    host = EngineHost(EngineHostOptions(lambda progress: "/models/m", PLAN, AppMetrics(),
                                        engine_factory=lambda path, plan: FakeEngine(plan), health_interval=60))
    runtime = SimpleNamespace(host=host, plan=PLAN, gpu=None, gpu_memory=None, max_model_len=4096, history=None,
                              settings=SimpleNamespace(model=SimpleNamespace(model="/models/SmolLM2-135M-Instruct")))
    lines: list[str] = []
    host.add_listener(lambda status: lines.append(
        next(line for line in status_markdown(runtime, "zh-CN").split("  \n") if line.startswith("**引擎:**"))))

    start_until_settled(host)
    shown = [line for line in lines if "已停止" not in line]  # the shutdown's own line
    assert shown[0] == "**引擎:** 加载中 — 查找模型"
    assert shown[-1].startswith("**引擎:** 就绪 — ") and shown[-1].endswith(" 秒就绪")
    assert len(shown) >= 4  # finding the model, the engine, its warm-up, ready
    for line in shown:
        assert not re.search("[A-Za-z]", line), line
