"""One engine build forks at a time: the next engine configures and forks only once the last one has forked.

On a GPU vLLM forks its engine core from this process. filelock 4.x (imported by vLLM, torch and
huggingface_hub) adds an audit hook that refuses every ``os.fork`` while another thread is between its own
fork's before- and after-hooks: "os.fork is unsafe while filelock is changing descriptor ownership". With
--quick-start two engines are built on two threads at once, and on a new machine's first launch (every cache
cold, imports and configs slow) their two forks met: 2 of 2 first launches on fresh H100s failed, once on each
engine's fork (issue 31, vLLM 0.29.0, filelock 4.3.2).

So a build that will fork holds this gate from its start until its own fork has returned in this process, or
until the build ends if it never forks. vLLM forks here once per engine (its engine core; the model runs inside
that process), so the second engine's imports and configuration overlap the first engine's load, and only the
two forks are kept apart: quick-start keeps its head start. The release is an at-fork hook of the forking
thread, Python's own ``os.register_at_fork``; whichever thread forks, nothing else waits on it.

The same hook gives the forked child of the holding build its own environment (``child_env``): the starting
engine's engine core samples without FlashInfer while the full-speed engine, built beside it in the same
process, keeps vLLM's default (app/planning/profiles.py ``STARTER_SAMPLER``). Setting ``os.environ`` in this process
instead would reach whichever engine forked next.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Optional


class ForkGate:
    """A lock an engine build takes before it configures, given back as soon as that build's thread forks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: Optional[int] = None  # the thread ident of the build holding the gate
        self._child_env: Mapping[str, str] = {}  # for the holder's forked child, unless the user set them
        self._hooked = False

    def _hook(self) -> None:
        if not self._hooked:  # registered on first use: nothing is registered by importing this module
            self._hooked = True
            os.register_at_fork(after_in_parent=self._release_if_mine, after_in_child=self._forget)

    def _release_if_mine(self) -> None:
        if self._holder == threading.get_ident():
            self._holder, self._child_env = None, {}
            self._lock.release()

    def _forget(self) -> None:
        """In the forked child: the holder's child takes its environment; no build of the parent's runs here, so
        the gate starts open."""
        if self._holder == threading.get_ident():  # the child's one thread is the thread that forked
            for name, value in self._child_env.items():
                os.environ.setdefault(name, value)
        self._lock, self._holder, self._child_env = threading.Lock(), None, {}

    @contextlib.contextmanager
    def held_until_fork(self, child_env: Optional[Mapping[str, str]] = None) -> Iterator[None]:
        """Hold the gate for a build; it opens when this thread forks, or when the build ends. The child of that
        fork gets ``child_env`` (names the user set keep their values)."""
        self._hook()
        self._lock.acquire()
        self._holder = threading.get_ident()
        self._child_env = dict(child_env or {})
        try:
            yield
        finally:
            self._release_if_mine()
