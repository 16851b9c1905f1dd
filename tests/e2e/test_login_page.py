"""The login page in a real Chromium: it appears as soon as the first user is added to an app already running without
users (issue 35 item 6: that app let anyone in without a login page until a restart, while `users add` said "the
running app sees it at once")."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT, running_app

pytestmark = pytest.mark.timeout(600)


def users_add(data, name: str, secret: str) -> None:
    done = subprocess.run([sys.executable, "launch.py", "users", "add", name, "--data-dir", str(data)], cwd=ROOT,
                          input=secret + "\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def sign_in(page, name: str, secret: str) -> None:
    page.fill("#email", name)
    page.fill("#password", secret)
    page.click("button[type=submit]")


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

