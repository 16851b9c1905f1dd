"""The engine's side of a test: vLLM's and the app's Prometheus counters read from /metrics."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tests.support.app_process import get

if TYPE_CHECKING:
    pass



def metric_value(text: str, name: str) -> float:
    """Sum of a Prometheus series' samples (all labels)."""
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    if not found:
        raise KeyError(name)
    return total


def prompt_tokens(app):
    """The engine's own count of prompt tokens it has taken (vLLM's counter)."""
    return metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")


def generated_tokens(app):
    return metric_value(get(app.url + "/metrics")[1], "vllm:generation_tokens_total")


def finished_requests(app, reason: str) -> float:
    """Requests the engine finished for ``reason`` ("stop": an end token, "length": max_tokens; vLLM's counter)."""
    text = get(app.url + "/metrics")[1]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{") and f'finished_reason="{reason}"' in line)


def running_requests(app):
    return metric_value(get(app.url + "/metrics")[1], "vllm:num_requests_running")


def wait_until_running(app, count: int, timeout_s: float) -> None:
    """Until the engine runs ``count`` requests at once (vLLM's gauge, read every 50 ms: answers being written hold
    it for seconds); the test fails if it has not by ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (running := int(running_requests(app))) < count:
        assert time.monotonic() < deadline, f"the engine ran {running} requests at once, not {count}, in {timeout_s} s"
        time.sleep(0.05)
