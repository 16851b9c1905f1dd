"""What an imported chat's metadata may bring (app/history/chat_metadata.py): only the settings panel's values,
each of its type; tests/integration/test_history_transfer.py imports such a chat and opens it in the real app."""
import pytest

from app.history.chat_metadata import SETTING_TYPES, imported_metadata, typed_settings
from app.history.presets import PRESET_KEYS


def test_every_setting_a_preset_keeps_has_its_type_check_and_so_do_the_answers_at_once():
    assert set(SETTING_TYPES) == {*PRESET_KEYS, "answers"}
    assert typed_settings({"answers": 3, "max_tokens": 64}) == {"answers": 3, "max_tokens": 64}
    assert typed_settings({"answers": "3"}) == {} and typed_settings({"answers": True}) == {}


def test_session_state_sharing_flags_and_unknown_keys_are_dropped():
    metadata = {"answer_tasks": [1, 2, 3], "is_shared": True, "env": {"KEY": "x"}, "chat_profile": "x",
                "chat_settings": {"system_prompt": "be brief", "temperature": 0.2, "top_p": 1, "max_tokens": 64,
                                  "unknown": 1}}
    assert imported_metadata(metadata) == {"chat_settings": {"system_prompt": "be brief", "temperature": 0.2,
                                                             "top_p": 1, "max_tokens": 64}}


@pytest.mark.parametrize("settings, kept", [
    ({"temperature": "hot", "top_p": None, "max_tokens": True, "system_prompt": 7}, {}),
    ({"max_tokens": 512.0, "top_p": True}, {"max_tokens": 512.0}),  # the panel's sliders keep floats
    ("be brief", {}),
    ({"temperature": 1}, {"temperature": 1}),
])
def test_a_setting_of_another_type_is_dropped(settings, kept):
    assert typed_settings(settings) == kept
    assert imported_metadata({"chat_settings": settings}) == ({"chat_settings": kept} if kept else {})


@pytest.mark.parametrize("metadata", [None, [], "x", {"chat_settings": []}])
def test_metadata_of_another_shape_brings_nothing(metadata):
    assert imported_metadata(metadata) == {}
