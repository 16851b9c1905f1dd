"""The engine process: vLLM's AsyncLLM, in a process the app starts at launch, before it imports its UI.

    python -m app.engine.engine_process CONTROL_FD LOG_FILE [VLLM_CONSOLE_LEVEL]   # app/engine/engine_link.py starts it

Why a process of its own (issue 34): in one process a start was one chain of imports, each waiting for the last:
the web server (Chainlit), transformers for the tokenizer, vLLM, then vLLM's engine core (14.0 s to ready on an H200,
8.3 s of it Python importing and starting processes before vLLM touched the card: docs/benchmarks.md). Here torch and
vLLM import from the moment of launch, on another core, while the app imports its UI, serves the page and loads the
tokenizer; vLLM's engine core is then forked from this small process, which holds no web server, no Chainlit and
no thread of the app's.

The app speaks to it over sockets (app/engine/wire.py):
- the control socket: ("build", model_path, plan) and then that engine's own socket; ("prefill_sums", n) -> (n,
  (tokens, seconds)) and ("metrics", n) -> (n, vLLM's Prometheus text). When it closes (the app is done, or gone),
  every engine here is shut down and the process ends.
- an engine's socket: first ("built", max_model_len) or ("failed", text); then from the app ("generate", request_id,
  token_ids, sampling), ("abort", request_id), ("call", call_id, name) and ("shutdown",); to the app ("delta",
  request_id, delta), ("end", request_id), ("error", request_id, died, text) and ("reply", call_id, error, value).
Each engine lives on a loop thread of its own, as in the app before (app/engine/slots.py says why).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from app.engine import resource_tracker, wire
from app.engine.slots import LoopThread
from app.errors import EngineDied, one_line
from app.planning.engine_plan import EnginePlan
from app.telemetry import FILE_ONLY, setup_logging

log = logging.getLogger("ernie_chat.engine")


def error_text(err: BaseException) -> str:
    """An exception as the app reads it: its type, its text and its cause's (the out-of-memory wording is matched
    there, app/engine/vllm_engine.py is_out_of_memory)."""
    return f"{one_line(err)} (cause: {one_line(err.__cause__)})" if err.__cause__ else one_line(err)


class ServedEngine:
    """One engine built here and the socket the app drives it through."""

    def __init__(self, sock: socket.socket, model_path: str, plan: EnginePlan, name: str) -> None:
        self.sock, self.model_path, self.plan = sock, model_path, plan
        self.thread = LoopThread(name)
        self.engine: Any = None
        self.finished = threading.Event()  # the engine is shut down (or was never built) and its socket closed

    def start(self) -> None:
        self.thread.submit(self._serve())

    def stop(self, timeout: float = 15.0) -> None:
        """Shut the engine down (the app is gone) and wait for it. A build still loading finishes first."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # the read that waits for the app's next request sees the end
        self.finished.wait(timeout)

    async def _serve(self) -> None:
        from app.engine.vllm_engine import create_vllm_engine

        try:
            self.engine = create_vllm_engine(self.model_path, self.plan)  # blocks this loop for the whole load
        except BaseException as err:
            log.exception("engine build failed", extra=FILE_ONLY)
            with contextlib.suppress(OSError):
                wire.send(self.sock, ("failed", error_text(err)))
            self._finish()
            return
        try:
            wire.send(self.sock, ("built", self.engine.max_model_len))
            await self._answer()
        finally:
            self.engine.shutdown()
            self._finish()

    def _finish(self) -> None:
        """Close the socket and end this engine's loop thread (a process that restarts engines keeps none idle)."""
        self.sock.close()
        self.finished.set()
        self.thread.stop_when_idle()

    async def _answer(self) -> None:
        """Serve the app's requests until it says shutdown or its end closes."""
        reader, writer = await asyncio.open_unix_connection(sock=self.sock)
        streams: dict[str, asyncio.Task] = {}
        try:
            while True:
                message = await wire.receive_async(reader)  # EOFError: the app closed its end
                kind = message[0]
                if kind == "generate":
                    _, request_id, token_ids, sampling = message
                    streams[request_id] = asyncio.create_task(
                        self._stream(writer, request_id, token_ids, sampling, streams))
                elif kind == "abort":
                    task = streams.pop(message[1], None)
                    if task is not None:
                        task.cancel()
                    await self.engine.abort(message[1])
                elif kind == "call":
                    asyncio.create_task(self._reply(writer, message[1], message[2]))
                elif kind == "shutdown":
                    return
        except (EOFError, ConnectionError):
            return
        finally:
            for task in streams.values():
                task.cancel()
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter, request_id: str, token_ids: list[int], sampling: Any,
                      streams: dict[str, asyncio.Task]) -> None:
        try:
            async for delta in self.engine.generate(token_ids, sampling, request_id):
                writer.write(wire.frame(("delta", request_id, delta)))
                await writer.drain()
            writer.write(wire.frame(("end", request_id)))
        except asyncio.CancelledError:
            raise  # aborted by the app, which no longer waits for this answer
        except EngineDied as err:
            writer.write(wire.frame(("error", request_id, True, str(err))))
        except Exception as err:
            log.exception("request %s failed in the engine", request_id, extra=FILE_ONLY)
            writer.write(wire.frame(("error", request_id, False, error_text(err))))
        finally:
            streams.pop(request_id, None)

    async def _reply(self, writer: asyncio.StreamWriter, call_id: int, name: str) -> None:
        try:
            if name == "check_health":
                dead = self.engine.dead_reason()
                if dead:
                    raise EngineDied(dead)
                await self.engine.check_health()
                value = None
            elif name == "unfinished_requests":
                value = self.engine.unfinished_requests()
            else:
                raise ValueError(f"unknown call {name!r}")
            writer.write(wire.frame(("reply", call_id, None, value)))
        except Exception as err:
            writer.write(wire.frame(("reply", call_id, error_text(err), None)))


