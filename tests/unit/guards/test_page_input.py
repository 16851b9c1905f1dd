"""What the page sends with a message (app/guards/page_input.py) and Chainlit's share routes (app/guards/sharing.py),
as pure rules; tests/integration/test_hostile_page_input.py drives both through a launched app."""
import pytest

from app.guards.page_input import checked_message, install
from app.guards.sharing import is_share_route


def test_a_messages_metadata_keeps_nothing_of_the_pages_and_its_type_is_the_users():
    planted = {"documents": [{"name": "x.txt", "text": "x" * 10}] * 20_000, "kind": "answer", "footer": "",
               "partial": True, "is_shared": True, "location": "http://127.0.0.1:8000/"}
    payload = {"message": {"id": "m", "output": "hi", "type": "assistant_message", "metadata": planted},
               "fileReferences": [{"id": "f"}]}
    assert checked_message(payload) == {"message": {"id": "m", "output": "hi", "type": "user_message",
                                                    "metadata": {}}, "fileReferences": [{"id": "f"}]}
    assert payload["message"]["metadata"] is planted  # the caller's payload is not changed in place


@pytest.mark.parametrize("payload", [None, "text", {"message": "text"}, {}])
def test_a_payload_of_another_shape_is_left_for_chainlit_to_refuse(payload):
    assert checked_message(payload) == payload


@pytest.mark.parametrize("method, path, refused", [
    ("PUT", "/project/thread/share", True),
    ("GET", "/project/share/3f1c", True),
    ("GET", "/project/thread/3f1c", False),
    ("PUT", "/project/thread", False),
    ("GET", "/project/thread/share", False),
])
def test_the_share_routes_are_chainlits_two(method, path, refused):
    assert is_share_route(method, path) is refused


def test_both_events_the_page_sends_data_with_are_checked(monkeypatch):
    checked = {}
    monkeypatch.setattr("app.guards.page_input.check_socket_event", lambda event, check: checked.update({event: check}))
    install()
    assert set(checked) == {"client_message", "chat_settings_change"}
    assert checked["chat_settings_change"]({"temperature": "hot", "top_p": 0.5, "is_shared": True}) == {"top_p": 0.5}
