"""The compiled engine's start on a GPU, where CI can run it: vLLM forks its engine core from the serving process
(the UI loaded), and torch inductor pickles a cache key there. This runs the app's own create_vllm_engine up to
the fork and, in a forked child, inductor's own cache-key function over a small graph holding a function that
pickle must look up by scanning sys.modules (no __module__): on a GPU that scan ended in Chainlit's lazy
__getattr__ with ``KeyError: 'torch'`` and the compiled engine never started."""
import subprocess
import sys
import textwrap

import pytest

from tests.support.app_process import ROOT

pytestmark = pytest.mark.timeout(300)

SERVING_PROCESS = textwrap.dedent("""
    import multiprocessing
    import sys

    import app.ui.chat, app.server, chainlit.server  # what the serving process has loaded when the engine starts
    import torch
    from torch._inductor.codecache import BypassFxGraphCache, compiled_fx_graph_hash
    from vllm.v1.engine.async_llm import AsyncLLM

    from app.planning.profiles import plan_engine
    from app.settings import EngineSettings
    from app.planning.hardware import VllmBuild
    from app.engine.vllm_engine import create_vllm_engine


    def cache_key_in_child(results):
        namespace = {}
        exec("def helper(x):\\n    return x + 1\\n", namespace)  # globals without __name__: __module__ is None
        graph = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)
        graph.helper = namespace["helper"]
        try:
            results.put(("key", compiled_fx_graph_hash(graph, [torch.randn(4)], {}, [])[0][:12]))
        except BypassFxGraphCache as err:  # inductor's own answer to an unpicklable key: compile, do not cache
            results.put(("bypass", str(err)))
        except BaseException as err:
            results.put(("crash", f"{type(err).__name__}: {err}"))


    def fork_engine_core(args):  # where vLLM forks its engine core on a GPU
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=cache_key_in_child, args=(results,))
        child.start()
        outcome = results.get(timeout=120)
        child.join()
        print("CHILD", *outcome, flush=True)
        sys.exit(0)


    if __name__ == "__main__":
        AsyncLLM.from_engine_args = staticmethod(fork_engine_core)
        plan = plan_engine(EngineSettings(), [], VllmBuild(True, "0.29.0", "cpu"))
        create_vllm_engine(sys.argv[1], plan)
""")


def test_inductor_cache_key_in_the_forked_engine_core_does_not_crash(tmp_path, tiny_model_dir):
    script = tmp_path / "serving_process.py"
    script.write_text(SERVING_PROCESS)
    done = subprocess.run([sys.executable, str(script), str(tiny_model_dir)], cwd=ROOT, capture_output=True,
                          text=True, timeout=240, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                       "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    lines = [line for line in done.stdout.splitlines() if line.startswith("CHILD")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
    outcome = lines[0].split(" ", 2)
    assert outcome[1] in ("key", "bypass"), lines[0]
