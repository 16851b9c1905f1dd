"""A vLLM server elsewhere as the engine: the same UI, queue, metrics and watchdog, over the OpenAI API.

When one machine is not enough, run `vllm serve` on a GPU server and start ernie-chat with
``--remote-url http://gpu-box:8000/v1``. ``RemoteEngine`` implements the engine protocol
(app/engine/protocol.py) as ``VllmEngine`` does, so nothing above it changes: the chat
template and context fitting stay here (only the tokenizer is fetched, not the weights), and prompts go
to the server as token ids through ``/v1/completions``, which vLLM's server accepts. The result is the
same prompt, token for token, as the local engine would see.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Optional

import httpx

from app.engine.protocol import Delta, Sampling
from app.errors import EngineDied, RemoteServerError, RequestRefused
from app.planning.engine_plan import EnginePlan

log = logging.getLogger("ernie_chat.remote")

ASSUMED_CONTEXT = 4096  # for a server that does not report its max_model_len
# Patterns of the tokenizer's files: with a remote engine this machine never needs the weights.
TOKENIZER_PATTERNS = ["*.json", "*.model", "*.jinja", "*.txt", "tokenizer*"]


def _auth(api_key: Optional[str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def pick_model(url: str, api_key: Optional[str], wanted: Optional[str], timeout: float = 10.0) -> dict[str, Any]:
    """The server's entry for the model to use, from its /v1/models; a clear error otherwise."""
    try:
        reply = httpx.get(f"{url}/models", headers=_auth(api_key), timeout=timeout)
    except httpx.HTTPError as err:
        raise RemoteServerError(f"cannot reach the vLLM server at {url} ({type(err).__name__}: {err}); is "
                                "`vllm serve` running there, and is the URL its base URL ending in /v1?") from None
    if reply.status_code == 401:
        raise RemoteServerError(f"the server at {url} refused the API key: set --remote-api-key to its --api-key")
    if reply.status_code != 200:
        raise RemoteServerError(f"the server at {url} answered /models with HTTP {reply.status_code}; "
                                "is it an OpenAI-compatible vLLM server?")
    models = reply.json().get("data") or []
    if not models:
        raise RemoteServerError(f"the server at {url} serves no model")
    if wanted is None:
        return models[0]
    for model in models:
        if model.get("id") == wanted:
            return model
    served = ", ".join(str(m.get("id")) for m in models)
    raise RemoteServerError(f"the server at {url} does not serve {wanted!r}; it serves {served} (set --remote-model)")


def _vllm_fields(sampling: Sampling) -> Optional[dict[str, Any]]:
    """vLLM's own completion fields, not OpenAI's: sent only when they say something."""
    fields: dict[str, Any] = {}
    if sampling.ignore_eos:
        fields["ignore_eos"] = True
    if sampling.ends_at:  # the server's vLLM would stop at eos alone, not at the template's end of a turn
        fields["stop_token_ids"] = sampling.ends_at
    return fields or None


class RemoteEngine:
    """The engine protocol, answered by a vLLM server."""

    def __init__(self, url: str, api_key: Optional[str], model: str, max_model_len: int,
                 request_timeout: float = 600.0) -> None:
        from openai import AsyncOpenAI

        self.model = model
        self.max_model_len = max_model_len
        # No client retries: a failed request is reported at once and the watchdog reconnects.
        self._client = AsyncOpenAI(base_url=url, api_key=api_key or "none", max_retries=0, timeout=request_timeout)
        self._in_flight: set[str] = set()
        self._dead: Optional[str] = None

    async def generate(self, token_ids: list[int], sampling: Sampling, request_id: str) -> AsyncIterator[Delta]:
        import openai

        self._in_flight.add(request_id)
        try:
            stream = await self._client.completions.create(
                model=self.model, prompt=token_ids, stream=True,
                stream_options={"include_usage": True}, max_tokens=sampling.max_tokens,
                temperature=sampling.temperature, top_p=sampling.top_p, seed=sampling.seed,
                extra_body=_vllm_fields(sampling),
                extra_headers={"X-Request-Id": request_id})
            # Closing the stream (stop pressed) closes the connection, and vLLM's server aborts the request.
            async with stream:
                counted, last = 0, None
                async for chunk in stream:
                    if chunk.usage is not None and last is not None:
                        # The exact count: the last piece gets whatever the per-chunk count missed.
                        rest = max(0, chunk.usage.completion_tokens - counted)
                        yield Delta(last.text or "", rest, True, last.finish_reason)
                        last = None
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    if choice.finish_reason is not None:
                        last = choice  # held back until the usage chunk gives the exact token count
                        continue
                    counted += 1  # vLLM streams one chunk per token for one request
                    yield Delta(choice.text or "", 1, False, None)
                if last is not None:  # a server that sends no usage
                    yield Delta(last.text or "", 1, True, last.finish_reason)
        except (openai.APIConnectionError, openai.InternalServerError) as err:
            self._dead = f"the remote vLLM server failed: {type(err).__name__}: {err}"
            raise EngineDied(self._dead) from None
        except openai.APIError as err:  # a 4xx, or an error event in the stream: this request, not the
            # server (e.g. a server whose model's tokenizer differs from --model's gets unknown token ids)
            message = " ".join(str(getattr(err, "message", err)).split())[:300]
            status = getattr(err, "status_code", None)
            raise RequestRefused(f"the server refused the request{f' (HTTP {status})' if status else ''}: "
                                 f"{message}") from None
        finally:
            self._in_flight.discard(request_id)

    async def abort(self, request_id: str) -> None:
        # Nothing to send: cancelling generate() closed the connection, which aborts the request there.
        self._in_flight.discard(request_id)

    async def check_health(self) -> None:
        try:
            await self._client.models.list(timeout=5)
        except Exception as err:
            self._dead = f"the remote vLLM server stopped answering ({type(err).__name__})"
            raise

    def dead_reason(self) -> Optional[str]:
        return self._dead

    def unfinished_requests(self) -> int:
        return len(self._in_flight)

    def shutdown(self) -> None:
        # The server keeps running; only this app's connections go (EngineHost calls this on its loop).
        self._in_flight.clear()
        try:
            asyncio.get_running_loop().create_task(self._client.close())
        except RuntimeError:
            pass


def remote_engine_factory(url: str, api_key: Optional[str], wanted_model: Optional[str]):
    """An engine factory for EngineHost: check the server, take its context length, return the engine."""

    def connect(model_path: str, plan: EnginePlan) -> RemoteEngine:
        model = pick_model(url, api_key, wanted_model)
        server_len = model.get("max_model_len")
        mine = plan.engine_args.get("max_model_len")
        if server_len:
            # Chats are fitted to what the server accepts; a smaller --max-model-len of ours still applies.
            context = min(int(server_len), int(mine)) if mine else int(server_len)
        else:
            context = int(mine or ASSUMED_CONTEXT)
            if not mine:
                log.warning("the server does not say its context length; assuming %d (set --max-model-len)",
                            ASSUMED_CONTEXT)
        log.info("remote engine: %s at %s (context %s tokens)", model["id"], url, context)
        return RemoteEngine(url, api_key, model["id"], context)

    return connect
