"""Settings: defaults, env/.env/CLI precedence, one readable line per bad value, generated flags."""
import subprocess
import sys

import pytest

from app.cli import build_parser, load_settings, parse_command
from app.errors import SettingsError
from tests.conftest import ROOT


def test_defaults_follow_the_issue():
    s = load_settings(env_file=None)
    assert s.model.model == "baidu/ERNIE-4.5-0.3B-PT"
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8000)
    assert s.engine.profile == "auto"
    assert str(s.server.log_file) == "logs/llm.log"
    assert s.engine.max_concurrent_chats == 12
    assert s.engine.max_model_len is None and s.engine.enforce_eager is None


def test_cli_beats_env_beats_dotenv(tmp_path, monkeypatch):
    env_file = tmp_path / ".env"
    env_file.write_text("ERNIE_CHAT_PORT=8100\nERNIE_CHAT_MAX_CONCURRENT_CHATS=3\nERNIE_CHAT_HOST=127.0.0.2\n")
    monkeypatch.setenv("ERNIE_CHAT_PORT", "8200")
    cmd = parse_command(["--max-concurrent-chats", "5"], env_file=str(env_file))
    assert cmd.settings.server.port == 8200  # env over .env
    assert cmd.settings.engine.max_concurrent_chats == 5  # flag over .env
    assert cmd.settings.server.host == "127.0.0.2"  # .env over default


@pytest.mark.parametrize("argv, field, allowed", [
    (["--port", "70000"], "--port", "less than or equal to 65535"),
    (["--port", "abc"], "--port", "valid integer"),
    (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization", "less than or equal to 1"),
    (["--max-concurrent-chats", "0"], "--max-concurrent-chats", "greater than or equal to 1"),
    (["--profile", "a100"], "--profile", "'auto', 'cpu', 'tutorial-a10'"),
    (["--dtype", "fp4"], "--dtype", "'bfloat16'"),
    (["--max-model-len", "10"], "--max-model-len", "greater than or equal to 256"),
    (["--root-path", "chat"], "--root-path", "must start with '/'"),
    (["--remote-url", "gpu-box:8000"], "--remote-url", "must be an http:// or https:// URL ending in /v1"),
])
def test_bad_values_name_field_value_and_range(argv, field, allowed):
    with pytest.raises(SettingsError) as info:
        parse_command(argv, env_file=None)
    line = str(info.value)
    assert "\n" not in line
    assert field in line and repr(argv[1]) in line and allowed in line


def test_bad_env_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("ERNIE_CHAT_TOP_P", "3")
    with pytest.raises(SettingsError, match=r"--top-p \(ERNIE_CHAT_TOP_P\) = '3'"):
        load_settings(env_file=None)


def test_every_field_has_a_flag_with_help():
    help_text = build_parser().format_help()
    for flag in ("--model", "--host", "--port", "--profile", "--log-file", "--max-concurrent-chats",
                 "--max-model-len", "--dtype", "--gpu-memory-utilization", "--kv-cache-memory-bytes",
                 "--enforce-eager", "--no-enforce-eager", "--kv-cache-dtype", "--max-num-seqs", "--print-config"):
        assert flag in help_text


def test_booleans_are_tri_state():
    assert parse_command(["--no-enforce-eager"], env_file=None).settings.engine.enforce_eager is False
    assert parse_command(["--enforce-eager"], env_file=None).settings.engine.enforce_eager is True


def test_launch_exits_2_with_one_line_and_no_traceback():
    result = subprocess.run([sys.executable, "launch.py", "--port", "0"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: invalid setting --port")
