"""The app forgets the messages Chainlit keeps for chats whose session is gone (Chainlit never does)."""
from chainlit.chat_context import chat_contexts
from chainlit.session import ws_sessions_id

from app.ui.chat import forget_closed_chats


def test_closed_chats_are_forgotten_and_open_ones_kept():
    chat_contexts["closed-chat"] = ["a message"] * 3
    chat_contexts["open-chat"] = ["a message"]
    ws_sessions_id["open-chat"] = object()
    try:
        assert forget_closed_chats() >= 1
        assert "closed-chat" not in chat_contexts and chat_contexts["open-chat"] == ["a message"]
    finally:
        chat_contexts.pop("open-chat", None)
        ws_sessions_id.pop("open-chat", None)
