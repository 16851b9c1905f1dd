"""A small OpenAI-compatible API on the same server: /v1/models and /v1/chat/completions.

It uses the same path as the chat UI (chat template, context fitting, the fair queue, the engine host),
so scripts, the soak test and OpenAI clients see exactly what the UI sees. Bad input is a 400 with one
line; an engine that is not ready is a 503. The auth token, when set, is required here too.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Optional

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from app.chat import encode_messages
from app.conversation import PromptTooLong, clean_message, fit_to_context
from app.engine import EngineDied, EngineUnavailable, RequestRefused
from app.runtime import Runtime

MODEL_ID = "ernie-chat"


class ChatMessage(BaseModel):
    role: str = Field(pattern="^(system|user|assistant)$")
    content: str


class ChatRequest(BaseModel):
    messages: list[ChatMessage] = Field(min_length=1)
    model: Optional[str] = None
    max_tokens: Optional[int] = Field(None, ge=1, le=32768)
    temperature: Optional[float] = Field(None, ge=0, le=2)
    top_p: Optional[float] = Field(None, gt=0, le=1)
    stream: bool = False


def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    """The one error shape of every route: OpenAI's."""
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def build_router() -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.get("/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "ernie-chat"}]}

    @router.post("/chat/completions")
    async def chat_completions(request: Request):
        rt: Runtime = request.app.state.runtime
        try:
            body = ChatRequest.model_validate(await request.json())
        except (ValidationError, ValueError, RecursionError) as err:  # deep JSON nesting: issue 16
            first = err.errors()[0] if isinstance(err, ValidationError) else {"loc": ("body",), "msg": str(err)}
            return error(400, f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}")
        if not rt.host.ready:
            return error(503, f"engine not ready: {rt.host.status.state.value}", "unavailable")
        chat = rt.settings.chat
        messages = [{"role": m.role, "content": clean_message(m.content).text} for m in body.messages]
        if messages[-1]["role"] != "user" or not messages[-1]["content"].strip():
            return error(400, "the last message must be a non-empty user message")
        if sum(len(m["content"]) for m in messages) > chat.max_message_chars * 4:
            return error(400, f"request too large: over {chat.max_message_chars * 4} characters")
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] != "system"]
        max_tokens = body.max_tokens or chat.max_tokens
        try:
            fitted = await asyncio.to_thread(fit_to_context, system, turns[:-1], turns[-1]["content"],
                                             rt.max_model_len, max_tokens,
                                             lambda msgs: encode_messages(rt.tokenizer, msgs))
        except PromptTooLong as err:
            return error(400, f"the last message is {err.tokens} tokens; the context holds {err.limit}")
        params = {"temperature": body.temperature if body.temperature is not None else chat.temperature,
                  "top_p": body.top_p if body.top_p is not None else chat.top_p, "max_tokens": fitted.max_tokens}
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        rt.metrics.messages.inc()
        if body.stream:
            return StreamingResponse(_sse(rt, fitted.token_ids, params, completion_id), media_type="text/event-stream")
        parts, tokens, reason = [], 0, None
        try:
            async for delta in rt.host.stream(fitted.token_ids, params):
                parts.append(delta.text)
                tokens += delta.new_tokens
                reason = delta.finish_reason or reason
        except (EngineDied, EngineUnavailable) as err:
            return error(503, f"engine failed: {err}", "unavailable")
        except RequestRefused as err:
            return error(400, str(err))
        return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": MODEL_ID,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(parts)},
                             "finish_reason": reason}],
                "usage": {"prompt_tokens": len(fitted.token_ids), "completion_tokens": tokens,
                          "total_tokens": len(fitted.token_ids) + tokens},
                "ernie_chat": {"dropped_messages": fitted.dropped_messages}}

    return router


async def _sse(rt: Runtime, ids: list[int], params: dict[str, Any], completion_id: str):
    def chunk(delta: dict, reason: Optional[str] = None) -> str:
        return "data: " + json.dumps({"id": completion_id, "object": "chat.completion.chunk", "model": MODEL_ID,
                                      "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
                                     ) + "\n\n"  # ASCII JSON: U+2028/U+0085 in a token split lines in some clients

    yield chunk({"role": "assistant"})
    try:
        async for delta in rt.host.stream(ids, params):
            if delta.text or delta.finished:
                yield chunk({"content": delta.text} if delta.text else {}, delta.finish_reason)
    except (EngineDied, EngineUnavailable) as err:
        yield "data: " + json.dumps({"error": {"message": f"engine failed: {err}", "type": "unavailable"}}) + "\n\n"
    except RequestRefused as err:
        yield "data: " + json.dumps({"error": {"message": str(err), "type": "invalid_request_error"}}) + "\n\n"
    yield "data: [DONE]\n\n"
