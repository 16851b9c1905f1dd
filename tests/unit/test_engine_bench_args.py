"""bench.engine_bench's --profiles: every variant is checked before any engine starts, one line per mistake."""
import argparse

import pytest

from bench.engine_bench import profile_list, split_variant


def test_variant_carries_json_engine_arguments():
    assert split_variant("auto+async_scheduling=false+stream_interval=8") == (
        "auto", {"async_scheduling": False, "stream_interval": 8})
    assert split_variant("tutorial-a100") == ("tutorial-a100", {})


@pytest.mark.parametrize("text, says", [
    ("auto,autox", "'autox' is not a profile; allowed: auto, cpu, tutorial-"),
    ("auto,auto+stream_interval=eight",
     "'stream_interval=eight' in 'auto+stream_interval=eight' is not ARG=JSON_VALUE"),
    ("auto+async_scheduling", "'async_scheduling' in 'auto+async_scheduling' is not ARG=JSON_VALUE"),
    ("auto+=1", "'=1' in 'auto+=1' is not ARG=JSON_VALUE"),
])
def test_bad_profile_is_refused_before_anything_runs(text, says):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        profile_list(text)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)
