"""A small OpenAI-compatible API on the same server: /v1/models and /v1/chat/completions.

It follows the chat UI's rules (app/conversation.py: cleaning, the model's sampling defaults and bounds,
context fitting) and its path (the fair queue, the engine host), so scripts, the soak test and OpenAI
clients see what the UI sees. Its answers are the `openai` package's own types (ChatCompletion,
ChatCompletionChunk, Model), so they have the shape that package's client reads (tested with it, streamed and
not). Bad input is a 400 with one line; an engine that is not ready is a 503; every error
has the body of app/errors.py. The auth token, when set, is required here too (app/server.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Optional

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from app.conversation import (
    ChatTemplate,
    FittedPrompt,
    answer_sampling,
    chat_defaults,
    clamp_sampling,
    clean_message,
    fit_to_context,
    several_samplings,
)
from app.engine.protocol import Delta, Sampling
from app.errors import BadRequestError, EngineUnavailable, ErnieChatError, error_body, error_response
from app.runtime import Runtime
from app.settings import ANSWERS, ANSWERS_AT_ONCE, API_SAMPLING_BOUNDS

if TYPE_CHECKING:
    from openai.types import CompletionUsage

MODEL_ID = "ernie-chat"
# /v1's clients share one turn in the engine's queue (app/engine/queueing.py): however many requests they send, a page's
# question waits for one of theirs at most, not behind all of them (40 abandoned requests once held a question 30 s).
API_CLIENTS = "/v1"
# vLLM's own range for a seed (its OpenAI server's: a 64-bit signed integer). Past it the engine request failed
# inside vLLM and /v1 gave a plain-text 500 with tracebacks (issue 36, N16).
SEED_LOW, SEED_HIGH = -2**63, 2**63 - 1
# pydantic's error types for a number outside a field's bounds: these name the whole allowed range instead.
_OUT_OF_RANGE = {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}
_T, _P, _N = (API_SAMPLING_BOUNDS[k] for k in ("temperature", "top_p", "max_tokens"))


class ChatMessage(BaseModel):
    role: str = Field(pattern="^(system|user|assistant)$")
    content: str


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    messages: list[ChatMessage] = Field(min_length=1)
    model: Optional[str] = None
    max_tokens: Optional[int] = Field(None, ge=_N.low, le=_N.high)
    temperature: Optional[float] = Field(None, ge=_T.low, le=_T.high)
    top_p: Optional[float] = Field(None, ge=_P.low, le=_P.high)
    seed: Optional[int] = Field(None, ge=SEED_LOW, le=SEED_HIGH)
    # Choices for the one prompt: the chat's answers at once, under the same cap.
    n: Optional[int] = Field(None, ge=ANSWERS_AT_ONCE.low, le=ANSWERS_AT_ONCE.high)
    stream: bool = False
    stream_options: Optional[StreamOptions] = None


def _sse(payload: dict[str, Any]) -> str:
    # ASCII JSON: U+2028/U+0085 inside a token split lines in some clients.
    return "data: " + json.dumps(payload) + "\n\n"


def parse_request(body: Any, max_messages: int) -> ChatRequest:
    if isinstance(body, dict) and isinstance(body.get("messages"), list) and len(body["messages"]) > max_messages:
        # Checked before validating each message: a request's cost must not grow past the cap.
        raise BadRequestError(f"messages: at most {max_messages} per request (--max-request-messages); "
                              f"got {len(body['messages'])}")
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "body"
        allowed = _allowed_range(first)
        if allowed is not None:
            got = str(first["input"])
            got = got if len(got) <= 40 else f"{got[:20]}... ({len(got):,} characters)"  # a line, not a page
            raise BadRequestError(f"{where}: {allowed}; got {got}") from None
        raise BadRequestError(f"{where}: {first['msg']}") from None


def _allowed_range(error: Mapping[str, Any]) -> Optional[str]:
    """"from LOW to HIGH" for a top-level field whose value is outside its bounds (None for any other error)."""
    field = ChatRequest.model_fields.get(str(error["loc"][0])) if len(error["loc"]) == 1 else None
    if error["type"] not in _OUT_OF_RANGE or field is None:
        return None
    low = next((rule.ge for rule in field.metadata if hasattr(rule, "ge")), None)
    high = next((rule.le for rule in field.metadata if hasattr(rule, "le")), None)
    return None if low is None or high is None else f"must be from {low} to {high}"


def build_router() -> APIRouter:
    router = APIRouter(prefix="/v1")
    # Prompt building runs here, off the threads that serve the pages and other requests: a large
    # request waits its turn instead of holding up everyone else's (docs/security.md, row 1: long chats
    # through /v1).
    prompt_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="v1-prompts")

    @router.get("/models")
    async def models() -> dict:
        from openai.types import Model  # see _completion for why here

        # The list around the models has no type of its own in `openai` (its client pages through "data").
        model = Model(id=MODEL_ID, object="model", created=0, owned_by="ernie-chat")
        return {"object": "list", "data": [model.model_dump()]}

    @router.post("/chat/completions")
    async def chat_completions(request: Request):
        rt: Runtime = request.app.state.runtime
        try:
            try:
                raw = await request.json()
            except RecursionError:  # deeply nested JSON: one line, not a plain-text 500 (docs/security.md, row 3b)
                raise BadRequestError("body: JSON nested too deeply (maximum recursion depth)") from None
            except ValueError as err:
                raise BadRequestError(f"body: not valid JSON ({err})") from None
            body = parse_request(raw, rt.settings.chat.max_request_messages)
            if not rt.host.ready:
                raise EngineUnavailable(f"engine not ready: {rt.host.status.state.value}")
            fitted, samplings = await _prompt(rt, body, prompt_thread)
        except ErnieChatError as err:
            return error_response(err)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        rt.metrics.messages.inc()
        if body.stream:
            usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(_stream(rt, fitted, samplings, completion_id, usage),
                                     media_type="text/event-stream")
        answer = asyncio.ensure_future(_whole_answers(rt, fitted, samplings))
        if not await _answered_before_client_left(request, answer):
            return Response(status_code=499)  # nobody reads it; the engine requests are already aborted
        try:
            answers = answer.result()
        except ErnieChatError as err:
            return error_response(err)
        return _completion(completion_id, fitted, answers)

    return router


WholeAnswer = tuple[str, int, Optional[str]]  # its text, its tokens, why it ended


async def _whole_answer(rt: Runtime, fitted: FittedPrompt, sampling: Sampling) -> WholeAnswer:
    parts, tokens, reason = [], 0, None
    async for delta in rt.host.stream(fitted.token_ids, sampling, owner=API_CLIENTS):
        parts.append(delta.text)
        tokens += delta.new_tokens
        reason = delta.finish_reason or reason
    return "".join(parts), tokens, reason


async def _whole_answers(rt: Runtime, fitted: FittedPrompt, samplings: list[Sampling]) -> list[WholeAnswer]:
    """Every choice, each an engine request of its own in /v1's turn of the queue (as the chat's answers at once
    are); the first error ends them all (gather cancels the rest, which aborts their engine requests)."""
    answers = [asyncio.ensure_future(_whole_answer(rt, fitted, sampling)) for sampling in samplings]
    try:
        return list(await asyncio.gather(*answers))
    finally:
        for answer in answers:
            answer.cancel()
        await asyncio.gather(*answers, return_exceptions=True)


async def _answered_before_client_left(request: Request, answer: asyncio.Future) -> bool:
    """Wait for ``answer``; if the client hangs up first, cancel it (EngineHost.stream then aborts the engine
    request, or leaves the queue) and say False. A non-streamed request is not cancelled by the server when its
    client goes (Starlette does that only for a streamed response): 40 clients that gave up after 1 s held all 16
    slots for ~50 s and a page's question waited 30.5 s (issue 36, N10)."""
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        finished = answer.done()
        answer.cancel()  # no-op once done; also when this handler itself is cancelled (shutdown)
    if not finished:
        with contextlib.suppress(asyncio.CancelledError):
            await answer  # the abort has run when this returns
    return finished


