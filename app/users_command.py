"""``python launch.py users add NAME | list | remove NAME``: who may log in, each person with an own secret."""
from __future__ import annotations

import getpass
import sys
from typing import Any

from app.accounts import MAX_SECRET_CHARS, Accounts, check_secret
from app.errors import AccountError

USAGE = "usage: python launch.py users add NAME [--reset] [--keep-local] | users list | users remove NAME"


def read_secret(name: str) -> str:
    """Asked twice on a terminal (never echoed); else the first line of stdin, for scripts:
    ``printf '%s\\n' "$SECRET" | python launch.py users add alice``."""
    if sys.stdin.isatty():
        secret = check_secret(getpass.getpass(f"secret for {name}: "))
        if getpass.getpass("the same again: ") != secret:
            raise AccountError("the two secrets differ; nothing was changed")
        return secret
    line = sys.stdin.readline(MAX_SECRET_CHARS + 2)  # bounded: a secret, not a file
    return check_secret(line.rstrip("\r\n"))


def run_users_command(command: Any) -> int:
    """``command`` is app.cli.Command with action "users"; its ``files`` hold the verb and the name."""
    verb, *names = command.files or ("list",)
    accounts = Accounts.of(command.settings.history)
    if verb == "list" and not names:
        users = accounts.all()
        for account in sorted(users.values(), key=lambda a: a.name):
            print(f"{account.name}\tadded {account.created}")
        print(f"{len(users)} user(s) in {accounts.path}", file=sys.stderr)
        return 0
    if verb in ("add", "remove") and len(names) == 1:
        name = names[0]
        if verb == "remove":
            accounts.remove(name)
            print(f"removed {name}; their logins end at their next click (their chats stay in the database)")
            return 0
        accounts.check_new(name, replace=command.reset)
        added = accounts.add(name, read_secret(name), replace=command.reset)
        print(f"{'reset' if command.reset else 'added'} {name} in {accounts.path}; the running app sees it "
              "at once")
        if added.first:  # what was made before users existed would be in nobody's sidebar (issue 35)
            from app.chats_command import give_first_user_what_exists

            return give_first_user_what_exists(command.settings, name, command.keep_local)
        return 0
    raise AccountError(f"users {' '.join(command.files)!r} is not a users command; {USAGE}")
