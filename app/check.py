"""`python launch.py check`: the tutorial's readiness check, against /readyz instead of a log grep."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from app.settings import AppSettings
from app.telemetry import RUN_MARKER

TIMEOUT_SECONDS = 3.0


def last_error_line(log_file: Path) -> Optional[str]:
    """The last ERROR line of the newest run in the log, for 'why is it not ready?'.

    Only the newest run counts: an error of an earlier, unrelated run in the same file once showed up
    as the reason a fresh start was still loading.
    """
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if RUN_MARKER in line:
            return None
        if " ERROR " in line or line.startswith("error:"):
            return line.strip()
    return None


def run_check(settings: AppSettings) -> int:
    server = settings.server
    host = "127.0.0.1" if server.host in ("0.0.0.0", "::") else server.host
    # Straight to the app, not through a proxy: the --root-path prefix is the proxy's, so it is not used here.
    url = f"http://{host}:{server.port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            body = json.loads(response.read() or b"{}")
            print(f"ready: {url} ({body.get('detail') or 'engine answers'})")
            return 0
    except ValueError:
        message = f"not ernie-chat: {url} answered something else (another program on this port?)"
    except urllib.error.HTTPError as err:
        try:
            body = json.loads(err.read() or b"{}")
        except ValueError:
            body = {}
        state = body.get("state", f"HTTP {err.code}")
        detail = body.get("detail") or ""
        if body.get("step"):
            detail = f"step {body['step']}/{body['steps']}, {body.get('starting_seconds', 0):.0f} s: {detail}"
        message = f"not ready: {state}" + (f" ({detail})" if detail else "")
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        message = f"not running: nothing answers at {url} ({reason})"
    error = last_error_line(server.log_file)
    print(message)
    if error:
        print(f"last error in {server.log_file}: {error}")
    return 1
