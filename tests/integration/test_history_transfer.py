"""`python launch.py export` / `import`: every chat out as private files, and back in, unchanged and in order
(round trip, up to the prompt a resumed chat gives the engine); files of other apps and broken or bomb files
on the command line, one line each, never a traceback.

Slow: each test runs launch.py in new Python processes (the app's imports take seconds each)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid

from chainlit.context import init_http_context

from app.accounts import Accounts
from app.history import HistoryStore, prepare_database
from app.history.database import DatabaseLocation
from app.history.presets import PresetStore
from tests.support.app_process import ROOT
from tests.support.fakes import logged_in_user


def location_in(folder) -> DatabaseLocation:
    return DatabaseLocation(f"sqlite+aiosqlite:///{folder / 'chats.db'}", folder / "chats.db")


def launch(*args: str, umask: int = 0o022) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "launch.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: os.umask(umask))


def mode(path) -> str:
    return oct(path.stat().st_mode & 0o777)


async def make_chats(location: DatabaseLocation) -> list[str]:
    await prepare_database(location)
    store = HistoryStore.open(location)
    ids = []
    try:
        for who, words in (("alice", ["the weather in Paris", "sunny"]), ("bob", ["量子纠缠", "两个粒子"])):
            user = await logged_in_user(store.layer, who)
            thread_id = str(uuid.uuid4())
            for n, text in enumerate(words):
                kind = "user_message" if n % 2 == 0 else "assistant_message"
                await store.layer.create_step({"id": str(uuid.uuid4()), "threadId": thread_id, "type": kind,
                                               "name": kind, "output": text + ("\n\n`prompt 9 tokens`" if n else ""),
                                               "createdAt": f"2026-12-03T10:00:0{n}.000Z"})
            await store.layer.update_thread(thread_id, name=words[0], user_id=user.id,
                                            metadata={"chat_settings": {"system_prompt": "be brief"}})
            ids.append(thread_id)
        await PresetStore(store.layer).save("alice", "Brief", {"system_prompt": "be brief", "temperature": 0.2,
                                                               "top_p": 0.9, "max_tokens": 128})
    finally:
        await store.close()
    return ids


async def read_chats(location: DatabaseLocation, ids: list[str]) -> list[dict]:
    store = HistoryStore.open(location)
    try:
        return [await store.layer.get_thread(i) for i in ids]
    finally:
        await store.close()


async def read_presets(location: DatabaseLocation) -> dict:
    store = HistoryStore.open(location)
    try:
        return await PresetStore(store.layer).by_user()
    finally:
        await store.close()


def test_export_then_import_gives_back_the_same_chats(tmp_path):
    source, target, out = tmp_path / "source", tmp_path / "target", tmp_path / "backup"
    ids = asyncio.run(make_chats(location_in(source)))
    exported = launch("export", "--data-dir", str(source), "--out", str(out), umask=0)  # the loosest umask
    assert exported.returncode == 0, exported.stderr
    files = sorted(out.rglob("*.json"))
    assert [(f.parent.name, f.name == "presets.json") for f in files] == [
        ("alice", False), ("alice", True), ("bob", False)]
    assert "exported 2 chats" in exported.stdout and "the presets of 1 user" in exported.stdout
    assert {mode(f) for f in files} == {"0o600"}  # private whatever the umask, and so are the folders it made
    assert {mode(folder) for folder in (out, out / "alice", out / "bob")} == {"0o700"}

    for name in ("alice", "bob"):  # restored where the same people log in
        Accounts(target / "users.json").add(name, f"{name}-secret-1")
    imported = launch("import", "--data-dir", str(target), *map(str, files))
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 of 2 chats" in imported.stdout and "imported: preset 'Brief'" in imported.stdout
    assert asyncio.run(read_presets(location_in(target))) == {"alice": {"Brief": {
        "system_prompt": "be brief", "temperature": 0.2, "top_p": 0.9, "max_tokens": 128}}}
    def comparable(chats):  # user ids are the target database's own; the user names must match
        return [{k: v for k, v in chat.items() if k != "userId"} for chat in chats]

    back = comparable(asyncio.run(read_chats(location_in(target), ids)))
    assert back == comparable(asyncio.run(read_chats(location_in(source), ids)))
    assert [c["userIdentifier"] for c in back] == ["alice", "bob"]

    again = launch("import", "--data-dir", str(target), *map(str, files[:2]))
    assert "imported 0 of 1 chats" in again.stdout and "skipped, already there: preset 'Brief'" in again.stdout


def test_markdown_export_reads_as_the_chat(tmp_path):
    source, out = tmp_path / "source", tmp_path / "md"
    asyncio.run(make_chats(location_in(source)))
    assert launch("export", "--data-dir", str(source), "--out", str(out), "--format", "md").returncode == 0
    text = next((out / "bob").glob("*.md")).read_text(encoding="utf-8")
    assert text.startswith("# 量子纠缠\n")
    assert "> **System prompt:** be brief" in text
    assert "**You:**\n\n量子纠缠\n\n**Assistant:**\n\n两个粒子\n" in text  # the stats line is not part of the answer


def test_import_reports_each_file_and_chat_and_a_bad_file_never_stops_the_others(tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"hello": 1}))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)  # a traceback (RecursionError) before
    no_steps = tmp_path / "no-steps.json"  # our own format without steps: a traceback (KeyError) before
    no_steps.write_text(json.dumps({"format": "ernie-chat/chat-v1", "id": "chat-without-steps", "name": "Kept",
                                    "user": "local", "messages": [{"role": "user", "content": "q"},
                                                                  {"role": "assistant", "content": "a"}]}))
    chatgpt = tmp_path / "conversations.json"
    chatgpt.write_text(json.dumps([{"title": "From ChatGPT", "id": "gpt-1", "current_node": "b", "mapping": {
        "a": {"id": "a", "parent": None, "children": ["b"], "message": {
            "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}, "create_time": 1.7e9}},
        "b": {"id": "b", "parent": "a", "children": [], "message": {
            "author": {"role": "assistant"}, "content": {"content_type": "text", "parts": ["hello"]},
            "create_time": 1.7e9 + 1}}}}, {"title": "Broken", "mapping": []}]))
    files = [notes, deep, no_steps, chatgpt]
    result = launch("import", "--data-dir", str(tmp_path / "db"), *map(str, files))
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"{notes}: refused: not a chat file this import reads (ernie-chat JSON export, ChatGPT conversations.json, "
        'Open WebUI export, or {"messages": [...]})',
        f"{deep}: refused: nested deeper than 100 levels",
        f"{no_steps}: ernie-chat export, 1 chat", '  imported: chat 1 "Kept", 2 messages',
        f"{chatgpt}: ChatGPT export, 2 chats", '  imported: chat 1 "From ChatGPT", 2 messages',
        '  refused: chat 2 "Broken": its mapping holds no messages',
        f"imported 2 of 3 chats into {tmp_path / 'db' / 'chats.db'} (0 already there; refused: 1 chat, 2 files)"]
    again = launch("import", "--data-dir", str(tmp_path / "db"), str(no_steps), str(chatgpt))
    assert again.stdout.splitlines()[1] == '  skipped, already there: chat 1 "Kept"'
    assert again.returncode == 1  # the broken chat is still refused


def our_chat_file(folder, chat_id: str, step_ids: list[str], for_id: str = "") -> str:
    """Our export of one chat whose messages have the ids given (a question, an answer, ...), and an element on
    the message ``for_id``."""
    steps = [{"id": step_id, "type": "user_message" if n % 2 == 0 else "assistant_message",
              "output": f"{chat_id} message {n}", "createdAt": f"2026-12-03T10:00:0{n}.000Z",
              "parentId": step_ids[n - 1] if n else None} for n, step_id in enumerate(step_ids)]
    path = folder / f"{chat_id}.json"
    path.write_text(json.dumps({"format": "ernie-chat/chat-v1", "id": chat_id, "name": chat_id, "user": "local",
                                "steps": steps, "elements": [{"id": "element-1", "forId": for_id,
                                                              "name": "notes.txt"}] if for_id else []}))
    return str(path)


def test_import_gives_clashing_and_repeated_message_ids_ids_of_their_own(tmp_path):
    """N14 (issue 36): import said "imported" while the database kept one row per message id: a chat whose ids
    another chat had kept 0 of 2 messages, and one with repeated ids 3 of 4."""
    import sqlite3

    data = tmp_path / "db"
    first = our_chat_file(tmp_path, "chat-a", ["m1", "m2"], for_id="m2")
    assert launch("import", "--data-dir", str(data), first).returncode == 0
    clashing = our_chat_file(tmp_path, "chat-b", ["m1", "m2"], for_id="m2")
    repeated = our_chat_file(tmp_path, "chat-c", ["d1", "d1", "d2", "d2"])
    result = launch("import", "--data-dir", str(data), clashing, repeated)
    assert result.returncode == 0, result.stdout
    assert [line for line in result.stdout.splitlines() if "imported:" in line] == [
        '  imported: chat 1 "chat-b", 2 messages', '  imported: chat 1 "chat-c", 4 messages']
    with sqlite3.connect(data / "chats.db") as conn:
        def chat(chat_id: str) -> list[tuple]:
            return conn.execute("select id, json_extract(data, '$.output'), json_extract(data, '$.parentId') "
                                "from steps where thread_id = ? order by position", (chat_id,)).fetchall()

        assert [(i, text) for i, text, _ in chat("chat-a")] == [("m1", "chat-a message 0"), ("m2", "chat-a message 1")]
        for chat_id, count in (("chat-b", 2), ("chat-c", 4)):
            kept = chat(chat_id)
            assert [text for _, text, _ in kept] == [f"{chat_id} message {n}" for n in range(count)]
            assert len({i for i, _, _ in kept}) == count
        b1, b2 = chat("chat-b")
        assert b2[2] == b1[0] != "m1"  # its answer's parent is its own question, under the new id
        elements = dict(conn.execute("select thread_id, for_id from elements").fetchall())
        assert elements == {"chat-a": "m2", "chat-b": b2[0]}


def test_import_refuses_what_is_not_a_chat_file_and_writes_nothing(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text(json.dumps({"hello": 1}))
    result = launch("import", "--data-dir", str(tmp_path / "db"), str(bad))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "db").exists()  # nothing written for a refused import
    refused = launch("export", "--no-history").stderr.strip()
    assert refused == "error: export needs the chat database: remove --no-history"


async def make_answered_chat(location: DatabaseLocation) -> str:
    """A chat of two turns stored as the app stores them: each question with its time, each answer streamed,
    so Chainlit saves it without one (the database keeps its own time for it)."""
    from chainlit.utils import utc_now

    await prepare_database(location)
    store = HistoryStore.open(location)
    try:
        user = await logged_in_user(store.layer, "local")
        thread_id = str(uuid.uuid4())
        for n in (1, 2):
            await store.layer.create_step({"id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message",
                                           "name": "local", "output": f"question {n} about lighthouses",
                                           "createdAt": utc_now()})
            await asyncio.sleep(0.01)
            await store.layer.update_step({"id": str(uuid.uuid4()), "threadId": thread_id,
                                           "type": "assistant_message", "name": "ERNIE", "createdAt": None,
                                           "output": f"answer {n} from the keeper\n\n`prompt 9 tokens`",
                                           "metadata": {"kind": "answer", "footer": "\n\n`prompt 9 tokens`"}})
            await asyncio.sleep(0.01)
        await store.layer.update_thread(thread_id, name="lighthouses", user_id=user.id)
    finally:
        await store.close()
    return thread_id


async def resumed_prompt(location: DatabaseLocation, thread_id: str, tokenizer) -> str:
    """The prompt app/ui/answer.py builds for a new question in the resumed chat, as the text the engine gets: the
    chat's messages put back into Chainlit's chat context as chainlit/socket.py does on resume, then the app's
    own shown_turns and the model's chat template."""
    import chainlit as cl
    from chainlit.chat_context import chat_context

    from app.conversation import ChatTemplate
    from app.ui.chat_messages import shown_turns

    store = HistoryStore.open(location)
    try:
        thread = await store.layer.get_thread(thread_id)
    finally:
        await store.close()
    init_http_context()
    for step in thread["steps"]:
        if "message" in step["type"]:
            chat_context.add(cl.Message.from_dict(step))
    new = cl.Message(content="question 3", type="user_message")
    earlier = [turn for turn, _ in shown_turns(new)]
    ids = ChatTemplate(tokenizer).encode(earlier + [{"role": "user", "content": "question 3"}])
    return tokenizer.decode(ids)


