"""Engine start progress in the terminal: one bar, step N of 4, the step's name and the time so far.

Driven by EngineHost's status changes (a listener), so it shows the same steps as the UI's status panel
and /readyz. Only drawn on a terminal: in a log file or under systemd a bar is noise, and every step is
logged as a line anyway. A small ticker redraws the bar each second, because the longest step (vLLM
loading the weights and capturing graphs) sends no updates of its own and a frozen bar looks hung.
"""
from __future__ import annotations

import shutil
import threading
from typing import IO, Optional

from tqdm import tqdm

from app.engine.status import START_STEPS, EngineState, EngineStatus

BAR_FORMAT = "{desc} |{bar:24}| {n_fmt}/{total_fmt} steps [{elapsed}]"


class StartProgressBar:
    """A status listener: ``host.add_listener(StartProgressBar(sys.stderr))``."""

    def __init__(self, stream: IO[str], refresh_s: float = 1.0) -> None:
        self.stream = stream
        self.refresh_s = refresh_s
        self._bar: Optional[tqdm] = None
        self._lock = threading.Lock()
        self._ticker: Optional[threading.Thread] = None
        self._stop = threading.Event()

    def __call__(self, status: EngineStatus) -> None:
        with self._lock:
            if status.step is not None and status.state in (EngineState.LOADING, EngineState.WARMING,
                                                            EngineState.RESTARTING):
                self._show(status)
            elif self._bar is not None:
                self._finish(status)

    def _show(self, status: EngineStatus) -> None:
        if self._bar is None:
            verb = "restarting" if status.state is EngineState.RESTARTING else "starting"
            # A terminal that reports no size (some IDE consoles, fresh ptys) gets 100x24: tqdm hides
            # bars beyond the terminal's row count, and a reported 0 rows would hide this one.
            size = shutil.get_terminal_size((100, 24))
            self._bar = tqdm(total=START_STEPS, file=self.stream, bar_format=BAR_FORMAT, leave=True,
                             ncols=size.columns or 100, nrows=size.lines or 24, desc=verb)
            # One clock: the bar's [elapsed] counts from the launch (or the restart), like the panel,
            # /readyz and check (it once read 45 s where the panel said 35.8 s).
            self._bar.start_t = status.start_began_at
            self._verb = verb
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, name="start-progress", daemon=True)
            self._ticker.start()
        # n counts finished steps: at step 3 of 4, two are done.
        self._bar.n = int(status.step or 0) - 1
        self._bar.set_description_str(f"{self._verb} [{int(status.step or 0)}/{START_STEPS}] {status.detail}",
                                      refresh=False)
        self._bar.refresh()

    def _finish(self, status: EngineStatus) -> None:
        assert self._bar is not None
        if status.state is EngineState.READY:
            self._bar.n = START_STEPS
        self._bar.set_description_str(f"{status.state.value}: {status.detail}", refresh=False)
        self._bar.refresh()
        self._bar.close()
        self._bar = None
        self._stop.set()

    def _tick(self) -> None:
        while not self._stop.wait(self.refresh_s):
            with self._lock:
                if self._bar is not None:
                    self._bar.refresh()

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            self._stop.set()
