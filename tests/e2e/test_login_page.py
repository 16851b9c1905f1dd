"""The login page in a real Chromium: it appears as soon as the first user is added to an app already running without
users (issue 35 item 6: that app let anyone in without a login page until a restart, while `users add` said "the
running app sees it at once")."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.app_process import ROOT, running_app
from tests.support.page import sign_in

pytestmark = pytest.mark.timeout(600)


def users_add(data, name: str, secret: str) -> None:
    done = subprocess.run([sys.executable, "launch.py", "users", "add", name, "--data-dir", str(data)], cwd=ROOT,
                          input=secret + "\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def app_without_users(tiny_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("no-users-yet")
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("run"), "--data-dir", str(data)) as app:
        yield app, data


def test_the_login_page_appears_once_a_user_is_added_to_a_running_app(browser, app_without_users):
    app, data = app_without_users
    context = browser.new_context(locale="en-US")
    try:
        page = context.new_page()
        page.goto(app.url + "/")
        page.wait_for_selector("#chat-input", timeout=30000)  # the local user, no login page
        users_add(data, "alice", "alice-secret-1")
        page.reload()
        page.wait_for_selector("#password", timeout=30000)  # now the login page asks
        assert page.locator("#chat-input").count() == 0
        fresh = context.browser.new_context(locale="en-US").new_page()  # a browser that never logged in
        fresh.goto(app.url + "/")
        fresh.wait_for_selector("#password", timeout=30000)
        fresh.context.close()
        sign_in(page, "alice", "alice-secret-1")
        page.wait_for_selector("#chat-input", timeout=30000)  # alice chats, in her own sidebar
    finally:
        context.close()


@pytest.fixture(scope="module")
def app_with_a_user(tiny_model_dir, tmp_path_factory):
    from app.accounts import Accounts

    data = tmp_path_factory.mktemp("one-user")
    Accounts(data / "users.json").add("alice", "alice-secret-1")
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("run"), "--data-dir", str(data)) as app:
        yield app


@pytest.mark.parametrize(("locale", "label", "line", "toast"), [
    ("en-US", "Name", "Wrong name or password. Check both and try again.", "wrong name or password"),
    ("zh-CN", "用户名", "用户名或密码错误，请检查后重试。", "用户名或密码错误，请检查后重试"),
])
def test_the_login_page_asks_for_a_name_and_says_plainly_when_it_is_wrong(browser, app_with_a_user, locale, label,
                                                                          line, toast):
    """Issue 35 item 10: it asked for an "Email address" (me@example.com) and a wrong password showed
    "Unauthorized: credentialssignin"."""
    context = browser.new_context(locale=locale)
    try:
        page = context.new_page()
        page.goto(app_with_a_user.url + "/")
        page.wait_for_selector("#password", timeout=30000)
        assert page.locator("label[for=email]").inner_text() == label
        assert page.locator("#email").get_attribute("placeholder") != "me@example.com"
        sign_in(page, "alice", "not-her-secret")
        page.get_by_text(line, exact=True).wait_for(timeout=30000)  # the form's own line
        page.locator("[data-sonner-toast]", has_text=toast).wait_for(timeout=30000)  # and the toast's
        assert "credentialssignin" not in page.locator("body").inner_text()
        sign_in(page, "alice", "alice-secret-1")  # the right one still works after a wrong one
        page.wait_for_selector("#chat-input", timeout=30000)
    finally:
        context.close()