def test_export_then_import_keeps_the_order_of_a_resumed_chat_up_to_the_engine_prompt(tmp_path):
    from tests.tiny_model import build_tokenizer

    source, target, out = tmp_path / "source", tmp_path / "target", tmp_path / "backup"
    thread_id = asyncio.run(make_answered_chat(location_in(source)))
    assert launch("export", "--data-dir", str(source), "--out", str(out)).returncode == 0
    (exported,) = out.rglob("*.json")
    times = [m["created_at"] for m in json.loads(exported.read_text(encoding="utf-8"))["messages"]]
    assert None not in times and times == sorted(times)  # every answer with its real time (null before)
    imported = launch("import", "--data-dir", str(target), str(exported))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    tokenizer = build_tokenizer(tmp_path / "tokenizer")  # the tiny model's: byte-level, decodes text exactly
    prompt = asyncio.run(resumed_prompt(location_in(target), thread_id, tokenizer))
    order = ["question 1 about lighthouses", "answer 1 from the keeper", "question 2 about lighthouses",
             "answer 2 from the keeper", "question 3"]
    at = [prompt.find(text) for text in order]
    assert -1 not in at and at == sorted(at), prompt  # question, answer, question, answer: not every question first
    assert "`prompt 9 tokens`" not in prompt  # the stats line is the page's, not the answer's
    assert prompt == asyncio.run(resumed_prompt(location_in(source), thread_id, tokenizer))


