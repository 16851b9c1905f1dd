"""Chainlit handlers: history through the model's chat template, batched streaming, stop -> engine abort.

``install()`` registers the handlers; app/chainlit_app.py (the file Chainlit loads) calls it. Every
handler finds the app through ``current_runtime()``.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time
from typing import Any, Optional

import chainlit as cl
from chainlit.input_widget import Slider, TextInput

from app.chat_history import install_history, store_before_answer
from app.conversation import PromptTooLong, clamp_sampling, clean_message, fit_to_context, stats_line_values
from app.engine import START_STEPS, EngineDied, EngineState, EngineStatus, EngineUnavailable, RequestRefused
from app.i18n import lang_of, t
from app.runtime import Runtime, current_runtime

log = logging.getLogger("ernie_chat.chat")
QUANTUM_PROMPT = "请用三句话解释量子纠缠，要求通俗易懂"
WAIT_FOR_ENGINE_SECONDS = 600.0


def _language() -> str:
    try:
        return cl.context.session.language or "en-US"
    except Exception:
        return "en-US"


def _defaults(rt: Runtime) -> dict[str, Any]:
    gen = rt.generation_defaults
    chat = rt.settings.chat
    # The model's generation_config (0.8 / 0.8) wins over our own defaults unless the user set them.
    explicit = chat.model_fields_set
    return {
        "system_prompt": chat.system_prompt,
        "temperature": chat.temperature if "temperature" in explicit else float(gen.get("temperature", chat.temperature)),
        "top_p": chat.top_p if "top_p" in explicit else float(gen.get("top_p", chat.top_p)),
        "max_tokens": min(chat.max_tokens, _max_tokens_cap(rt)),
    }


def _max_tokens_cap(rt: Runtime) -> int:
    return max(16, rt.max_model_len // 2)


def encode_messages(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def status_markdown(rt: Runtime, language: str) -> str:
    zh = lang_of(language) == "zh"
    status = rt.host.status
    gpu = rt.gpu
    if rt.plan.device == "remote":  # the card is the server's; say where the answers come from
        where = f"**{'远程 vLLM 服务' if zh else 'Remote vLLM server'}:** {rt.plan.engine_args.get('remote_url')}"
    else:
        where = f"**{'显卡' if zh else 'Card'}:** {gpu.name if gpu else 'CPU'}"
    lines = [
        where,
        f"**{'配置' if zh else 'Profile'}:** {rt.plan.profile}",
        f"**{'引擎' if zh else 'Engine'}:** {status.state.value}" + (f" — {status.detail}" if status.detail else "")
        + (f"  \n{start_progress_line(status, zh)}" if status.starting else ""),
        f"**{'上下文' if zh else 'Context'}:** {rt.max_model_len} tokens",
    ]
    if status.restarts:
        lines.append(f"**{'重启次数' if zh else 'Restarts'}:** {status.restarts}")
    watch = rt.gpu_memory
    if watch is not None:
        now = watch.last if watch.last is not None else watch.sample()
        fmt = lambda b: "–" if b is None else f"{b / 2**30:.2f} GiB"  # noqa: E731
        lines.append(f"**{'显存（加载后 / 峰值 / 当前）' if zh else 'GPU memory (after load / peak / now)'}:** "
                     f"{fmt(watch.after_load)} / {fmt(watch.peak)} / {fmt(now)}")
    return "  \n".join(lines)


def start_progress_line(status: EngineStatus, zh: bool) -> str:
    """'step 3 of 4 · 12 s' as a text bar, the UI's twin of the terminal's progress bar."""
    step = int(status.step or 0)
    bar = "▰" * (step - 1) + "▱" * (START_STEPS - step + 1)
    seconds = time.time() - status.start_began_at
    return (f"{bar} 第 {step}/{START_STEPS} 步 · {seconds:.0f} 秒" if zh
            else f"{bar} step {step} of {START_STEPS} · {seconds:.0f} s")


async def show_status(rt: Runtime) -> None:
    language = _language()
    text = cl.Text(name=t(language, "status_title"), content=status_markdown(rt, language), display="side")
    await cl.ElementSidebar.set_title(t(language, "status_title"))
    await cl.ElementSidebar.set_elements([text], key=f"status-{time.monotonic_ns()}")


STATUS_REFRESH_SECONDS = 1.0


async def keep_status_fresh(rt: Runtime) -> None:
    """Redraw the status panel when something in it changes: the engine state (loading -> ready,
    restarts), the start's elapsed seconds, the GPU memory peak while an answer is generated."""
    shown = None
    while True:
        status = rt.host.status
        watch = rt.gpu_memory
        current = (status.state, status.detail, status.restarts,
                   int(time.time() - status.start_began_at) if status.starting else None,
                   (watch.peak or 0) >> 20 if watch else None)
        if current != shown:
            shown = current
            await show_status(rt)
        await asyncio.sleep(STATUS_REFRESH_SECONDS)


