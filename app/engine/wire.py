"""Messages between the app and its engine process: a 4-byte length, then a pickle.

Both ends are this app's own processes, over socket pairs the app makes and hands only to the engine process it
starts, so pickle carries the app's own dataclasses (EnginePlan, Sampling, Delta) as they are. Each engine built
there gets a socket pair of its own, whose far end crosses on the control socket (``send_socket``), so an engine's
answers never wait behind another engine's or behind a control call.
"""
from __future__ import annotations

import asyncio
import pickle
import socket
import struct
from typing import Any

HEADER = struct.Struct("!I")


def frame(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = sock.recv(left)
        if not part:
            raise EOFError("the other end closed the socket")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def send(sock: socket.socket, message: Any) -> None:
    sock.sendall(frame(message))


def receive(sock: socket.socket) -> Any:
    """The next message; EOFError once the other end has closed."""
    (size,) = HEADER.unpack(_read_exactly(sock, HEADER.size))
    return pickle.loads(_read_exactly(sock, size))


async def receive_async(reader: asyncio.StreamReader) -> Any:
    """The next message from an asyncio stream; EOFError once the other end has closed."""
    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        return pickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        raise EOFError("the other end closed the socket") from None


def send_socket(control: socket.socket, sock: socket.socket) -> None:
    """Hand ``sock`` to the process at the other end of ``control`` (SCM_RIGHTS, one marker byte)."""
    socket.send_fds(control, [b"S"], [sock.fileno()])


def receive_socket(control: socket.socket) -> socket.socket:
    _, fds, _, _ = socket.recv_fds(control, 1, 1)
    if not fds:
        raise EOFError("no socket came with the message")
    return socket.socket(fileno=fds[0])
