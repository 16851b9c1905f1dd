"""Command line: flags generated from the settings fields; bad values become one readable line.

``--x/--no-x`` for booleans (as vLLM does), ``--help`` text from each field's description. Only flags a
user actually typed are passed on, so environment variables and ``.env`` still apply to the rest.
"""
from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Optional

from pydantic import SecretStr, ValidationError
from pydantic.fields import FieldInfo

from app.errors import SettingsError
from app.settings import ENV_PREFIX, SETTINGS_CLASSES, AppSettings, flag_name

_UNSET = object()
_SECRET_FIELDS = {name for cls in SETTINGS_CLASSES.values() for name, info in cls.model_fields.items()
                  if SecretStr in typing.get_args(info.annotation) or info.annotation is SecretStr}


@dataclass(frozen=True)
class Command:
    """What launch.py was asked to do, and with which settings."""

    action: str  # "serve", "print-config", "check", "export", "import", "users" or "chats"
    settings: AppSettings
    as_json: bool = False
    assume_gpu: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # import: the exported chats to read
    out: str = "ernie-chat-export"  # export: the folder to write
    export_format: str = "json"
    reset: bool = False  # users add: give an existing user a new secret
    keep_local: bool = False  # users add: the first user does not take the chats made before users existed
    user: Optional[str] = None  # import: whose the imported chats become
    giver: Optional[str] = None  # chats give: whose chats move (--from)
    taker: Optional[str] = None  # chats give: to whom (--to)


