"""Chat files that `launch.py import` reads (app/history/importers.py), each written here from its app's
published structure, never from our own exporter:

- ChatGPT's conversations.json: the types of sjhomer/recovery-gpt (types/index.d.ts: Conversation {title,
  create_time, update_time, mapping: {id: {id, message, parent, children}}, current_node, id}; Message {id,
  author {role, name, metadata}, create_time, content {content_type, parts}, status, end_turn, weight,
  metadata, recipient}), and Open WebUI's own ChatGPT importer (open-webui/open-webui src/lib/utils/index.ts,
  convertOpenAIMessages: a root node whose message is null, parts[0], content.text, system and tool roles).
  Tool calls (recipient "python", content_type "code", author "tool" with "execution_output") and image parts
  ({"content_type": "image_asset_pointer", ...} objects among parts) as ChatGPT writes them for code and images.
- Open WebUI's "Export chats": src/lib/components/chat/Settings/DataControls.svelte exportChats writes
  JSON.stringify(getAllChats()), a list of backend/open_webui/models/chats.py ChatResponse {id, user_id, title,
  chat, updated_at, created_at, share_id, archived, pinned, meta, folder_id}; chat.history {messages: {id:
  {id, parentId, childrenIds, role, content, timestamp (epoch seconds), models | model}}, currentId} as
  src/lib/components/chat/Chat.svelte builds each message; older chats carry a chat.messages list.
- OpenAI's chat format: openai-python's types/chat/chat_completion_*_message_param.py: role, content a string
  or a list of parts ({"type": "text", "text"} or image_url ...), an assistant's content None with tool_calls,
  "developer" for system instructions, "tool" messages with tool_call_id.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from app.errors import SettingsError
from app.history.database import DatabaseLocation
from app.history.importers import (
    EXPORT_FORMAT,
    LIMITS,
    PRESETS_FORMAT,
    ImportRefused,
    Limits,
    in_file_order,
    parse_limited,
    read_chat_file,
)
from app.history.restore import ImportOwner, LazyStore, import_files
from app.history.transfer import run_transfer
from app.private_files import make_private_folder, write_private

OWNER = "local"


def write(tmp_path, name, data) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def read(tmp_path, name, data, limits=LIMITS):
    return read_chat_file(Path(write(tmp_path, name, data)), OWNER, limits)


def said(reading, n=0):
    """(role, text) of the chat's messages, in stored order."""
    return [("user" if s["type"] == "user_message" else "assistant", s["output"])
            for s in reading.chats[n].data["steps"]]


def refused(tmp_path, name, data, limits=LIMITS) -> str:
    with pytest.raises(ImportRefused) as caught:
        read_chat_file(tmp_path / name if data is None else Path(write(tmp_path, name, data)), OWNER, limits)
    line = str(caught.value)
    assert "\n" not in line and "Traceback" not in line
    return line


# ----- ChatGPT ---------------------------------------------------------------------------------------------
def gpt_node(node_id, parent, children, role=None, parts=None, at=None, content_type="text", recipient="all",
             **content):
    message = None
    if role is not None:
        message = {"id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": at,
                   "update_time": None, "content": {"content_type": content_type, **content},
                   "status": "finished_successfully", "end_turn": True, "weight": 1.0, "metadata": {},
                   "recipient": recipient}
        if parts is not None:
            message["content"]["parts"] = parts
    return node_id, {"id": node_id, "message": message, "parent": parent, "children": children}


def gpt_conversation(conv_id, title, nodes, current_node=None):
    conv = {"title": title, "create_time": 1717000000.5, "update_time": 1717000900.0,
            "mapping": dict(nodes), "moderation_results": [], "plugin_ids": None, "id": conv_id,
            "conversation_id": conv_id}
    if current_node is not None:
        conv["current_node"] = current_node
    return conv


