"""app.__version__ is the version in pyproject.toml, on every supported Python."""
import re
import sys
from pathlib import Path

import pytest

import app

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def pyproject_version() -> str:
    match = re.search(r'^\[project\]$.*?^version = "([^"]+)"$', PYPROJECT.read_text(encoding="utf-8"), re.M | re.S)
    assert match, "no version in pyproject.toml's [project] table"
    return match.group(1)


def test_version_is_pyprojects():
    assert app.__version__ == pyproject_version()


def test_python310_reader_agrees(monkeypatch):
    """The regex reader that Python 3.10 uses (no tomllib) finds the same version."""
    monkeypatch.setattr(sys, "version_info", (3, 10, 0))
    assert app._checkout_version() == pyproject_version()


def test_other_projects_pyproject_is_not_ours(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\nversion = "9.9"\n')
    (tmp_path / "app").mkdir()
    monkeypatch.setattr(app, "__file__", str(tmp_path / "app" / "__init__.py"))
    assert app._checkout_version() is None


@pytest.mark.parametrize("py", [(3, 10, 0), sys.version_info])
def test_tables_after_project_do_not_leak(tmp_path, monkeypatch, py):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "ernie-chat"\nversion = "1.2.3"\n\n[tool.x]\nversion = "0.0.1"\n'
    )
    (tmp_path / "app").mkdir()
    monkeypatch.setattr(app, "__file__", str(tmp_path / "app" / "__init__.py"))
    monkeypatch.setattr(sys, "version_info", py)
    assert app._checkout_version() == "1.2.3"
