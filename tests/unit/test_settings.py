"""Settings: the defaults and the one definition of the chat's sampling bounds."""
from app.cli import load_settings
from app.settings import ANSWERS, SAMPLING_BOUNDS, ChatSettings


def test_defaults_follow_the_issue():
    s = load_settings(env_file=None)
    assert s.model.model == "baidu/ERNIE-4.5-0.3B-PT"
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8000)
    assert s.engine.profile == "auto"
    assert str(s.server.log_file) == "logs/llm.log"
    assert s.engine.max_concurrent_chats == 16  # a batch size vLLM captures a full CUDA graph for (docs/benchmarks.md)
    assert s.engine.max_model_len is None and s.engine.enforce_eager is None


def test_chat_defaults_sit_inside_the_sampling_bounds():
    chat = ChatSettings(_env_file=None)
    for name, bound in SAMPLING_BOUNDS.items():
        if name == ANSWERS:  # the chat's own setting (one answer unless it asks for more): no server flag
            continue
        assert bound.low <= getattr(chat, name) <= bound.high
        field = ChatSettings.model_fields[name]
        limits = {type(m).__name__: m for m in field.metadata}
        assert limits["Ge"].ge == bound.low and limits["Le"].le == bound.high