def chatgpt_export():
    edited = gpt_conversation("c-1", "Lighthouses", [
        gpt_node("root", None, ["sys"]),  # ChatGPT's root: no message
        gpt_node("sys", "root", ["q1"], "system", [""]),
        gpt_node("q1", "sys", ["a1"], "user", ["Who keeps a lighthouse?"], 1717000001.0),
        gpt_node("a1", "q1", ["q2-old", "q2"], "assistant", ["A lighthouse keeper."], 1717000002.0),
        gpt_node("q2-old", "a1", ["a2-old"], "user", ["an edited-away question"], 1717000003.0),
        gpt_node("a2-old", "q2-old", [], "assistant", ["an answer on the old branch"], 1717000004.0),
        gpt_node("q2", "a1", ["code"], "user",
                 [{"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}, "How tall is it?"],
                 1717000005.0, content_type="multimodal_text"),
        gpt_node("code", "q2", ["out"], "assistant", None, 1717000006.0, content_type="code",
                 recipient="python", language="python", text="print(30 * 1.5)"),
        gpt_node("out", "code", ["a2"], "tool", None, 1717000007.0, content_type="execution_output", text="45.0"),
        gpt_node("a2", "out", [], "assistant", ["About 45 metres."], None),
    ], current_node="a2")
    no_current = gpt_conversation("c-2", None, [
        gpt_node("r", None, ["u"]),
        gpt_node("u", "r", ["b"], "user", ["量子纠缠是什么？"], 1717100000.0),
        gpt_node("b", "u", [], "assistant", ["两个粒子之间的特殊联系。"], 1717100001.0),
    ])
    return [edited, no_current]


def test_chatgpt_opens_at_current_node_and_keeps_the_edited_branch(tmp_path):
    reading = read(tmp_path, "conversations.json", chatgpt_export())
    assert reading.kind == "ChatGPT export" and len(reading.chats) == 2
    # Root, system and tool nodes and the call to the tool are left out; the image part carries no text.
    assert said(reading) == [("user", "Who keeps a lighthouse?"), ("assistant", "A lighthouse keeper."),
                             ("user", "How tall is it?"), ("assistant", "About 45 metres.")]
    chat = reading.chats[0].data
    assert chat["name"] == "Lighthouses" and chat["user"] == OWNER
    assert [s["createdAt"] for s in chat["steps"]] == [
        "2024-05-29T16:26:41.000000Z", "2024-05-29T16:26:42.000000Z", "2024-05-29T16:26:45.000000Z",
        "2024-05-29T16:26:45.000001Z"]  # the answer without a time comes just after the question
    # The edited-away question is a branch of the question that replaced it, with its answer (app/history/trees.py).
    assert [s["metadata"] for s in chat["steps"]] == [{}, {"kind": "answer"}, {"branches": [
        {"text": "an edited-away question", "after": [{"type": "assistant_message", "name": "Assistant",
                                                       "output": "an answer on the old branch",
                                                       "metadata": {"kind": "answer"}}]},
        {"text": "How tall is it?", "after": None}], "branch": 1}, {"kind": "answer"}]
    assert chat["created_at"] == "2024-05-29T16:26:40.500000Z"
    # Without current_node: the last leaf; without a title: the first question names it.
    assert said(reading, 1) == [("user", "量子纠缠是什么？"), ("assistant", "两个粒子之间的特殊联系。")]
    assert reading.chats[1].data["name"] == "量子纠缠是什么？"


def test_chatgpt_ids_are_stable_and_a_looping_tree_is_refused(tmp_path):
    export = chatgpt_export()
    first = read(tmp_path, "a.json", export)
    again = read(tmp_path, "b.json", export)
    assert [c.data["id"] for c in first.chats] == [c.data["id"] for c in again.chats]
    looped = gpt_conversation("c-3", "loop", [
        gpt_node("x", "y", ["y"], "user", ["one"], 1.0e9), gpt_node("y", "x", ["x"], "assistant", ["two"], 1.0e9)],
        current_node="y")
    reading = read(tmp_path, "loop.json", [looped, export[1]])
    assert reading.chats[0].data is None
    assert reading.chats[0].refused.startswith("its tree loops: 2 of its messages are their own ancestors")
    assert said(reading, 1)[0] == ("user", "量子纠缠是什么？")  # the file's other chat is read


# ----- Open WebUI ------------------------------------------------------------------------------------------
def webui_message(mid, parent, children, role, content, ts):
    extra = {"models": ["llama3:8b"]} if role == "user" else {"model": "llama3:8b", "done": True}
    return {"id": mid, "parentId": parent, "childrenIds": children, "role": role, "content": content,
            "timestamp": ts, **extra}


def webui_export():
    messages = {
        "u1": webui_message("u1", None, ["a1-first", "a1"], "user", "Name a sea.", 1718000000),
        "a1-first": webui_message("a1-first", "u1", [], "assistant", "a regenerated-away answer", 1718000001),
        "a1": webui_message("a1", "u1", ["u2"], "assistant", "The Baltic Sea.", 1718000002),
        "u2": webui_message("u2", "a1", ["a2"], "user", "Is it salty?", 1718000003),
        "a2": webui_message("a2", "u2", [], "assistant", "Less than the ocean.", 1718000003),  # same second
    }
    chat = {"id": "", "title": "Seas", "models": ["llama3:8b"], "params": {"system": "Answer in one line."},
            "history": {"messages": messages, "currentId": "a2"},
            "messages": [messages[k] for k in ("u1", "a1", "u2", "a2")], "tags": [], "timestamp": 1718000000000,
            "files": []}
    current = {"id": "owui-1", "user_id": "b06fefb8-0000", "title": "Seas", "chat": chat,
               "updated_at": 1718000003, "created_at": 1718000000, "share_id": None, "archived": False,
               "pinned": False, "meta": {"tags": []}, "folder_id": None}
    older = {"id": "owui-2", "user_id": "b06fefb8-0000", "title": "Old one", "updated_at": 1700000001,
             "created_at": 1700000000, "share_id": None, "archived": False,
             "chat": {"title": "Old one", "messages": [
                 {"id": "m1", "role": "user", "content": "hello", "timestamp": 1700000000},
                 {"id": "m2", "role": "assistant", "content": "hi there", "timestamp": 1700000001}]}}
    return [current, older]


def test_open_webui_opens_at_current_id_and_keeps_the_regenerated_answer(tmp_path):
    reading = read(tmp_path, "chat-export-1718.json", webui_export())
    assert reading.kind == "Open WebUI export"
    assert said(reading) == [("user", "Name a sea."), ("assistant", "The Baltic Sea."), ("user", "Is it salty?"),
                             ("assistant", "Less than the ocean.")]
    chat = reading.chats[0].data
    # The answer regenerated away ended the chat there: a version of the answer that replaced it.
    assert chat["steps"][1]["metadata"] == {"kind": "answer", "shown": 1, "versions": [
        {"text": "a regenerated-away answer", "footer": ""}, {"text": "The Baltic Sea.", "footer": ""}]}
    assert chat["metadata"] == {"chat_settings": {"system_prompt": "Answer in one line."}}
    stamps = [s["createdAt"] for s in chat["steps"]]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4  # the tie in the file became two rising times
    assert stamps[0] == "2024-06-10T06:13:20.000000Z" and chat["name"] == "Seas"
    assert said(reading, 1) == [("user", "hello"), ("assistant", "hi there")]  # no history: its messages list


# ----- OpenAI messages -------------------------------------------------------------------------------------
def test_openai_messages_with_parts_tools_and_a_system_prompt(tmp_path):
    data = {"messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                                     {"type": "text", "text": "What is in the picture?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "And its colour?", "name": "ann"},
        {"role": "assistant", "content": [{"type": "text", "text": "Grey."}]},
    ]}
    reading = read(tmp_path, "messages.json", data)
    assert reading.kind == "OpenAI messages file"
    assert said(reading) == [("user", "What is in the picture?"), ("assistant", "A cat."),
                             ("user", "And its colour?"), ("assistant", "Grey.")]
    chat = reading.chats[0].data
    assert chat["metadata"] == {"chat_settings": {"system_prompt": "Be brief."}}
    stamps = [s["createdAt"] for s in chat["steps"]]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4  # no times in the format: made, rising
    again = read(tmp_path, "copy.json", data)
    assert again.chats[0].data["id"] == chat["id"]  # no id in the file: the content names it


