"""Unit tests stay fast and GPU-free: importing them (and the app modules they test) loads no vLLM or torch."""
import subprocess
import sys

from tests.support.app_process import ROOT


def test_unit_tests_and_the_app_import_no_vllm_or_torch():
    code = """
import importlib, pathlib, sys
for path in sorted(pathlib.Path('tests/unit').rglob('test_*.py')):
    importlib.import_module('.'.join(path.with_suffix('').parts))
for name in ('app.launcher', 'app.serve', 'app.server', 'app.ui.chat', 'app.api', 'app.engine.host',
             'app.engine.remote', 'app.runtime', 'app.conversation', 'app.model_source'):
    importlib.import_module(name)
heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'torch'))
print(heavy[:5])
sys.exit(1 if heavy else 0)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"CHAINLIT_APP_ROOT": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