def test_a_database_from_a_newer_version_stops_the_app_with_one_line(tiny_model_dir, tmp_path):
    import sqlite3

    from app.history.schema import SCHEMA_VERSION
    from tests.support.app_process import free_port

    asyncio.run(prepare_database(location_in(tmp_path)))
    with sqlite3.connect(tmp_path / "chats.db") as conn:
        conn.execute("update ernie_meta set value = ?", (str(SCHEMA_VERSION + 1),))
    def dump():
        with sqlite3.connect(tmp_path / "chats.db") as conn:
            return list(conn.iterdump())

    before = dump()
    # a local model: a hub id would ask the hub first, and CI has none
    result = launch("--model", str(tiny_model_dir), "--data-dir", str(tmp_path), "--port", str(free_port()),
                    "--log-file", str(tmp_path / "log"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: the chat database {tmp_path / 'chats.db'} has schema version {SCHEMA_VERSION + 1}, newer than "
        f"this ernie-chat knows ({SCHEMA_VERSION}): upgrade ernie-chat, or use another --data-dir / --database-url")
    assert dump() == before  # never rewritten


async def ask_in_resumed_chat(app, client, thread_id: str, text: str, events: list) -> str:
    """Open the chat as the page does from the sidebar, wait until it is resumed (the page takes no input
    before), then ask; the finished answer, with its stats line."""
    from tests.support.chat_socket import finished_answer, socket_connect

    sio = await socket_connect(app, client, thread_id, events)
    try:
        deadline = time.monotonic() + 60
        while not any(name == "resume_thread" for name, _ in events):
            assert time.monotonic() < deadline, f"not resumed; events: {[e for e, _ in events]}"
            await asyncio.sleep(0.1)
        await sio.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "local",
            "output": text, "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())},
            "fileReferences": []})
        while (answer := finished_answer(events)) is None:
            assert time.monotonic() < deadline + 120, f"no answer; events: {[e for e, _ in events][-10:]}"
            await asyncio.sleep(0.1)
        return answer
    finally:
        await sio.disconnect()