# ----- our own format ----------------------------------------------------------------------------------------
def ours(**extra):
    return {"format": "ernie-chat/chat-v1", "id": "11111111-2222-3333-4444-555555555555", "name": "Ours",
            "created_at": "2026-12-03T10:00:00.000Z", "user": "alice", "tags": [], "metadata": {}, **extra}


def test_our_format_without_steps_is_made_from_its_messages(tmp_path):
    data = ours(messages=[{"role": "user", "content": "q1", "created_at": "2026-12-03T10:00:01.000Z"},
                          {"role": "assistant", "content": "a1", "created_at": None},
                          {"role": "user", "content": "q2", "created_at": "2026-12-03T10:00:03.000Z"},
                          {"role": "assistant", "content": "a2", "created_at": None}])
    reading = read(tmp_path, "ours.json", data)
    assert said(reading) == [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")]
    chat = reading.chats[0].data
    assert chat["id"] == data["id"] and chat["user"] == "alice"
    assert [s["createdAt"] for s in chat["steps"]] == [
        "2026-12-03T10:00:01.000000Z", "2026-12-03T10:00:01.000001Z", "2026-12-03T10:00:03.000000Z",
        "2026-12-03T10:00:03.000001Z"]


def test_our_format_with_steps_keeps_them_and_fixes_only_their_order(tmp_path):
    steps = [{"id": "s1", "type": "user_message", "output": "q", "createdAt": "2026-12-03T10:00:01.000Z"},
             {"id": "s2", "type": "assistant_message", "output": "a", "createdAt": "2026-12-03T10:00:02.000Z",
              "metadata": {"kind": "answer"}}]
    kept = read(tmp_path, "kept.json", ours(steps=steps))
    assert kept.chats[0].data["steps"] == steps  # rising already: exactly as written
    steps[1]["createdAt"] = None  # as a streamed answer was exported before its time was written
    fixed = read(tmp_path, "fixed.json", ours(steps=steps))
    assert [s["createdAt"] for s in fixed.chats[0].data["steps"]] == ["2026-12-03T10:00:01.000000Z",
                                                                      "2026-12-03T10:00:01.000001Z"]


@pytest.mark.parametrize("data, reason", [
    (ours(format="ernie-chat/chat-v9", steps=[]), "format 'ernie-chat/chat-v9' is not ernie-chat/chat-v1"),
    (ours(id=None, steps=[]), "its id is not a text of 1 to 64 characters"),
    (ours(steps="x"), "its steps is not a list"),
    (ours(), "it has neither steps nor a messages list"),
    (ours(messages=[{"role": "system", "content": "only this"}]), "no user or assistant messages with text in it"),
])
def test_our_format_broken_chats_are_refused_with_the_reason(tmp_path, data, reason):
    reading = read(tmp_path, "bad.json", data)
    assert reading.chats[0].data is None
    assert reading.chats[0].refused.startswith(reason)


# ----- broken and bomb files ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, reason", [
    ("", "not valid JSON"),
    ('{"messages": [', "not valid JSON"),
    ("not json at all", "not valid JSON"),
    ("[1, 2, 3]", "not a chat file this import reads"),
    ("{}", "not a chat file this import reads"),
    ('{"hello": 1}', "not a chat file this import reads"),
    ("[]", "an empty list: no chats in it"),
    ('"just a string"', "not a chat file this import reads"),
])
def test_broken_files_are_refused_in_one_line(tmp_path, text, reason):
    assert refused(tmp_path, "broken.json", text).startswith(reason)


