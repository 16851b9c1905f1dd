"""The app's own UI strings in English and Simplified Chinese (Chainlit's chrome uses .chainlit/translations)."""
from __future__ import annotations

from typing import Any

STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "empty": "Your message is empty. Type a question and send it again.",
        "too_many_chars": "Your message has {chars:,} characters; the limit is {limit:,}. Please shorten it.",
        "too_long": "This message alone is {tokens:,} tokens, but the model's context holds {limit:,}. "
                    "Nothing was cut: please shorten it or split it into parts.",
        "dropped": "The chat is longer than the model's context ({limit:,} tokens): the oldest {turns} "
                   "message(s) are left out of what the model sees. They stay on screen.",
        "dropped_documents": " With them the model no longer sees {names}: attach a file again to ask about it.",
        "shortened": "Answer length capped at {tokens} tokens to fit the context.",
        "queued": "Queued: {position} ahead of you. Your answer starts when a slot frees up.",
        "waiting": "The model is still loading ({detail}). Your message will be answered when it is ready.",
        "failed": "The model could not start: {detail}. Your chat is kept; see the log file.",
        "engine_died": "The engine stopped unexpectedly ({detail}). It is restarting; your chat is kept. "
                       "Send your message again in a moment.",
        "refused": "The server refused this message: {detail}. Your chat is kept.",
        # each figure a code span of its own: a narrow page wraps the line between them (app/ui/static/ui/face.css)
        "stats": "`prompt {prompt} tokens` · `answer {tokens} tokens` · `first token {ttft:.2f} s` · "
                 "`{tps:.1f} tokens/s`",
        "settings_fixed": "{name}: {low} to {high}{whole}; {value} was asked for, so {used} is used.",
        "whole_numbers": ", whole numbers",
        "answers_name": "Answers at once",
        "status_title": "Status",
        "regenerate": "Regenerate",
        "continue": "Continue",
        "version_previous": "Previous version",
        "version_next": "Next version",
        "version_place": "Version {shown}/{count}",
        "branch_previous": "Previous branch",
        "branch_next": "Next branch",
        "branch_place": "Branch {shown}/{count}",
        "branches_full": "This question already keeps {limit} branches, the most one question keeps: the edit was "
                         "not made, and every branch is still here (◀ ▶). Fork the chat from an answer to go on "
                         "from there.",
        "branches_too_deep": "This question's branches already nest {limit} deep, the most kept: the edit was not "
                             "made, and every branch is still here (◀ ▶). Fork the chat from an answer to go on "
                             "from there.",
        "branch_not_there": "That branch is not in the chat as it is shown now: nothing was changed.",
        "branches_busy": "The chat is still changing to another branch or edit: nothing was changed. Try again once "
                         "it is shown.",
        "answer_running_edit": "An answer is being written: stop it or wait for it, then edit the question.",
        "answer_running_branches": "An answer is being written: stop it or wait for it, then try again.",
        "fork_refused": "This chat could not be forked from that answer (it is not a finished answer of your own "
                        "chat): nothing was made.",
        "fork": "Fork into a new chat",
        "fork_name": "Fork of {name}",
        "answers_same": "Temperature is 0, so these {count} answers will be the same: raise the temperature "
                        "(Settings) for different ones.",
        "versions_room": "This answer keeps at most {limit} versions: {room} of the {asked} answers asked for are "
                         "written, and every earlier version is still here (◀ ▶).",
        "answers_command": "Several answers",
        "answers_command_description": "Answer this message several ways at once, kept as versions of one answer "
                                       "(◀ ▶): as many as Settings -> Answers at once, or 3 when it is 1",
        "versions_full": "This answer already keeps {limit} versions, the most one answer keeps: nothing was "
                         "regenerated, and every version is still here (◀ ▶). Ask again in a new message instead.",
        "not_newest": "Only the newest answer can be regenerated or continued, and not while another answer is being "
                      "written: nothing was changed.",
        "length_limit": "The answer reached its length limit ({tokens} tokens): Continue writes more of it (Settings "
                        "-> Max answer tokens sets the limit).",
        "history_failing": "This chat is not saved yet: the chat database refuses writes ({detail}). They are "
                           "kept in order and tried again until it takes them; answers still come. See the log file.",
        "panel_history": "History",
        "history_waiting": "not saved yet: waiting {seconds:.0f} s for the chat database, trying again",
        "history_over_share": "not saved: too many of your changes wait for the chat database; yours are saved "
                              "again once those land",
        "too_many_waiting": "This chat already has {limit} answers running or waiting, so this message was not "
                            "answered. It stays in the chat: edit it to send it again when one has finished.",
        "sanitized": "Control characters were removed from your message.",
        # while the engine reads a long prompt, before the answer's first token (app/ui/reading_line.py)
        "reading_files": "Reading {names}…",
        "reading": "Reading your message: {tokens:,} tokens · {elapsed:.0f} s",
        "reading_left": "Reading your message: {tokens:,} tokens · {elapsed:.0f} s · about {left:.0f} s left (the "
                        "engine reads ~{rate:,.0f} tokens/s)",
        "reading_late": "Reading your message: {tokens:,} tokens · {elapsed:.0f} s · longer than the {estimate:.0f} s "
                        "estimated",
        "not_your_chat": "That chat belongs to another account, so it stays closed to you. This is a new chat of "
                         "your own.",
        # the login page: its own line is in .chainlit/translations (auth.login.errors.unauthorized); this one is
        # the 401's detail, which Chainlit's page also shows in a toast after "Unauthorized: "
        "login_failed": "wrong name or password; check both and try again",
        # status panel
        "panel_model": "Model",
        "panel_remote": "Remote vLLM server",
        "panel_card": "Card",
        "panel_profile": "Profile",
        "panel_engine": "Engine",
        "panel_context": "Context",
        "panel_context_value": "{tokens} tokens",
        "panel_restarts": "Restarts",
        "panel_speed": "Speed",
        # the engine's states and start steps (app/engine/starting.py and app/engine/watchdog.py word them as Phrases)
        "state_stopped": "stopped",
        "state_loading": "loading",
        "state_warming": "warming up",
        "state_ready": "ready",
        "state_restarting": "restarting",
        "state_failed": "failed",
        "detail_finding_model": "finding the model",
        "detail_local_cache": "looking in the local cache",
        "detail_downloading": "downloading {model} (first run only)",
        "detail_download_progress": "downloading {model}: {progress}",
        "detail_tokenizer": "loading the tokenizer",
        "detail_loading_engine": "loading the model into the engine",
        "detail_out_of_memory_retry": "out of memory; retrying with a smaller KV cache ({kv})",
        "detail_engine_up": "engine up in {seconds:.1f}s; first request",
        "detail_retrying_after": "retrying after: {error}",
        "detail_gave_up": "{reason}; gave up after {restarts} restarts",
        "speed_starting": "starting engine (eager) answers; full-speed engine being built, {seconds:.0f} s so far",
        "speed_full": "full speed (since {seconds:.0f} s after launch)",
        "speed_retrying": "starting engine (eager{cost}) answers; the full-speed engine did not start ({reason}) "
                          "and is being tried again, try {attempt} of {tries}",
        "history_damaged": "The chat history file was damaged, so a new, empty one was started. The old file is "
                           "kept, unchanged, as {path}.",
        "message_unreadable": "this message could not be read (its saved copy is damaged)",
        "interrupted": "interrupted: the app stopped before this answer was finished",
        "stopped": "stopped by you",
        "ready_took": "ready in {seconds:.1f}s",
        "speed_starting_only": "starting engine only (eager{cost}): the full-speed engine did not start: {reason} "
                               "(see the log)",
        # the compiled engine's decode against the eager one's on an H200: ~535 against 89-107 tok/s
        "starting_engine_cost_gpu": ", about 5x slower",
        "panel_download": "Download this chat",
        "panel_gpu_memory": "GPU memory (after load / peak / now)",
        "start_progress": "{bar} step {step} of {steps} · {seconds:.0f} s",
        # chat settings panel
        "setting_system_prompt": "System prompt",
        "setting_temperature": "Temperature",
        "setting_top_p": "top_p",
        "setting_max_tokens": "Max answer tokens",
        "setting_answers": "Answers at once (kept as versions of one answer)",
        # starters: (label, message)
        "starter_quantum_label": "Quantum entanglement in 3 sentences",
        "starter_quantum": "请用三句话解释量子纠缠，要求通俗易懂",
        "starter_poem_label": "A short poem about the sea",
        "starter_poem": "Write a short poem about the sea.",
        "starter_kv_label": "What is a KV cache?",
        "starter_kv": "Explain in simple words what the KV cache of a language model is.",
        # presets: commands in the composer (the command's id is what the menu shows)
        "preset_save_command": "Save preset",
        "preset_save_description": "Type a name and send: this chat's system prompt, temperature, top_p and "
                                   "answer length are kept under it",
        "preset_use_description": "Start with this preset: {summary}",
        "preset_saved": "Preset \u201c{name}\u201d saved. Pick it from the commands (/) to start a chat with it.",
        "preset_applied": "Preset \u201c{name}\u201d in use: {summary}.",
        "preset_refused": "The preset was not saved: {detail}.",
        "preset_name_length": "a preset name has 1 to {limit} characters; this one has {chars}",
        "preset_too_many": "at most {limit} presets per user",
        "preset_summary": "temperature {temperature}, top_p {top_p}, up to {max_tokens} tokens{prompt}",
        "preset_summary_prompt": ", system prompt \u201c{text}\u201d",
        # attached documents (app/documents): one line per file that is not read, or only partly
        "doc_too_big": "{name} is {size:.1f} MB; files up to {limit} MB can be attached (--max-upload-mb). "
                       "It was not read.",
        "doc_too_many": "{count} files were attached; up to {limit} are read per message (--max-upload-files). "
                        "Not read: {names}.",
        "doc_image": "{name} is an image, and the model reads text only. It was not read.",
        "doc_binary": "{name} is not text (it holds binary data), so it was not read. Attach text, Markdown, code, "
                      "CSV, JSON, HTML, PDF or DOCX.",
        "doc_unsupported": "{name} is a {what} file, which cannot be read. Attach text, Markdown, code, CSV, JSON, "
                           "HTML, PDF or DOCX.",
        "doc_encrypted": "{name} is an encrypted PDF, so it was not read. Save a copy without a password and "
                         "attach that.",
        "doc_corrupt": "{name} could not be read as a {kind}: the file is damaged ({detail}).",
        "doc_bomb": "{name} would unpack to more than {limit} MB or too many parts (a zip bomb?), so it was not read.",
        "doc_no_text": "{name} has no text layer (a scanned PDF?), and the model reads text only. It was not read.",
        "doc_empty": "{name} is empty.",
        "doc_too_slow": "Reading {name} took longer than {seconds} s, so it was stopped.",
        "doc_too_much_memory": "Reading {name} needed more than {limit} MB of memory, so it was stopped.",
        "doc_truncated": "{name} has more than {limit:,} characters of text; only the first {limit:,} are read.",
        "doc_passages": "{name} is {tokens:,} tokens, more than the {room:,} tokens of room left in the context: "
                        "the {used} of its {total} passages most relevant to your question are used ({where_kind} "
                        "{where}); {left} are left out. A later question about another part gets its own.",
        "doc_left_out": "{name} is {tokens:,} tokens, and the context has only {room:,} tokens of room left: "
                        "it was left out of this answer.",
        "doc_where_pages": "pages",
        "doc_where_lines": "lines",
    },
    "zh": {
        "empty": "消息为空。请输入问题后再发送。",
        "too_many_chars": "消息有 {chars:,} 个字符，上限为 {limit:,}。请缩短后再发送。",
        "too_long": "仅这条消息就有 {tokens:,} 个 token，而模型上下文只能容纳 {limit:,}。"
                    "未做任何截断：请缩短或分段发送。",
        "dropped": "对话已超过模型上下文（{limit:,} token）：最早的 {turns} 条消息不再提供给模型，但仍显示在页面上。",
        "dropped_documents": "模型也随之看不到 {names}：如需继续就其提问，请重新附加。",
        "shortened": "为适应上下文，本次回答长度上限调整为 {tokens} 个 token。",
        "queued": "排队中：前面还有 {position} 个请求。空出位置后立即开始回答。",
        "waiting": "模型仍在加载（{detail}）。就绪后会回答您的消息。",
        "failed": "模型无法启动：{detail}。对话已保留；详情见日志文件。",
        "engine_died": "推理引擎意外停止（{detail}），正在重启；对话已保留。请稍后重新发送。",
        "refused": "服务器拒绝了这条消息：{detail}。对话已保留。",
        "stats": "`提示 {prompt} 个 token` · `回答 {tokens} 个 token` · `首 token {ttft:.2f} 秒` · "
                 "`{tps:.1f} token/秒`",
        "settings_fixed": "{name}：{low} 到 {high}{whole}；请求了 {value}，将使用 {used}。",
        "whole_numbers": "（整数）",
        "answers_name": "同时回答数",
        "status_title": "状态",
        "regenerate": "重新生成",
        "continue": "继续",
        "version_previous": "上一个版本",
        "version_next": "下一个版本",
        "version_place": "版本 {shown}/{count}",
        "branch_previous": "上一个分支",
        "branch_next": "下一个分支",
        "branch_place": "分支 {shown}/{count}",
        "branches_full": "这个问题已保存 {limit} 个分支，已达上限：本次编辑未生效，所有分支都仍在（◀ ▶）。"
                         "可从某个回答分叉出新对话，在那里继续。",
        "branches_too_deep": "这个问题的分支已嵌套 {limit} 层，已达上限：本次编辑未生效，所有分支都仍在（◀ ▶）。"
                             "可从某个回答分叉出新对话，在那里继续。",
        "branch_not_there": "当前显示的对话中没有这个分支：未做任何更改。",
        "branches_busy": "对话仍在切换分支或编辑中：未做任何更改。请在显示完成后重试。",
        "answer_running_edit": "正在生成回答：请先停止或等待它完成，再编辑问题。",
        "answer_running_branches": "正在生成回答：请先停止或等待它完成，再重试。",
        "fork_refused": "无法从该回答分叉（它不是你自己对话中已完成的回答）：未创建新对话。",
        "fork": "分叉为新对话",
        "fork_name": "{name} 的分叉",
        "answers_same": "温度为 0，这 {count} 个回答将完全相同：在设置中调高温度即可得到不同的回答。",
        "versions_room": "每个回答最多保存 {limit} 个版本：请求的 {asked} 个回答中将生成 {room} 个，"
                         "之前的版本都仍在（◀ ▶）。",
        "answers_command": "多个回答",
        "answers_command_description": "同时用几种方式回答这条消息，保存为同一回答的多个版本（◀ ▶）："
                                       "数量取设置中的“同时回答数”，为 1 时生成 3 个",
        "versions_full": "这个回答已保存 {limit} 个版本，已达上限：本次未重新生成，所有版本都仍在（◀ ▶）。"
                         "如需再问，请发送一条新消息。",
        "not_newest": "只有最新的回答可以重新生成或继续，且不能在其他回答正在生成时进行：未做任何更改。",
        "length_limit": "回答已达到长度上限（{tokens} 个 token）：点击“继续”接着写（在设置 -> 最大生成长度 "
                        "中调整上限）。",
        "history_failing": "本对话尚未保存：聊天数据库拒绝写入（{detail}）。写入会按顺序保留并重试，直到成功；"
                           "回答仍会继续。详情见日志文件。",
        "panel_history": "聊天记录",
        "history_waiting": "尚未保存：已等待聊天数据库 {seconds:.0f} 秒，正在重试",
        "history_over_share": "未保存：你有过多的更改正在等待聊天数据库；这些写入完成后会恢复保存",
        "too_many_waiting": "本对话已有 {limit} 个回答正在生成或排队，这条消息未被回答。"
                            "它仍保留在对话中：待其中一个完成后，可编辑它重新发送。",
        "sanitized": "已移除消息中的控制字符。",
        "reading_files": "正在读取 {names}…",
        "reading": "正在读取你的消息：{tokens:,} 个 token · 已用 {elapsed:.0f} 秒",
        "reading_left": "正在读取你的消息：{tokens:,} 个 token · 已用 {elapsed:.0f} 秒 · 预计还需约 {left:.0f} 秒"
                        "（引擎读取速度约 {rate:,.0f} token/秒）",
        "reading_late": "正在读取你的消息：{tokens:,} 个 token · 已用 {elapsed:.0f} 秒 · 超出预计的 {estimate:.0f} 秒",
        "not_your_chat": "该对话属于其他账号，你无法打开。这里是你自己的新对话。",
        "login_failed": "用户名或密码错误，请检查后重试",
        "panel_model": "模型",
        "panel_remote": "远程 vLLM 服务",
        "panel_card": "显卡",
        "panel_profile": "配置",
        "panel_engine": "引擎",
        "panel_context": "上下文",
        "panel_context_value": "{tokens} 个 token",
        "panel_restarts": "重启次数",
        "panel_speed": "速度",
        "state_stopped": "已停止",
        "state_loading": "加载中",
        "state_warming": "预热中",
        "state_ready": "就绪",
        "state_restarting": "重启中",
        "state_failed": "失败",
        "detail_finding_model": "查找模型",
        "detail_local_cache": "在本地缓存中查找",
        "detail_downloading": "正在下载 {model}（仅首次运行）",
        "detail_download_progress": "正在下载 {model}：{progress}",
        "detail_tokenizer": "加载分词器",
        "detail_loading_engine": "将模型载入引擎",
        "detail_out_of_memory_retry": "显存不足；以更小的 KV 缓存重试（{kv}）",
        "detail_engine_up": "引擎 {seconds:.1f} 秒启动完成；正在处理首个请求",
        "detail_retrying_after": "出错后重试：{error}",
        "detail_gave_up": "{reason}；重启 {restarts} 次后放弃",
        "speed_starting": "启动引擎（eager）正在应答；全速引擎构建中（已 {seconds:.0f} 秒）",
        "speed_full": "全速（启动后第 {seconds:.0f} 秒起）",
        "speed_retrying": "启动引擎（eager{cost}）正在应答；全速引擎未能启动（{reason}），"
                          "正在重试：第 {attempt}/{tries} 次",
        "history_damaged": "聊天记录文件已损坏，已新建一个空的聊天记录。旧文件原样保留为 {path}。",
        "message_unreadable": "此消息无法读取（其保存的副本已损坏）",
        "interrupted": "已中断：应用在此回答完成前停止",
        "stopped": "已由你停止",
        "ready_took": "{seconds:.1f} 秒就绪",
        "speed_starting_only": "仅启动引擎（eager{cost}）：全速引擎未能启动：{reason}（详见日志）",
        "starting_engine_cost_gpu": "，约慢 5 倍",
        "panel_download": "下载本对话",
        "panel_gpu_memory": "显存（加载后 / 峰值 / 当前）",
        "start_progress": "{bar} 第 {step}/{steps} 步 · {seconds:.0f} 秒",
        "setting_system_prompt": "系统提示词",
        "setting_temperature": "温度 temperature",
        "setting_top_p": "top_p",
        "setting_max_tokens": "最大生成长度 (token)",
        "setting_answers": "同时回答数（保存为同一回答的多个版本）",
        "starter_quantum_label": "量子纠缠，三句话",
        "starter_quantum": "请用三句话解释量子纠缠，要求通俗易懂",
        "starter_poem_label": "写一首关于大海的短诗",
        "starter_poem": "写一首关于大海的短诗",
        "starter_kv_label": "解释什么是 KV 缓存",
        "starter_kv": "用简单的话解释大语言模型的 KV 缓存。",
        "preset_save_command": "保存预设",
        "preset_save_description": "输入名称后发送：保存本对话的系统提示词、温度、top_p 与回答长度",
        "preset_use_description": "使用此预设开始：{summary}",
        "preset_saved": "预设“{name}”已保存。可在命令菜单（/）中选择它来开始对话。",
        "preset_applied": "正在使用预设“{name}”：{summary}。",
        "preset_refused": "预设未保存：{detail}。",
        "preset_name_length": "预设名称应为 1 到 {limit} 个字符，此名称有 {chars} 个",
        "preset_too_many": "每位用户最多 {limit} 个预设",
        "preset_summary": "温度 {temperature}，top_p {top_p}，最多 {max_tokens} 个 token{prompt}",
        "preset_summary_prompt": "，系统提示词“{text}”",
        "doc_too_big": "{name} 大小为 {size:.1f} MB；可附加的文件上限为 {limit} MB（--max-upload-mb）。未读取该文件。",
        "doc_too_many": "附加了 {count} 个文件；每条消息最多读取 {limit} 个（--max-upload-files）。未读取：{names}。",
        "doc_image": "{name} 是图片，而模型只能读取文字。未读取该文件。",
        "doc_binary": "{name} 不是文本文件（含二进制数据），未读取。"
                      "请附加文本、Markdown、代码、CSV、JSON、HTML、PDF 或 DOCX。",
        "doc_unsupported": "{name} 是 {what} 文件，无法读取。"
                           "请附加文本、Markdown、代码、CSV、JSON、HTML、PDF 或 DOCX。",
        "doc_encrypted": "{name} 是加密的 PDF，未读取。请另存一份无密码的副本后再附加。",
        "doc_corrupt": "{name} 无法作为 {kind} 读取：文件已损坏（{detail}）。",
        "doc_bomb": "{name} 解压后会超过 {limit} MB 或包含过多部件（疑似压缩炸弹），未读取。",
        "doc_no_text": "{name} 没有文字层（可能是扫描版 PDF），而模型只能读取文字。未读取该文件。",
        "doc_empty": "{name} 是空文件。",
        "doc_too_slow": "读取 {name} 超过 {seconds} 秒，已停止。",
        "doc_too_much_memory": "读取 {name} 需要超过 {limit} MB 内存，已停止。",
        "doc_truncated": "{name} 的文字超过 {limit:,} 个字符；只读取前 {limit:,} 个。",
        "doc_passages": "{name} 有 {tokens:,} 个 token，超过上下文剩余的 {room:,} 个 token："
                        "已选用其 {total} 个段落中与你的问题最相关的 {used} 个（{where_kind} {where}），"
                        "其余 {left} 个未包含。之后问到其他部分时会另选相关段落。",
        "doc_left_out": "{name} 有 {tokens:,} 个 token，而上下文只剩 {room:,} 个 token：本次回答未包含该文件。",
        "doc_where_pages": "页码",
        "doc_where_lines": "行号",
    },
}


