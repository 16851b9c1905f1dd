"""multiprocessing's resource tracker, in the app and in its engine process: quiet about what it rightly cleans up,
ended before its process ends, and known by its pid (an exit does not wait for it).

vLLM's engine processes share a segment of shared memory (and a semaphore) that the one killed last at shutdown
never unlinks; the tracker of the process that started them unlinks it, as it should, but warns "There appear to be
1 leaked shared_memory objects", and once printed that after the shell's prompt. Its three uses are private names
of multiprocessing: a change there is caught, and only the warning or the early stop is lost.
"""
from __future__ import annotations

import sys


def quiet() -> None:
    """Keep the cleanup, drop the warning: the tracker starts later, from this process, with its -W options."""
    sys.warnoptions.append("ignore:resource_tracker:UserWarning")


def pid() -> int:
    """The tracker's pid, -1 when there is none."""
    try:
        from multiprocessing import resource_tracker

        return resource_tracker._resource_tracker._pid or -1  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return -1


def stop() -> None:
    """End the tracker now (it cleans up and leaves), not after this process."""
    try:
        from multiprocessing import resource_tracker

        resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]
    except (ImportError, AttributeError, ChildProcessError, OSError):
        pass