def test_unreadable_files_are_refused_in_one_line(tmp_path):
    assert refused(tmp_path, "missing.json", None) == "cannot read it: No such file or directory"
    (tmp_path / "folder.json").mkdir()
    assert refused(tmp_path, "folder.json", None) == "not a regular file"
    (tmp_path / "latin1.json").write_bytes(b'{"messages": [{"role": "user", "content": "caf\xe9"}]}')
    assert refused(tmp_path, "latin1.json", None).startswith("not valid JSON")


def test_a_bad_chat_in_a_file_is_refused_and_the_others_read(tmp_path):
    export = chatgpt_export()
    export.insert(1, {"title": "broken", "mapping": "not a tree", "id": "c-9"})
    export.append({"title": "weird", "mapping": {"n": {"message": {"author": "user", "content": 5}}}, "id": "w"})
    reading = read(tmp_path, "mixed.json", export)
    outcome = [(c.label, c.refused) for c in reading.chats]
    assert outcome == [('chat 1 "Lighthouses"', ""), ('chat 2 "broken"', "its mapping holds no messages"),
                       ("chat 3", ""), ('chat 4 "weird"', "cannot be read ('str' object has no attribute 'get')")]


def test_a_file_over_the_size_limit_is_refused_from_its_size_alone(tmp_path):
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(LIMITS.max_bytes + 1)  # sparse: nothing to read, and nothing is read
    started = time.perf_counter()
    assert refused(tmp_path, "huge.json", None) == ("268,435,457 bytes; at most 268,435,456 bytes (256 MiB) are "
                                                    "read from one file")
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    '{"messages": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}",
    "[" * 100_000,  # and never closed
])
def test_deep_nesting_is_refused_before_parsing(tmp_path, text):
    started = time.perf_counter()
    assert refused(tmp_path, "deep.json", text) == "nested deeper than 100 levels"
    assert time.perf_counter() - started < 2


