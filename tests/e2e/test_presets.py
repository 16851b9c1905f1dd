"""Presets as a user drives them in Chromium: a system prompt set in the settings panel, saved with the
composer's "Save preset" command, used from the command menu in a new chat (the engine's prompt token counter
proves the prompt reached it), and still offered after a restart."""
import sqlite3

from tests.support.app_process import get, running_app
from tests.support.metrics import metric_value
from tests.support.page import send, wait_stats

PIRATE = "You are a pirate captain. Answer every question in the voice of an old sea dog, with nautical words."


def prompt_tokens(app) -> float:
    return metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")


def open_chat(browser, app):
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(app.url + "/")
    page.wait_for_selector("#chat-input", timeout=30000)
    # The status panel comes from on_chat_start: once it shows, the chat's commands and settings are in place.
    page.locator("#side-view-content").get_by_text("ready").wait_for(timeout=60000)
    return context, page


def pick_command(page, name):
    page.click("#command-button")
    page.locator("#command-popover [role=option]", has_text=name).click()


def test_a_preset_is_saved_used_in_a_new_chat_and_kept_after_a_restart(browser, tiny_model_dir, tmp_path):
    data = tmp_path / "data"
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
    fast = ("--data-dir", str(data), "--max-tokens", "16")
    with running_app(tiny_model_dir, tmp_path / "first", *fast) as app:
        context, page = open_chat(browser, app)
        send(page, "hello there")
        plain = int(wait_stats(page, 1)[0])  # the prompt without a system prompt
        page.click("#chat-settings-open-modal")
        page.locator("#system_prompt").fill(PIRATE)
        page.click("#confirm")
        pick_command(page, "Save preset")
        send(page, "Pirate")
        page.get_by_text("Preset \u201cPirate\u201d saved").wait_for(timeout=30000)
        with sqlite3.connect(data / "chats.db") as conn:
            saved = conn.execute("select user_identifier, name, settings from presets").fetchall()
        assert [(user, name) for user, name, _ in saved] == [("local", "Pirate")] and PIRATE in saved[0][2]

        page.click("#header #new-chat-button")
        confirm = page.get_by_role("button", name="Confirm")
        if confirm.count():
            confirm.click()
        page.locator("#side-view-content").get_by_text("ready").wait_for(timeout=60000)
        before = prompt_tokens(app)
        pick_command(page, "Pirate")
        send(page, "hello there")
        page.get_by_text("Preset \u201cPirate\u201d in use").wait_for(timeout=30000)
        with_preset = int(wait_stats(page, 1)[0])
        # The engine saw the preset's system prompt: its own counter moved by the prompt the page reports.
        assert with_preset > plain + 10 and prompt_tokens(app) - before == with_preset
        page.click("#chat-settings-open-modal")
        assert page.locator("#system_prompt").input_value() == PIRATE
        context.close()

    with running_app(tiny_model_dir, tmp_path / "second", *fast) as app:
        context, page = open_chat(browser, app)
        page.click("#command-button")
        page.locator("#command-popover [role=option]", has_text="Pirate").wait_for(timeout=15000)
        context.close()
