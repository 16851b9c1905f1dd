"""This chat's answers as tasks: at most a few at once, each one the page's Stop reaches and a closed page
cancels, and a button's answer run in a task of its own. The set of them lives on Chainlit's session object
(app/chainlit_internals.py ``answer_tasks``)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import chainlit as cl

from app.chainlit_internals import answer_tasks, make_stoppable
from app.i18n import t
from app.runtime import Runtime, current_runtime
from app.ui.background import spawn
from app.ui.chat_messages import language, notice, stopped_line
from app.ui.streamed_answer import STOPPED, cancel_cause, forget_stop_mark, stop_marked

# Answers one chat may have running or queued at once; more would hold other users' places in the queue
# (one page once queued 60 messages, and another user saw "48 ahead of you").
MAX_ANSWERS_PER_CHAT = 3

ActionHandler = Callable[[Runtime, cl.Action], Coroutine[Any, Any, None]]


async def run_tracked(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` as one of this chat's answers: Stop reaches it, a closed page cancels it."""
    # Chainlit's edit path (and an action) does not register its task, so Stop found nothing to cancel.
    task = asyncio.current_task()
    assert task is not None  # a coroutine awaited here always runs in a task
    make_stoppable(task)
    running = answer_tasks()
    if len(running) >= MAX_ANSWERS_PER_CHAT:
        work.close()
        await notice(t(language(), "too_many_waiting", limit=MAX_ANSWERS_PER_CHAT))
        return
    running.add(task)
    forget_stop_mark()
    try:
        await work
    except asyncio.CancelledError:
        # Stopped before the answer's first word (its files being read, the engine reading the prompt): the chat
        # said nothing, as if the question had been dropped. The line says it, in the page and in the history.
        # Cut by the app's shutdown: no line (nobody stopped it; what was shown is kept: StreamedAnswer._keep_cut).
        if cancel_cause(current_runtime()) == STOPPED and not stop_marked():
            await notice(stopped_line(language()))
        raise
    finally:
        running.discard(task)


def stop_all() -> None:
    """The page went away: its answers stop, running or queued; nobody is left to read them."""
    for task in list(answer_tasks()):
        task.cancel()


def answered_in_a_task(handler: ActionHandler, takes: Callable[[cl.Action], Awaitable[bool]]
                       ) -> Callable[[cl.Action], Coroutine[Any, Any, None]]:
    """A button's callback that answers in a task of its own, with the page's stop button shown: actions arrive as
    an HTTP request, which would otherwise be held open for the whole answer. ``takes`` decides first, in the
    request: a refused button must not become the task Stop cancels, nor end the page's "answering" state while
    another answer is written."""
    async def on_action(action: cl.Action) -> None:
        if not await takes(action):
            return
        spawn(_run_action(handler, current_runtime(), cl.context.emitter, action), name=f"action-{action.name}")

    return on_action


async def _run_action(handler: ActionHandler, rt: Runtime, emitter: Any, action: cl.Action) -> None:
    await emitter.task_start()
    try:
        await run_tracked(handler(rt, action))
    finally:
        await emitter.task_end()
