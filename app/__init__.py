"""ernie-chat: ERNIE-4.5-0.3B-PT in a Chainlit chat UI with vLLM's engine in the same process."""
import importlib.metadata
import re
import sys
from pathlib import Path
from typing import Optional

_DIST = "ernie-chat"


def _checkout_version() -> Optional[str]:
    """The version in the checkout's pyproject.toml, or None outside a checkout.

    Read before the installed metadata: the app runs from a checkout, and an old `pip install -e .` would
    keep reporting the version it was installed at."""
    try:
        text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            project = tomllib.loads(text).get("project", {})
        except tomllib.TOMLDecodeError:
            return None
    else:  # Python 3.10 has no tomllib: the [project] table's plain `key = "value"` lines are enough here
        project, section = {}, ""
        for line in text.splitlines():
            header = re.match(r"\s*\[([^\[\]]+)\]\s*(#.*)?$", line)
            if header:
                section = header.group(1).strip()
            elif section == "project":
                pair = re.match(r"""\s*(name|version)\s*=\s*["']([^"']*)["']""", line)
                if pair:
                    project[pair.group(1)] = pair.group(2)
    if project.get("name") != _DIST or not isinstance(project.get("version"), str):
        return None  # some other project's pyproject.toml above an installed copy of this package
    return project["version"]


def _version() -> str:
    found = _checkout_version()
    if found:
        return found
    try:
        return importlib.metadata.version(_DIST)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _version()