async def _wait_until_ready(rt: Runtime, language: str) -> Optional[str]:
    """None when the engine is ready; else the message to show (after waiting through a load)."""
    status = rt.host.status
    if status.state is EngineState.READY:
        return None
    if status.state is EngineState.FAILED:
        return t(language, "failed", detail=status.detail)
    notice = cl.Message(content=t(language, "waiting", detail=status.detail or status.state.value), author="system")
    await notice.send()
    ready = await rt.host.wait_ready(WAIT_FOR_ENGINE_SECONDS)
    await notice.remove()
    if ready:
        return None
    return t(language, "failed", detail=rt.host.status.detail or rt.host.status.state.value)


async def answer(rt: Runtime, user_text: str) -> None:
    """Handle one user message end to end."""
    language = _language()
    rt.metrics.messages.inc()
    cleaned = clean_message(user_text)
    text = cleaned.text
    if not text.strip():
        rt.metrics.rejected.labels(reason="empty").inc()
        await cl.Message(content=t(language, "empty"), author="system").send()
        return
    if len(text) > rt.settings.chat.max_message_chars:
        rt.metrics.rejected.labels(reason="too_many_chars").inc()
        await cl.Message(content=t(language, "too_many_chars", chars=len(text),
                                   limit=rt.settings.chat.max_message_chars), author="system").send()
        return
    if cleaned.changed:
        await cl.Message(content=t(language, "sanitized"), author="system").send()

    problem = await _wait_until_ready(rt, language)
    if problem:
        await cl.Message(content=problem, author="system").send()
        return

    chat_settings = cl.user_session.get("chat_settings") or {}
    defaults = _defaults(rt)
    sampling = clamp_sampling(chat_settings, defaults, _max_tokens_cap(rt))
    for name, value, bound, used in sampling.corrections:
        await cl.Message(content=t(language, "settings_fixed", name=name, value=value, low=bound.low,
                                   high=bound.high, used=used), author="system").send()
    system_prompt = str(chat_settings.get("system_prompt", defaults["system_prompt"]) or "")
    history: list[dict[str, str]] = cl.user_session.get("history") or []
    try:
        fitted = await asyncio.to_thread(
            fit_to_context, system_prompt, history, text, rt.max_model_len, int(sampling.values["max_tokens"]),
            lambda msgs: encode_messages(rt.tokenizer, msgs))
    except PromptTooLong as err:
        rt.metrics.rejected.labels(reason="too_long").inc()
        await cl.Message(content=t(language, "too_long", tokens=err.tokens, limit=err.limit), author="system").send()
        return
    if fitted.dropped_messages:
        await cl.Message(content=t(language, "dropped", limit=rt.max_model_len, turns=fitted.dropped_messages),
                         author="system").send()
    if fitted.shortened:
        await cl.Message(content=t(language, "shortened", tokens=fitted.max_tokens), author="system").send()

    params = {"temperature": sampling.values["temperature"], "top_p": sampling.values["top_p"],
              "max_tokens": fitted.max_tokens}
    reply = cl.Message(content="")
    queue_notice: dict[str, cl.Message] = {}

    async def on_queued(position: int) -> None:
        note = queue_notice.get("msg")
        content = t(language, "queued", position=position)
        if note is None:
            queue_notice["msg"] = note = cl.Message(content=content, author="system")
            await note.send()
        else:
            note.content = content
            await note.update()

    parts: list[str] = []
    pending: list[str] = []
    interval = rt.settings.chat.stream_interval_ms / 1000
    started = time.perf_counter()
    first_token_at: Optional[float] = None
    tokens = 0
    last_flush = 0.0
    outcome = "done"
    try:
        async for delta in rt.host.stream(fitted.token_ids, params, on_queued=on_queued):
            if "msg" in queue_notice:
                await queue_notice.pop("msg").remove()
            if first_token_at is None and delta.new_tokens:
                first_token_at = time.perf_counter()
            tokens += delta.new_tokens
            if delta.text:
                parts.append(delta.text)
                pending.append(delta.text)
            now = time.perf_counter()
            # One websocket message per token freezes the page at ~300 tokens/s; send ~50 ms batches.
            if pending and now - last_flush >= interval:
                await reply.stream_token("".join(pending))
                # Give the loop a real turn (I/O included): without it the websocket writer did not
                # run until the answer ended, and the page got the whole answer at once (seen in
                # Chromium; sleep(0) was not enough).
                await asyncio.sleep(0.001)
                pending.clear()
                last_flush = now
        if pending:
            await reply.stream_token("".join(pending))
    except asyncio.CancelledError:
        outcome = "stopped"
        raise
    except EngineDied as err:
        outcome = "died"
        await cl.Message(content=t(language, "engine_died", detail=str(err)), author="system").send()
    except EngineUnavailable as err:
        outcome = "died"
        await cl.Message(content=t(language, "engine_died", detail=str(err)), author="system").send()
    except RequestRefused as err:
        outcome = "refused"
        await cl.Message(content=t(language, "refused", detail=str(err)), author="system").send()
    finally:
        if "msg" in queue_notice:
            await queue_notice.pop("msg").remove()
        answer_text = "".join(parts)
        if answer_text or outcome == "done":
            # Keep the turn even when stopped or cut off: the chat so far is never lost.
            history.extend([{"role": "user", "content": text}, {"role": "assistant", "content": answer_text}])
            cl.user_session.set("history", history)
        if outcome == "done":
            decode = time.perf_counter() - (first_token_at or started)
            values = stats_line_values(tokens, (first_token_at - started) if first_token_at else None, decode)
            reply.content = answer_text + "\n\n`" + t(language, "stats", prompt=len(fitted.token_ids), **values) + "`"
            # stream_token sent the message with the first piece; an empty answer was never sent.
            await (reply.update() if parts else reply.send())
            if rt.gpu_memory:
                rt.gpu_memory.sample(generating=True)
        elif parts:
            await reply.update()