def _base_type(annotation: Any) -> Any:
    """Strip Optional[...] so argparse sees the value type."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return annotation


def _add_field(group: argparse._ArgumentGroup, name: str, info: FieldInfo) -> None:
    kind = _base_type(info.annotation)
    default = info.default
    shown = "" if default in (None, "") else f" (default: {default})"
    help_text = (info.description or "") + shown
    if kind is bool:
        group.add_argument(flag_name(name), dest=name, action=argparse.BooleanOptionalAction,
                           default=_UNSET, help=help_text)
        return
    kwargs: dict[str, Any] = {"dest": name, "default": _UNSET, "help": help_text, "metavar": name.upper()}
    if typing.get_origin(kind) is typing.Literal:
        kwargs["metavar"] = "{" + ",".join(str(c) for c in typing.get_args(kind)) + "}"
    # Values stay strings here: pydantic converts and validates them, so errors read the same
    # whether a value came from a flag, the environment or .env.
    group.add_argument(flag_name(name), **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python launch.py",
        description="Chat with ERNIE-4.5-0.3B-PT in your browser; vLLM runs in an engine process the app starts. "
        f"Every flag also reads from {ENV_PREFIX}<NAME> and .env.")
    parser.add_argument("action", nargs="?", choices=["serve", "check", "export", "import", "users", "chats"],
                        default="serve",
                        help="serve (default): start the app. check: is a running app ready? "
                        "(exit 0 when ready, 1 otherwise, with the state and the log's last error). "
                        "export: write every chat to files (--out, --format). import FILE...: read chats back, "
                        "ours or other apps'. users add|list|remove NAME: the people who log in, each with an own "
                        "secret. chats list|give: whose the chats are, and moving all of one person's to another "
                        "(--from, --to).")
    parser.add_argument("files", nargs="*", metavar="FILE", help="With import: chat files (an ernie-chat JSON "
                        "export and its presets.json, ChatGPT's conversations.json, an Open WebUI export, or "
                        "{\"messages\": [...]}). "
                        "With users: add NAME, list, or remove NAME. With chats: list, or give.")
    parser.add_argument("--reset", action="store_true", help="With users add: give an existing user a new secret "
                        "(their logins end).")
    parser.add_argument("--keep-local", action="store_true",
                        help="With users add, for the first user: leave the chats and presets made before users "
                        "existed with the local user (by default the first user gets them; nobody logs in as local "
                        "once users exist; `chats give --from local --to NAME` moves them later).")
    parser.add_argument("--from", dest="giver", default=None, metavar="NAME",
                        help="With chats give: whose chats and presets move (e.g. local: those made before users "
                        "existed).")
    parser.add_argument("--to", dest="taker", default=None, metavar="NAME",
                        help="With chats give: who gets them: a user of `users add`.")
    parser.add_argument("--user", default=None, metavar="NAME",
                        help="With import: whose the chats and presets become, so that they are in that person's "
                        "sidebar: a user of `users add`, or local when there are none (default: ours keep the owner "
                        "they were exported with; other apps' go to local, and with users are refused).")
    parser.add_argument("--out", default="ernie-chat-export", metavar="DIR",
                        help="With export: the folder to write, one subfolder per user (default: ernie-chat-export).")
    parser.add_argument("--format", dest="export_format", choices=["md", "json"], default="json",
                        help="With export: json (default; import reads it back) or md (Markdown, to read).")
    parser.add_argument("--print-config", action="store_true",
                        help="Print the detected card, the profile and every engine argument with its "
                        "reason, then exit without loading the model.")
    parser.add_argument("--json", action="store_true", help="With --print-config: print JSON.")
    parser.add_argument("--assume-gpu", action="append", default=[], metavar="NAME,CC,MEM_GIB[,FREE_GIB]",
                        help="With --print-config: plan for this card instead of probing "
                        "(repeat for several), e.g. \"NVIDIA A10,8.6,24\".")
    for concern, cls in SETTINGS_CLASSES.items():
        group = parser.add_argument_group(f"{concern} settings")
        for name, info in cls.model_fields.items():
            _add_field(group, name, info)
    return parser


def _describe_error(err: Mapping[str, Any]) -> str:
    field = str(err["loc"][0]) if err.get("loc") else "?"
    value = err.get("input")
    if isinstance(value, SecretStr) or field in _SECRET_FIELDS:  # a bad secret (a token, a URL with a password)
        value = "***"
    message = err.get("msg", "invalid")
    if err.get("type") == "literal_error":
        message = "must be one of " + message.split("Input should be ", 1)[-1]
    return (f"invalid setting {flag_name(field)} ({ENV_PREFIX}{field.upper()}) = {value!r}: "
            f"{message[0].lower() + message[1:]}")


def load_settings(cli_values: Optional[dict[str, Any]] = None, env_file: Optional[str] = ".env") -> AppSettings:
    """Build every settings class from CLI values, the environment and .env; one line per bad value."""
    cli_values = cli_values or {}
    built: dict[str, Any] = {}
    problems: list[str] = []
    for concern, cls in SETTINGS_CLASSES.items():
        mine = {k: v for k, v in cli_values.items() if k in cls.model_fields}
        try:
            built[concern] = cls(_env_file=env_file, **mine)
        except ValidationError as exc:
            problems.extend(_describe_error(e) for e in exc.errors())
    if problems:
        raise SettingsError("; ".join(problems))
    return AppSettings(**built)


class OneLineParser(argparse.ArgumentParser):
    """argparse prints its whole usage (40 lines) before the error; a mistake gets one line instead."""

    def error(self, message: str) -> NoReturn:
        raise SettingsError(f"{message} (python launch.py --help lists every flag)")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """A flag the app does not have is named, with the nearest real one, before argparse reads the rest (it
    would take the flag's value for the action: "invalid choice: 'DIR'")."""
    import difflib

    known = [flag for action in parser._actions for flag in action.option_strings]
    for arg in argv:
        if arg == "--":
            return
        flag = arg.split("=", 1)[0]
        if flag.startswith("-") and len(flag) > 1 and not _is_number(flag) and flag not in known:
            near = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
            raise SettingsError(f"unknown flag {flag}" + (f"; did you mean {near[0]}?" if near else "")
                                + " (python launch.py --help lists every flag)")


def parse_command(argv: Sequence[str], env_file: Optional[str] = ".env") -> Command:
    """Parse argv into a Command. Raises SettingsError (one line) for bad values."""
    parser = build_parser()
    check_flags(parser, argv)
    args = parser.parse_intermixed_args(list(argv))  # import FILE... may follow options
    cli_values = {k: v for k, v in vars(args).items() if v is not _UNSET
                  and k not in ("action", "print_config", "json", "assume_gpu", "files", "out", "export_format",
                                "reset", "keep_local", "user", "giver", "taker")}
    settings = load_settings(cli_values, env_file=env_file)
    for name in sorted(_SECRET_FIELDS & cli_values.keys()):
        # Every local user sees a process's arguments in `ps` (docs/security.md, row 5c).
        print(f"warning: {flag_name(name)} on the command line is visible to every user of this machine (ps); "
              f"prefer {ENV_PREFIX}{name.upper()} in the environment or .env"
              + (", or --auth-token-file" if name == "auth_token" else ""), file=sys.stderr)
    action = "print-config" if args.print_config else args.action
    if args.files and action not in ("import", "users", "chats"):
        raise SettingsError(f"unexpected arguments {' '.join(args.files)!r}: only import, users and chats take "
                            "arguments")
    if args.user is not None and action != "import":
        raise SettingsError(f"--user {args.user!r} is for import only (python launch.py import FILE... --user NAME)")
    for flag, value in (("--from", args.giver), ("--to", args.taker)):
        if value is not None and action != "chats":
            raise SettingsError(f"{flag} {value!r} is for chats give only (python launch.py chats give --from NAME "
                                "--to NAME)")
    if args.keep_local and action != "users":
        raise SettingsError("--keep-local is for users add only (python launch.py users add NAME --keep-local)")
    return Command(action=action, settings=settings, as_json=args.json, assume_gpu=tuple(args.assume_gpu),
                   files=tuple(args.files), out=args.out, export_format=args.export_format, reset=args.reset,
                   keep_local=args.keep_local, user=args.user, giver=args.giver, taker=args.taker)
