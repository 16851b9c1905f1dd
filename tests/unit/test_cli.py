"""The command line: env/.env/CLI precedence, one readable line per bad value, a flag for every field."""
import pytest

from app.cli import build_parser, load_settings, parse_command
from app.errors import SettingsError
from app.settings import SETTINGS_CLASSES


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


def test_every_field_has_a_flag_with_its_description():
    parser = build_parser()
    flags = {option: action for action in parser._actions for option in action.option_strings}
    fields = [(name, info) for cls in SETTINGS_CLASSES.values() for name, info in cls.model_fields.items()]
    assert len(fields) > 20
    for name, info in fields:
        flag = "--" + name.replace("_", "-")
        assert flag in flags, flag
        assert info.description and flags[flag].help.startswith(info.description), flag
        if info.annotation in (bool, bool | None):
            assert "--no-" + name.replace("_", "-") in flags, flag


def test_booleans_are_tri_state():
    assert parse_command(["--no-enforce-eager"], env_file=None).settings.engine.enforce_eager is False
    assert parse_command(["--enforce-eager"], env_file=None).settings.engine.enforce_eager is True


@pytest.mark.parametrize("argv, words", [
    (["--modle", "/models/ernie"], "unknown flag --modle; did you mean --model?"),
    (["--prot=8000"], "unknown flag --prot; did you mean --port?"),
    (["--xyzzy"], "unknown flag --xyzzy (python launch.py --help"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_a_mistyped_flag_or_action_is_one_line_naming_it(argv, words):
    with pytest.raises(SettingsError) as info:
        parse_command(argv, env_file=None)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_negative_numbers_are_values_not_flags():
    with pytest.raises(SettingsError, match="--temperature"):  # out of range, but read as the value
        parse_command(["--temperature", "-0.5"], env_file=None)


def test_import_takes_user_and_no_other_action_does():
    command = parse_command(["import", "conversations.json", "--user", "alice"], env_file=None)
    assert (command.action, command.files, command.user) == ("import", ("conversations.json",), "alice")
    with pytest.raises(SettingsError, match=r"^--user 'alice' is for import only \(python launch.py import FILE\.\.\. "
                                            r"--user NAME\)$"):
        parse_command(["export", "--user", "alice"], env_file=None)


def test_chats_give_takes_from_and_to_and_users_add_keep_local_and_no_other_action_does():
    command = parse_command(["chats", "give", "--from", "local", "--to", "alice"], env_file=None)
    assert (command.action, command.files, command.giver, command.taker) == ("chats", ("give",), "local", "alice")
    assert parse_command(["users", "add", "alice", "--keep-local"], env_file=None).keep_local
    with pytest.raises(SettingsError, match=r"^--to 'alice' is for chats give only \(python launch.py chats give "
                                            r"--from NAME --to NAME\)$"):
        parse_command(["import", "x.json", "--to", "alice"], env_file=None)
    with pytest.raises(SettingsError, match=r"^--keep-local is for users add only"):
        parse_command(["chats", "list", "--keep-local"], env_file=None)