KEEPER = [("user", "Who keeps the lighthouse on the rock?"), ("assistant", "A keeper who lives in the tower."),
          ("user", "What does the keeper do at night?"), ("assistant", "The keeper tends the lamp until dawn.")]


def chatgpt_file(folder, turns=KEEPER):
    """ChatGPT's conversations.json with one chat, "The keeper" (its published mapping-tree shape)."""
    nodes = {"root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}}
    for n, (role, text) in enumerate(turns):
        nodes[f"n{n}"] = {"id": f"n{n}", "parent": "root" if n == 0 else f"n{n - 1}",
                          "children": [f"n{n + 1}"] if n < len(turns) - 1 else [],
                          "message": {"id": f"n{n}", "author": {"role": role, "name": None, "metadata": {}},
                                      "create_time": 1717000000.0 + n, "content": {"content_type": "text",
                                                                                   "parts": [text]},
                                      "status": "finished_successfully", "metadata": {}, "recipient": "all"}}
    export = folder / "conversations.json"
    export.write_text(json.dumps([{"title": "The keeper", "id": "gpt-keeper", "create_time": 1717000000.0,
                                   "mapping": nodes, "current_node": f"n{len(turns) - 1}"}]))
    return export


def test_import_user_puts_another_apps_chat_in_that_users_sidebar(tiny_model_dir, tmp_path):
    """With per-user logins nobody logs in as the local user: `import --user alice` makes the chat Alice's, and
    the real app lists it in her sidebar (Chainlit's /project/threads), not in Bob's. Without --user the chat is
    refused, and a --user nobody logs in as stops the command; each says so in one line naming the flag."""
    import httpx

    from app.accounts import Accounts
    from tests.support.app_process import LaunchedApp

    data = tmp_path / "data"
    secrets = {"alice": "alices-own-secret", "bob": "bobs-own-secret"}
    for name, secret in secrets.items():
        Accounts(data / "users.json").add(name, secret)
    export = str(chatgpt_file(tmp_path))
    unowned = launch("import", "--data-dir", str(data), export)
    assert unowned.returncode == 1
    assert ('  refused: chat 1 "The keeper": whose chat is it? users log in here: give --user NAME (alice, bob)'
            in unowned.stdout.splitlines())
    nobody = launch("import", "--data-dir", str(data), "--user", "carol", export)
    assert nobody.returncode == 2 and nobody.stdout == ""
    assert nobody.stderr.splitlines() == ["error: invalid --user 'carol': chats can be imported for alice, bob"]
    owned = launch("import", "--data-dir", str(data), "--user", "alice", export)
    assert owned.returncode == 0 and '  imported: chat 1 "The keeper", 4 messages' in owned.stdout.splitlines(), \
        owned.stdout
    app = LaunchedApp(tiny_model_dir, tmp_path, "--data-dir", str(data))
    try:
        app.wait_http()  # the sidebar's list needs the database and a login, not the engine
        sidebars = {}
        for name, secret in secrets.items():
            with httpx.Client(base_url=app.url, timeout=30) as client:
                assert client.post("/login", data={"username": name, "password": secret}).status_code == 200
                listed = client.post("/project/threads", json={"pagination": {"first": 20}, "filter": {}})
                sidebars[name] = [chat["name"] for chat in listed.json()["data"]]
    finally:
        app.stop()
        app.kill()
    assert sidebars == {"alice": ["The keeper"], "bob": []}


def test_a_chat_imported_from_chatgpt_resumes_with_its_turns_in_the_engine_prompt(tiny_model_dir, tmp_path):
    """The real app and engine: the imported chat opens (Chainlit's resume) for the local user, and the next
    question's prompt, counted by vLLM, is exactly the old turns, in file order, plus the question."""
    import re
    import sqlite3

    import httpx
    from transformers import AutoTokenizer

    from app.conversation import ChatTemplate
    from tests.support.app_process import get, running_app
    from tests.support.metrics import metric_value

    turns = KEEPER
    export = chatgpt_file(tmp_path)
    data = tmp_path / "data"
    assert launch("import", "--data-dir", str(data), str(export)).returncode == 0
    with sqlite3.connect(data / "chats.db") as conn:
        ((thread_id,),) = conn.execute("select id from threads").fetchall()
    question = "And in the morning?"
    messages = [{"role": role, "content": text} for role, text in turns] + [{"role": "user", "content": question}]
    expected = len(ChatTemplate(AutoTokenizer.from_pretrained(tiny_model_dir)).encode(messages))
    with running_app(tiny_model_dir, tmp_path, "--data-dir", str(data), "--max-tokens", "16") as app:
        client = httpx.Client(base_url=app.url, timeout=30)
        client.get("/")  # the page logs the local user in (a cookie)
        before = metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")
        events: list = []
        answer = asyncio.run(ask_in_resumed_chat(app, client, thread_id, question, events))
        after = metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")
        client.close()
    resumed = [data for name, data in events if name == "resume_thread"]
    assert len(resumed) == 1 and [s["output"] for s in resumed[0]["steps"]] == [t for _, t in turns]
    prompt = int(re.search(r"prompt (\d+) tokens", answer).group(1))
    assert prompt == after - before == expected, (prompt, after - before, expected)


def test_an_imported_chats_metadata_brings_only_its_settings_and_the_chat_answers(tiny_model_dir, tmp_path):
    """N15 (issue 36): an imported chat's metadata went into the session whole when the chat was opened: one whose
    metadata said ``answer_tasks: [1, 2, 3]`` refused every message ("already has 3 answers running"), and
    ``is_shared`` opened it to others. Now each field is checked; only the settings panel's values are kept."""
    import sqlite3

    import httpx

    from tests.support.app_process import running_app

    hostile = {"answer_tasks": [1, 2, 3], "is_shared": True, "shared_at": "2026-12-01", "history_warned": True,
               "regenerate_action": {"name": "regenerate"}, "env": {"KEY": "x"},
               "chat_settings": {"system_prompt": "be brief", "temperature": "hot", "top_p": 0.5, "max_tokens": True,
                                 "unknown": 1}}
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"format": "ernie-chat/chat-v1", "id": "hostile-chat", "name": "Hostile",
                                "user": "local", "metadata": hostile,
                                "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}))
    data = tmp_path / "data"
    assert launch("import", "--data-dir", str(data), str(path)).returncode == 0
    with sqlite3.connect(data / "chats.db") as conn:
        stored = json.loads(conn.execute("select metadata from threads where id = 'hostile-chat'").fetchone()[0])
    assert stored == {"chat_settings": {"system_prompt": "be brief", "top_p": 0.5}}

    async def ask(app, client) -> str:
        events: list = []
        answer = await ask_in_resumed_chat(app, client, "hostile-chat", "still there?", events)
        said = [d.get("output", "") for n, d in events if n == "new_message" and isinstance(d, dict)]
        assert not any("answers running or waiting" in text for text in said), said
        return answer

    with running_app(tiny_model_dir, tmp_path, "--data-dir", str(data), "--max-tokens", "16") as app, \
            httpx.Client(base_url=app.url, timeout=30) as client:
        client.get("/")  # the page logs the local user in (a cookie)
        assert "prompt" in asyncio.run(ask(app, client))
        assert client.get("/project/share/hostile-chat").status_code == 404


def test_a_chat_that_takes_long_to_write_is_imported_and_so_are_the_chats_after_it(tmp_path):
    """N8 (issue 36): a chat that took over 60 s to write (20,000 messages: ~75 s) failed with a false "database
    is busy" and the file's later chats were skipped: exit 2, 0 rows (here on f9ee3fd 50,000 messages: the same).
    Now there is no wall-clock limit on a chat being written, a long one says how far it got, and the chat after it
    lands too."""
    def chat(count: int, title: str) -> dict:
        return {"id": title, "title": title, "chat": {"messages": [
            {"role": "user" if n % 2 == 0 else "assistant", "content": f"{title} message {n}"} for n in range(count)]}}

    big = tmp_path / "open-webui.json"
    big.write_text(json.dumps([chat(50_000, "Long"), chat(2, "Short")]))
    result = launch("import", "--data-dir", str(tmp_path / "db"), str(big))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert '  writing chat 1 "Long": 10,000 of 50,000 messages' in lines
    assert '  imported: chat 1 "Long", 50000 messages' in lines and '  imported: chat 2 "Short", 2 messages' in lines
    with contextlib.closing(sqlite3.connect(tmp_path / "db" / "chats.db")) as conn:
        counts = dict(conn.execute("select t.name, count(*) from steps s join threads t on t.id = s.thread_id "
                                   "group by t.name"))
    assert counts == {"Long": 50_000, "Short": 2}
