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
        "stopped": "Stopped.",
        "stats": "prompt {prompt} tokens · answer {tokens} tokens · first token {ttft:.2f} s · {tps:.1f} tokens/s",
        "settings_fixed": "Setting {name} = {value} is outside {low}..{high}; using {used}.",
        "status_title": "Status",
        "sanitized": "Control characters were removed from your message.",
    },
    "zh": {
        "empty": "消息为空。请输入问题后再发送。",
        "too_many_chars": "消息有 {chars:,} 个字符，上限为 {limit:,}。请缩短后再发送。",
        "too_long": "仅这条消息就有 {tokens:,} 个 token，而模型上下文只能容纳 {limit:,}。未做任何截断：请缩短或分段发送。",
        "dropped": "对话已超过模型上下文（{limit:,} token）：最早的 {turns} 条消息不再提供给模型，但仍显示在页面上。",
        "shortened": "为适应上下文，本次回答长度上限调整为 {tokens} 个 token。",
        "queued": "排队中：前面还有 {position} 个请求。空出位置后立即开始回答。",
        "waiting": "模型仍在加载（{detail}）。就绪后会回答您的消息。",
        "failed": "模型无法启动：{detail}。对话已保留；详情见日志文件。",
        "engine_died": "推理引擎意外停止（{detail}），正在重启；对话已保留。请稍后重新发送。",
        "refused": "服务器拒绝了这条消息：{detail}。对话已保留。",
        "stopped": "已停止。",
        "stats": "提示 {prompt} 个 token · 回答 {tokens} 个 token · 首 token {ttft:.2f} 秒 · {tps:.1f} token/秒",
        "settings_fixed": "设置 {name} = {value} 超出范围 {low}..{high}；已使用 {used}。",
        "status_title": "状态",
        "sanitized": "已移除消息中的控制字符。",
    },
}


def lang_of(language: str | None) -> str:
    """Chainlit reports the browser language, e.g. 'zh-CN' or 'en-US'."""
    return "zh" if (language or "").lower().startswith("zh") else "en"


def t(language: str | None, key: str, **values) -> str:
    return STRINGS[lang_of(language)][key].format(**values)