async def _disconnected(request: Request) -> None:
    """Returns once the client has gone. The body is read by now, so the next ASGI message is the disconnect
    (uvicorn sends it when the connection closes), as Starlette's StreamingResponse listens for it."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _prompt(rt: Runtime, body: ChatRequest, pool: ThreadPoolExecutor) -> tuple[FittedPrompt, list[Sampling]]:
    """The request's prompt and each choice's sampling, by the chat UI's rules (defaults from the model's
    generation_config; with a seed, choice ``i`` gets ``seed + i``)."""
    chat = rt.settings.chat
    messages = [{"role": m.role, "content": clean_message(m.content).text} for m in body.messages]
    if messages[-1]["role"] != "user" or not messages[-1]["content"].strip():
        raise BadRequestError("messages: the last message must be a non-empty user message")
    if sum(len(m["content"]) for m in messages) > chat.max_message_chars * 4:
        raise BadRequestError(f"messages: over {chat.max_message_chars * 4:,} characters in all")
    defaults = chat_defaults(chat, rt.generation_defaults, rt.max_model_len)
    # Checked already (ChatRequest's fields carry API_SAMPLING_BOUNDS): this only fills in what was not asked for.
    asked = clamp_sampling({**body.model_dump(include={"temperature", "top_p", "max_tokens", "seed"}), ANSWERS: body.n},
                           defaults, bounds=API_SAMPLING_BOUNDS).chosen
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    turns = [m for m in messages if m["role"] != "system"]
    fitted = await asyncio.get_running_loop().run_in_executor(
        pool, fit_to_context, system, turns[:-1], turns[-1]["content"], rt.max_model_len,
        asked.max_tokens, ChatTemplate(rt.tokenizer))
    return fitted, several_samplings(answer_sampling(asked, fitted, rt.model.stop_token_ids), asked.answers)


# The answers are built with the `openai` package's types, unvalidated (model_construct): the finish reason goes
# out as the engine gave it, and vLLM also says "abort", "error" or "repetition", which those types' Literal lacks
# (their client reads them all the same). Only the fields set are sent, as before. The package is imported on
# the first /v1 request, not with the server: it takes ~0.3 s to import, which a start for the UI need not pay.


def _usage(fitted: FittedPrompt, tokens: int) -> CompletionUsage:
    """OpenAI's count: the prompt once, however many choices; the tokens of every choice."""
    from openai.types import CompletionUsage

    prompt = len(fitted.token_ids)
    return CompletionUsage(prompt_tokens=prompt, completion_tokens=tokens, total_tokens=prompt + tokens)


