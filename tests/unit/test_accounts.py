"""Per-person logins: the users file (Argon2id hashes, 0600), its command, and who the login policy lets in."""
import asyncio
import json

import pytest
from pydantic import SecretStr

from app.accounts import MAX_FILE_BYTES, Accounts
from app.cli import parse_command
from app.errors import AccountError
from app.guards.identity import LOCAL_USER, LoginMode, LoginPolicy


@pytest.fixture
def accounts(tmp_path):
    return Accounts(tmp_path / "data" / "users.json")


def test_a_user_is_kept_as_a_hash_in_a_private_file(accounts):
    accounts.add("alice", "correct horse battery")
    text = accounts.path.read_text()
    assert "correct horse" not in text and "$argon2id$" in text
    assert accounts.path.stat().st_mode & 0o777 == 0o600
    assert accounts.path.parent.stat().st_mode & 0o777 == 0o700
    assert accounts.check("alice", "correct horse battery").name == "alice"
    assert accounts.check("alice", "wrong horse battery") is None
    assert accounts.check("mallory", "correct horse battery") is None  # unknown names are hashed too
    assert accounts.check("alice", "x" * 100_000) is None  # a huge secret costs one ordinary check


def test_a_new_secret_changes_the_stamp_and_remove_forgets(accounts):
    first = accounts.add("alice", "first-secret").account
    with pytest.raises(AccountError, match="already exists.*--reset"):
        accounts.add("alice", "second-secret")
    second = accounts.add("alice", "second-secret", replace=True).account
    assert first.stamp != second.stamp == accounts.stamp_of("alice")
    accounts.remove("alice")
    assert accounts.stamp_of("alice") is None
    with pytest.raises(AccountError, match="no user alice; the users are: none yet"):
        accounts.remove("alice")


@pytest.mark.parametrize("name", ["", "a b", "-x", "x" * 65, "al/ice", "名字"])
def test_names_outside_the_rule_are_refused_in_one_line(accounts, name):
    with pytest.raises(AccountError, match="is not allowed: 1-64 characters"):
        accounts.add(name, "long-enough-secret")


def test_secrets_need_8_to_1024_characters(accounts):
    for secret in ("short", "x" * 1025):
        with pytest.raises(AccountError, match="it needs 8 to 1,024"):
            accounts.add("alice", secret)


def test_a_damaged_or_huge_users_file_is_one_line(accounts):
    accounts.path.parent.mkdir(parents=True)
    accounts.path.write_text("{not json")
    with pytest.raises(AccountError, match="cannot be read .*fix or remove it"):
        accounts.all()
    accounts.path.write_text(json.dumps({"format": 99, "users": {}}))
    with pytest.raises(AccountError, match="format 99"):
        accounts.all()
    with open(accounts.path, "wb") as out:
        out.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(AccountError, match="at most"):
        accounts.all()


def settings(tmp_path, *args):
    return parse_command(["--data-dir", str(tmp_path), *args], env_file=None).settings


def test_the_login_mode_follows_the_users_and_the_token(tmp_path):
    assert LoginPolicy.from_settings(settings(tmp_path)).mode is LoginMode.LOCAL
    assert LoginPolicy.from_settings(settings(tmp_path, "--host", "0.0.0.0", "--insecure-no-auth")).mode \
        is LoginMode.OPEN
    token = ["--auth-token", "one-person-token-123"]
    assert LoginPolicy.from_settings(settings(tmp_path, *token)).mode is LoginMode.TOKEN
    Accounts.of(settings(tmp_path).history).add("alice", "alices-secret")
    assert LoginPolicy.from_settings(settings(tmp_path, *token)).mode is LoginMode.ACCOUNTS


def test_the_shared_token_is_one_person_whatever_name_is_typed():
    policy = LoginPolicy(LoginMode.TOKEN, token=SecretStr("one-person-token-123"))
    as_alice = asyncio.run(policy.check("alice", "one-person-token-123"))
    as_bob = asyncio.run(policy.check("bob", "one-person-token-123"))
    assert as_alice.name == as_bob.name == LOCAL_USER
    assert as_alice.metadata["login"] != as_bob.metadata["login"]  # each login its own token
    assert asyncio.run(policy.check("alice", "one-person-token-12")) is None


def test_with_users_only_their_own_secret_logs_in_and_a_changed_secret_ends_logins(accounts):
    accounts.add("alice", "alices-secret")
    policy = LoginPolicy(LoginMode.ACCOUNTS, accounts, SecretStr("the-api-token-123"))
    assert asyncio.run(policy.check("alice", "the-api-token-123")) is None  # the API token is no login
    assert asyncio.run(policy.check("bob", "alices-secret")) is None
    alice = asyncio.run(policy.check("alice", "alices-secret"))
    claims = {"identifier": alice.name, "metadata": alice.metadata}
    assert policy.still_valid(claims)
    assert not policy.still_valid({"identifier": "bob", "metadata": alice.metadata})  # a claimed name
    assert not policy.still_valid({"identifier": "alice", "metadata": {"provider": "token"}})
    accounts.add("alice", "a-new-secret", replace=True)
    assert not policy.still_valid(claims)
    accounts.path.write_text("{broken")
    assert not policy.still_valid(claims)  # an unreadable file lets nobody in