def install() -> None:
    """Register the Chainlit handlers (called by app/chainlit_app.py)."""
    token = current_runtime().settings.server.auth_token
    install_history(current_runtime())  # chat history: data layer, local user (app/chat_history.py)
    if token is not None:
        # Chainlit's login page guards the UI; the password is --auth-token (any user name).
        @cl.password_auth_callback
        async def check_password(username: str, password: str) -> Optional[cl.User]:
            if hmac.compare_digest(password.encode(), token.get_secret_value().encode()):
                return cl.User(identifier=username or "user", metadata={"provider": "token"})
            return None

    @cl.set_starters
    async def starters(user: Any = None, language: Optional[str] = None) -> list[cl.Starter]:
        zh = lang_of(language) == "zh"
        return [
            cl.Starter(label="量子纠缠，三句话" if zh else "Quantum entanglement in 3 sentences",
                       message=QUANTUM_PROMPT),
            cl.Starter(label="写一首关于大海的短诗" if zh else "A short poem about the sea",
                       message="写一首关于大海的短诗" if zh else "Write a short poem about the sea."),
            cl.Starter(label="解释什么是 KV 缓存" if zh else "What is a KV cache?",
                       message="用简单的话解释大语言模型的 KV 缓存。" if zh else
                       "Explain in simple words what the KV cache of a language model is."),
        ]

    @cl.on_chat_start
    async def on_chat_start() -> None:
        rt = current_runtime()
        rt.metrics.chats.inc()
        cl.user_session.set("history", [])
        defaults = _defaults(rt)
        zh = lang_of(_language()) == "zh"
        settings = await cl.ChatSettings([
            TextInput(id="system_prompt", label="系统提示词" if zh else "System prompt",
                      initial=defaults["system_prompt"], multiline=True),
            Slider(id="temperature", label="温度 temperature" if zh else "Temperature",
                   initial=defaults["temperature"], min=0, max=2, step=0.05),
            Slider(id="top_p", label="top_p", initial=defaults["top_p"], min=0.05, max=1, step=0.05),
            Slider(id="max_tokens", label="最大生成长度 (token)" if zh else "Max answer tokens",
                   initial=defaults["max_tokens"], min=16, max=_max_tokens_cap(rt), step=16),
        ]).send()
        cl.user_session.set("chat_settings", settings)
        # Runs in this chat's context, so it draws into this chat's panel; ends with the chat.
        cl.user_session.set("status_task", asyncio.create_task(keep_status_fresh(rt)))

    @cl.on_chat_end
    async def on_chat_end() -> None:
        task = cl.user_session.get("status_task")
        if task:
            task.cancel()

    @cl.on_settings_update
    async def on_settings_update(settings: dict[str, Any]) -> None:
        cl.user_session.set("chat_settings", settings)

    @cl.on_message
    async def on_message(message: cl.Message) -> None:
        rt = current_runtime()
        await store_before_answer(message)  # the user's message is stored before the engine answers
        await answer(rt, message.content)
        if rt.gpu_memory:  # GPU memory peak moved; without a GPU nothing in the panel changed
            await show_status(rt)

    @cl.on_stop
    async def on_stop() -> None:
        # Chainlit cancels the on_message task; EngineHost.stream's cleanup aborts the engine request.
        log.info("stop pressed")