def lang_of(language: str | None) -> str:
    """Chainlit reports the browser language, e.g. 'zh-CN' or 'en-US'."""
    return "zh" if (language or "").lower().startswith("zh") else "en"


STARTERS = ("quantum", "poem", "kv")  # the starter prompts, each a "starter_<name>" and its "_label"


def starting_engine_cost(language: str | None, device: str) -> str:
    """What answering on the eager starting engine costs, where it was measured (a GPU); empty elsewhere."""
    return t(language, "starting_engine_cost_gpu") if device == "cuda" else ""


def t(language: str | None, key: str, **values: Any) -> str:
    """The string ``key`` in ``language`` with ``values`` filled in (a Phrase among them in that language too)."""
    return STRINGS[lang_of(language)][key].format(**{name: worded(language, value) for name, value in values.items()})


class Phrase(str):
    """One of the app's lines that is kept before it is shown (the engine's state detail): a plain ``str`` in
    English, as the log, /readyz and the terminal show it, that remembers its key and values, so that the page
    can word it in its own language (``worded``)."""

    key: str
    values: dict[str, Any]

    def __new__(cls, key: str, **values: Any) -> Phrase:
        phrase = super().__new__(cls, t("en", key, **values))
        phrase.key, phrase.values = key, values
        return phrase


def worded(language: str | None, text: Any) -> Any:
    """``text`` in ``language`` when it is a Phrase, or an error made from one; anything else (an error's own
    words, a number) as it is."""
    if isinstance(text, BaseException) and len(text.args) == 1:
        text = text.args[0]
    return t(language, text.key, **text.values) if isinstance(text, Phrase) else text