def _import_ahead() -> None:
    """Import torch and vLLM now, while the app imports its UI; the first build finds them loaded."""
    from app.engine.vllm_engine import import_vllm

    began = time.monotonic()
    try:
        import_vllm()
    except Exception:  # the build imports again and reports the error where the app sees it
        log.exception("importing vLLM ahead of the first build failed", extra=FILE_ONLY)
        return
    log.info("engine process: vLLM imported in %.2f s", time.monotonic() - began, extra=FILE_ONLY)


def _prefill_sums() -> tuple[float, float]:
    from prometheus_client import REGISTRY

    from app.engine.prefill_rate import registry_sums

    return registry_sums(REGISTRY)


def _metrics_text() -> bytes:
    from prometheus_client import REGISTRY, generate_latest

    return generate_latest(REGISTRY)


class AppSockets:
    """The sockets to the app, closed in every process forked from here (vLLM's engine core on a GPU): a fork keeps
    a copy of each, and a socket whose copy lives on in the core would not tell the app that this process died."""

    def __init__(self) -> None:
        self.held: list[socket.socket] = []
        os.register_at_fork(after_in_child=self._close_all)

    def _close_all(self) -> None:
        for sock in self.held:
            with contextlib.suppress(OSError):
                sock.close()
        self.held = []


def serve(control: socket.socket) -> None:
    """Answer the control socket until it closes, then shut every engine down."""
    app_sockets = AppSockets()
    app_sockets.held.append(control)
    served: list[ServedEngine] = []
    try:
        while True:
            message = wire.receive(control)
            kind = message[0]
            if kind == "build":
                _, model_path, plan = message
                engine_socket = wire.receive_socket(control)
                app_sockets.held.append(engine_socket)
                engine = ServedEngine(engine_socket, model_path, plan, f"engine-{len(served) + 1}")
                served.append(engine)
                engine.start()
            elif kind == "prefill_sums":
                wire.send(control, (message[1], _prefill_sums()))
            elif kind == "metrics":
                wire.send(control, (message[1], _metrics_text()))
    except (EOFError, ConnectionError):
        pass
    for engine in served:
        engine.stop()


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[0]))
    resource_tracker.quiet()  # the tracker vLLM's processes start from here
    setup_logging(Path(argv[1]), vllm_console_level=argv[2] if len(argv) > 2 and argv[2] else None)
    log.info("engine process %d: importing vLLM ahead of the first build", os.getpid(), extra=FILE_ONLY)
    threading.Thread(target=_import_ahead, name="import-vllm", daemon=True).start()
    serve(control)
    resource_tracker.stop()
    log.info("engine process %d: every engine stopped, leaving", os.getpid(), extra=FILE_ONLY)
    logging.shutdown()
    # Nothing is left to save: the interpreter's teardown of torch's state only costs seconds (app/launcher.py leave).
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
