"""The app's own UI strings in English and Simplified Chinese (Chainlit's chrome uses .chainlit/translations)."""
from __future__ import annotations

STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "empty": "Your message is empty. Type a question and send it again.",
        "too_many_chars": "Your message has {chars:,} characters; the limit is {limit:,}. Please shorten it.",
        "too_long": "This message alone is {tokens:,} tokens, but the model's context holds {limit:,}. "
                    "Nothing was cut: please shorten it or split it into parts.",
        "dropped": "The chat is longer than the model's context ({limit:,} tokens): the oldest {turns} "
                   "message(s) are left out of what the model sees. They stay on screen.",
        "shortened": "Answer length capped at {tokens} tokens to fit the context.",
        "queued": "Queued: {position} ahead of you. Your answer starts when a slot frees up.",
        "waiting": "The model is still loading ({detail}). Your message will be answered when it is ready.",
        "failed": "The model could not start: {detail}. Your chat is kept; see the log file.",
        "engine_died": "The engine stopped unexpectedly ({detail}). It is restarting; your chat is kept. "
                       "Send your message again in a moment.",
        "refused": "The server refused this message: {detail}. Your chat is kept.",
        "stats": "prompt {prompt} tokens · answer {tokens} tokens · first token {ttft:.2f} s · {tps:.1f} tokens/s",
        "settings_fixed": "Setting {name} = {value} is outside {low}..{high}; using {used}.",
        "status_title": "Status",
        "regenerate": "Regenerate",
        "history_failing": "This chat is not saved yet: the chat database refuses writes ({detail}). They are "
                           "kept in order and tried again until it takes them; answers still come. See the log file.",
        "panel_history": "History",
        "history_waiting": "not saved yet: waiting {seconds:.0f} s for the chat database, trying again",
        "too_many_waiting": "This chat already has {limit} answers running or waiting, so this message was not "
                            "answered. It stays in the chat: edit it to send it again when one has finished.",
        "sanitized": "Control characters were removed from your message.",
        # status panel
        "panel_remote": "Remote vLLM server",
        "panel_card": "Card",
        "panel_profile": "Profile",
        "panel_engine": "Engine",
        "panel_context": "Context",
        "panel_context_value": "{tokens} tokens",
        "panel_restarts": "Restarts",
        "panel_speed": "Speed",
        "speed_starting": "starting engine (eager) answers; full-speed engine being built, {seconds:.0f} s so far",
        "speed_full": "full speed (since {seconds:.0f} s after launch)",
        "history_damaged": "The chat history file was damaged, so a new, empty one was started. The old file is "
                           "kept, unchanged, as {path}.",
        "message_unreadable": "this message could not be read (its saved copy is damaged)",
        "interrupted": "interrupted: the app stopped before this answer was finished",
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
        # starters: (label, message)
        "starter_quantum_label": "Quantum entanglement in 3 sentences",
        "starter_quantum": "请用三句话解释量子纠缠，要求通俗易懂",
        "starter_poem_label": "A short poem about the sea",
        "starter_poem": "Write a short poem about the sea.",
        "starter_kv_label": "What is a KV cache?",
        "starter_kv": "Explain in simple words what the KV cache of a language model is.",
    },
    "zh": {
        "empty": "消息为空。请输入问题后再发送。",
        "too_many_chars": "消息有 {chars:,} 个字符，上限为 {limit:,}。请缩短后再发送。",
        "too_long": "仅这条消息就有 {tokens:,} 个 token，而模型上下文只能容纳 {limit:,}。"
                    "未做任何截断：请缩短或分段发送。",
        "dropped": "对话已超过模型上下文（{limit:,} token）：最早的 {turns} 条消息不再提供给模型，但仍显示在页面上。",
        "shortened": "为适应上下文，本次回答长度上限调整为 {tokens} 个 token。",
        "queued": "排队中：前面还有 {position} 个请求。空出位置后立即开始回答。",
        "waiting": "模型仍在加载（{detail}）。就绪后会回答您的消息。",
        "failed": "模型无法启动：{detail}。对话已保留；详情见日志文件。",
        "engine_died": "推理引擎意外停止（{detail}），正在重启；对话已保留。请稍后重新发送。",
        "refused": "服务器拒绝了这条消息：{detail}。对话已保留。",
        "stats": "提示 {prompt} 个 token · 回答 {tokens} 个 token · 首 token {ttft:.2f} 秒 · {tps:.1f} token/秒",
        "settings_fixed": "设置 {name} = {value} 超出范围 {low}..{high}；已使用 {used}。",
        "status_title": "状态",
        "regenerate": "重新生成",
        "history_failing": "本对话尚未保存：聊天数据库拒绝写入（{detail}）。写入会按顺序保留并重试，直到成功；"
                           "回答仍会继续。详情见日志文件。",
        "panel_history": "聊天记录",
        "history_waiting": "尚未保存：已等待聊天数据库 {seconds:.0f} 秒，正在重试",
        "too_many_waiting": "本对话已有 {limit} 个回答正在生成或排队，这条消息未被回答。"
                            "它仍保留在对话中：待其中一个完成后，可编辑它重新发送。",
        "sanitized": "已移除消息中的控制字符。",
        "panel_remote": "远程 vLLM 服务",
        "panel_card": "显卡",
        "panel_profile": "配置",
        "panel_engine": "引擎",
        "panel_context": "上下文",
        "panel_context_value": "{tokens} 个 token",
        "panel_restarts": "重启次数",
        "panel_speed": "速度",
        "speed_starting": "启动引擎（eager）正在应答；全速引擎构建中（已 {seconds:.0f} 秒）",
        "speed_full": "全速（启动后第 {seconds:.0f} 秒起）",
        "history_damaged": "聊天记录文件已损坏，已新建一个空的聊天记录。旧文件原样保留为 {path}。",
        "message_unreadable": "此消息无法读取（其保存的副本已损坏）",
        "interrupted": "已中断：应用在此回答完成前停止",
        "speed_starting_only": "仅启动引擎（eager{cost}）：全速引擎未能启动：{reason}（详见日志）",
        "starting_engine_cost_gpu": "，约慢 5 倍",
        "panel_download": "下载本对话",
        "panel_gpu_memory": "显存（加载后 / 峰值 / 当前）",
        "start_progress": "{bar} 第 {step}/{steps} 步 · {seconds:.0f} 秒",
        "setting_system_prompt": "系统提示词",
        "setting_temperature": "温度 temperature",
        "setting_top_p": "top_p",
        "setting_max_tokens": "最大生成长度 (token)",
        "starter_quantum_label": "量子纠缠，三句话",
        "starter_quantum": "请用三句话解释量子纠缠，要求通俗易懂",
        "starter_poem_label": "写一首关于大海的短诗",
        "starter_poem": "写一首关于大海的短诗",
        "starter_kv_label": "解释什么是 KV 缓存",
        "starter_kv": "用简单的话解释大语言模型的 KV 缓存。",
    },
}


def lang_of(language: str | None) -> str:
    """Chainlit reports the browser language, e.g. 'zh-CN' or 'en-US'."""
    return "zh" if (language or "").lower().startswith("zh") else "en"


STARTERS = ("quantum", "poem", "kv")  # the starter prompts, each a "starter_<name>" and its "_label"


def starting_engine_cost(language: str | None, device: str) -> str:
    """What answering on the eager starting engine costs, where it was measured (a GPU); empty elsewhere."""
    return t(language, "starting_engine_cost_gpu") if device == "cuda" else ""


def t(language: str | None, key: str, **values) -> str:
    return STRINGS[lang_of(language)][key].format(**values)