def _openai_finish(reason: Optional[str]) -> Any:
    """The engine's finish reason as OpenAI's field takes it: vLLM ends an answer with OpenAI's own words ("stop",
    "length"), and ``model_construct`` checks nothing, so it passes as it is."""
    return reason


def _completion(completion_id: str, fitted: FittedPrompt, answers: list[WholeAnswer]) -> dict[str, Any]:
    from openai.types.chat import ChatCompletion, ChatCompletionMessage
    from openai.types.chat.chat_completion import Choice

    choices = [Choice.model_construct(index=index, message=ChatCompletionMessage.model_construct(role="assistant",
                                                                                                 content=text),
                                      finish_reason=_openai_finish(reason))
               for index, (text, _, reason) in enumerate(answers)]
    completion = ChatCompletion.model_construct(
        id=completion_id, object="chat.completion", created=int(time.time()), model=MODEL_ID, choices=choices,
        usage=_usage(fitted, sum(tokens for _, tokens, _ in answers)),
        ernie_chat={"dropped_messages": fitted.dropped_messages})  # ours: old messages left out to fit
    return completion.model_dump(exclude_unset=True)


async def _stream(rt: Runtime, fitted: FittedPrompt, samplings: list[Sampling], completion_id: str,
                  include_usage: bool) -> AsyncIterator[str]:
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
    from openai.types.chat.chat_completion_chunk import ChoiceDelta

    created = int(time.time())

    def chunk(choices: list[ChunkChoice], usage: Optional[CompletionUsage] = None) -> str:
        extra: dict[str, Any] = {} if usage is None else {"usage": usage}  # only the last chunk, if asked, has it
        return _sse(ChatCompletionChunk.model_construct(id=completion_id, object="chat.completion.chunk",
                                                        created=created, model=MODEL_ID, choices=choices,
                                                        **extra).model_dump(exclude_unset=True))

    def choice(index: int, delta: ChoiceDelta, finish_reason: Optional[str]) -> ChunkChoice:
        return ChunkChoice.model_construct(index=index, delta=delta, finish_reason=_openai_finish(finish_reason))

    for index in range(len(samplings)):
        yield chunk([choice(index, ChoiceDelta.model_construct(role="assistant", content=""), None)])
    tokens = 0
    try:
        async for index, delta in _interleaved(rt, fitted, samplings):
            tokens += delta.new_tokens
            if delta.text or delta.finished:
                text: dict[str, Any] = {"content": delta.text} if delta.text else {}
                yield chunk([choice(index, ChoiceDelta.model_construct(**text), delta.finish_reason)])
    except ErnieChatError as err:
        yield _sse(error_body(err))
    if include_usage:  # OpenAI's shape: a last chunk with no choices and the request's usage
        yield chunk([], _usage(fitted, tokens))
    yield "data: [DONE]\n\n"


async def _interleaved(rt: Runtime, fitted: FittedPrompt,
                       samplings: list[Sampling]) -> AsyncIterator[tuple[int, Delta]]:
    """Every choice's pieces as they come, each with its choice's index: one engine request per choice, in /v1's
    turn of the queue. The first error ends them all; a client that leaves (the stream closed) aborts them all."""
    pieces: asyncio.Queue[tuple[int, Optional[Delta], Optional[BaseException]]] = asyncio.Queue()

    async def one(index: int, sampling: Sampling) -> None:
        try:
            async for delta in rt.host.stream(fitted.token_ids, sampling, owner=API_CLIENTS):
                await pieces.put((index, delta, None))
        except ErnieChatError as err:
            await pieces.put((index, None, err))
        finally:
            await pieces.put((index, None, None))

    writers = [asyncio.ensure_future(one(index, sampling)) for index, sampling in enumerate(samplings)]
    try:
        ended = 0
        while ended < len(writers):
            index, delta, failed = await pieces.get()
            if failed is not None:
                raise failed
            if delta is None:
                ended += 1
            else:
                yield index, delta
    finally:
        for writer in writers:
            writer.cancel()
        await asyncio.gather(*writers, return_exceptions=True)