def test_the_nesting_scan_reads_json_not_brackets():
    text = json.dumps({"messages": [{"role": "user", "content": "[" * 5000 + "{" * 5000}]})
    assert parse_limited(text.encode())["messages"][0]["content"].startswith("[[[")
    with pytest.raises(ImportRefused):
        parse_limited(json.dumps([[[[1]]]]).encode(), Limits(max_depth=3))


def test_too_many_chats_or_messages_are_refused(tmp_path):
    many = [{"mapping": {}, "title": str(n)} for n in range(LIMITS.max_chats + 1)]
    assert refused(tmp_path, "many.json", many) == "50,001 chats; at most 50,000 are read from one file"
    long_chat = {"messages": [{"role": "user", "content": f"m{n}"} for n in range(11)]}
    reading = read(tmp_path, "long.json", long_chat, Limits(max_messages=10))
    assert reading.chats[0].refused == "11 messages; at most 10 per chat"


def test_times_keep_the_file_order():
    assert in_file_order(["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]) == ["2026-01-01T00:00:01Z",
                                                                              "2026-01-01T00:00:02Z"]
    # Equal, going back, missing, in milliseconds: all rising, in file order, one width.
    assert in_file_order([1_700_000_000_000, 1_700_000_000, None, 1_600_000_000, "garbage"]) == [
        "2023-11-14T22:13:20.000000Z", "2023-11-14T22:13:20.000001Z", "2023-11-14T22:13:20.000002Z",
        "2023-11-14T22:13:20.000003Z", "2023-11-14T22:13:20.000004Z"]
    assert in_file_order([None, 1_700_000_000], created=1_600_000_000)[0] == "2020-09-13T12:26:40.000000Z"
    # Times that rise, in mixed widths that sort wrongly as text ("00Z" after "00.500Z"), are rewritten.
    assert in_file_order(["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.500Z"]) == [
        "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.500000Z"]


# ----- into the database: reports, twice, no traceback ---------------------------------------------------
def run_import(tmp_path, files, owner: ImportOwner = ImportOwner()) -> tuple[list[str], object]:
    location = DatabaseLocation(f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}", tmp_path / "chats.db")
    lines: list[str] = []

    async def main():
        store = LazyStore(location)
        try:
            return await import_files(store, files, owner, lines.append)
        finally:
            await store.close()

    return lines, asyncio.run(main())


def test_importing_twice_imports_once_and_skips_the_second_time(tmp_path):
    files = [write(tmp_path, "conversations.json", chatgpt_export()), write(tmp_path, "owui.json", webui_export())]
    lines, report = run_import(tmp_path, files)
    assert lines == [f"{files[0]}: ChatGPT export, 2 chats", '  imported: chat 1 "Lighthouses", 4 messages',
                     "  imported: chat 2, 2 messages", f"{files[1]}: Open WebUI export, 2 chats",
                     '  imported: chat 1 "Seas", 4 messages', '  imported: chat 2 "Old one", 2 messages']
    assert (report.imported, report.there, report.refused) == (4, 0, 0)
    lines, report = run_import(tmp_path, files)
    assert lines[1] == '  skipped, already there: chat 1 "Lighthouses"'
    assert (report.imported, report.there, report.refused) == (0, 4, 0)


def owners_in(tmp_path) -> dict[str, str]:
    import sqlite3

    with sqlite3.connect(tmp_path / "chats.db") as conn:
        chats = dict(conn.execute("select name, user_identifier from threads"))
        presets = dict(conn.execute("select name, user_identifier from presets"))
    return {**chats, **{f"preset {name}": user for name, user in presets.items()}}


def test_with_users_another_apps_chat_needs_an_owner_named_by_user(tmp_path):
    """Nobody logs in as the local user once users exist: a chat with no owner of its own is refused, the line
    naming the flag and who may own it; ours keep their owner."""
    ours = write(tmp_path, "ours.json", {"format": EXPORT_FORMAT, "id": "our-chat", "name": "Ours", "user": "bob",
                                         "messages": [{"role": "user", "content": "hi"}]})
    files = [write(tmp_path, "conversations.json", chatgpt_export()), ours]
    lines, report = run_import(tmp_path, files, ImportOwner.checked(None, ["alice", "bob"]))
    assert lines[1] == ('  refused: chat 1 "Lighthouses": whose chat is it? users log in here: give --user NAME '
                        '(alice, bob)')
    assert (report.imported, report.refused) == (1, 2) and owners_in(tmp_path) == {"Ours": "bob"}


@pytest.mark.parametrize(("owners", "allowed"), [(["local"], "local"), (["alice", "bob"], "alice, bob")])
def test_a_chat_or_presets_of_someone_who_does_not_log_in_here_are_refused(tmp_path, owners, allowed):
    """Our own export names the login it was made under: kept under a name nobody logs in as, the chat would be in
    nobody's sidebar, and importing it again with --user would skip it as already there. So nothing is stored,
    and the line says both ways on."""
    ours = write(tmp_path, "ours.json", {"format": EXPORT_FORMAT, "id": "our-chat", "name": "Ours", "user": "carol",
                                         "messages": [{"role": "user", "content": "hi"}]})
    presets = write(tmp_path, "presets.json", {"format": PRESETS_FORMAT, "user": "carol", "presets": {
        "Brief": {"system_prompt": "be brief", "temperature": 0.2, "top_p": 0.9, "max_tokens": 64}}})
    lines, report = run_import(tmp_path, [ours, presets], ImportOwner.checked(None, owners))
    ways = f"give --user NAME ({allowed}), or add that user first (`python launch.py users add carol`)"
    assert lines == [f"{ours}: ernie-chat export, 1 chat",
                     f"  refused: chat 1 \"Ours\": whose chat is it? 'carol' does not log in here: {ways}",
                     f"{presets}: refused: whose presets are they? 'carol' does not log in here: {ways}"]
    assert (report.imported, report.refused, report.files_refused) == (0, 1, 1)
    _, report = run_import(tmp_path, [ours, presets], ImportOwner.checked(owners[0], owners))  # then with --user
    assert (report.imported, report.refused) == (1, 0) and set(owners_in(tmp_path).values()) == {owners[0]}


def test_user_names_the_owner_of_every_chat_and_preset_imported(tmp_path):
    ours = write(tmp_path, "ours.json", {"format": EXPORT_FORMAT, "id": "our-chat", "name": "Ours", "user": "bob",
                                         "messages": [{"role": "user", "content": "hi"}]})
    presets = write(tmp_path, "presets.json", {"format": PRESETS_FORMAT, "user": "bob", "presets": {
        "Brief": {"system_prompt": "be brief", "temperature": 0.2, "top_p": 0.9, "max_tokens": 64}}})
    files = [write(tmp_path, "conversations.json", chatgpt_export()), ours, presets]
    _, report = run_import(tmp_path, files, ImportOwner.checked("alice", ["alice", "bob"]))
    assert report.refused == 0
    assert set(owners_in(tmp_path).values()) == {"alice"} and len(owners_in(tmp_path)) == 4


@pytest.mark.parametrize(("name", "owners", "line"), [
    ("carol", ["alice", "bob"], "invalid --user 'carol': chats can be imported for alice, bob"),
    ("alice", ["local"], "invalid --user 'alice': chats can be imported for local (no users exist: "
                         "`python launch.py users add NAME` adds one)")])
def test_user_must_be_someone_who_logs_in_here(name, owners, line):
    with pytest.raises(SettingsError) as refused:
        ImportOwner.checked(name, owners)
    assert str(refused.value) == line


def test_a_bad_file_never_stops_the_others_and_the_exit_code_says_so(tmp_path, capsys):
    deep = write(tmp_path, "deep.json", "[" * 100_000)
    good = write(tmp_path, "good.json", {"messages": [{"role": "user", "content": "hi"},
                                                      {"role": "assistant", "content": "hello"}]})
    location = DatabaseLocation(f"sqlite+aiosqlite:///{tmp_path / 'db' / 'chats.db'}", tmp_path / "db" / "chats.db")
    (tmp_path / "db").mkdir()
    code = run_transfer("import", location, tmp_path, "json", [deep, str(tmp_path / "nope.json"), good])
    out = capsys.readouterr()
    assert code == 1 and "Traceback" not in out.out + out.err
    assert out.out.splitlines() == [
        f"{deep}: refused: nested deeper than 100 levels",
        f"{tmp_path / 'nope.json'}: refused: cannot read it: No such file or directory",
        f"{good}: OpenAI messages file, 1 chat", '  imported: chat 1, 2 messages',
        f"imported 1 of 1 chats into {location.shown} (0 already there; refused: 0 chats, 2 files)"]
    assert run_transfer("import", location, tmp_path, "json", [good]) == 0  # already there is not a failure


def test_nothing_is_written_when_every_file_is_refused(tmp_path):
    location = DatabaseLocation(f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}", tmp_path / "chats.db")
    assert run_transfer("import", location, tmp_path, "json", [write(tmp_path, "x.json", "{}")]) == 1
    assert not (tmp_path / "chats.db").exists()


# ----- private export files ----------------------------------------------------------------------------------
def test_export_files_are_0600_and_new_folders_0700_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        (tmp_path / "there").mkdir(mode=0o755)
        folder = tmp_path / "there" / "new" / "alice"
        make_private_folder(folder)
        write_private(folder / "chat.json", "{}")
        loose = tmp_path / "there" / "old.json"
        loose.write_text("old")
        loose.chmod(0o644)
        write_private(loose, "new")  # an earlier export's file, rewritten
    finally:
        os.umask(old)
    mode = lambda p: oct(p.stat().st_mode & 0o777)
    assert mode(folder / "chat.json") == mode(loose) == "0o600"
    assert mode(folder) == mode(folder.parent) == "0o700"
    assert mode(tmp_path / "there") == "0o755"  # a folder already there is left as it was
