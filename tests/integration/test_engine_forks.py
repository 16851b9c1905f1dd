"""Two engines built at once (--quick-start on a GPU) must never fork together: filelock 4.x's audit hook refuses
an os.fork while another thread is inside its own fork ("os.fork is unsafe while filelock is changing descriptor
ownership"), which failed 2 of 2 first launches on fresh H100s (issue 31). filelock adds that hook on Python 3.12
and newer; on an older Python this test adds the same hook, filelock's own function.

CI's CPU build spawns its engine core, so this runs the app's own create_vllm_engine from two threads, as
EngineHost does with a starting and a full-speed engine, for a GPU plan, with vLLM's AsyncLLM.from_engine_args
replaced by what it does on a GPU up to the engine core: build the real engine config, then fork a process. The
two builds are made to meet right before forking (as two slow cold starts did), and each fork is slowed the way
forking a large process on a loaded host is, so the two forks overlap unless the app keeps them apart.
"""
import subprocess
import sys
import textwrap

import pytest

from tests.support.app_process import ROOT

pytestmark = pytest.mark.timeout(300)

SERVING_PROCESS = textwrap.dedent("""
    import os
    import sys
    import threading
    import time

    # Registered before filelock's own at-fork hooks, so it runs after filelock has marked this thread as forking:
    # it stands for the copy of a large process's memory map, the part of a fork that takes long.
    os.register_at_fork(before=lambda: time.sleep(0.5))

    import filelock._core._fork as filelock_forks  # what vLLM's import of filelock sets up
    import multiprocessing

    if sys.version_info < (3, 12):  # filelock adds its fork audit on 3.12+ only (the GPU machine's Python): add it
        sys.addaudithook(filelock_forks._audit_fork_safety)
    from dataclasses import replace
    from types import SimpleNamespace

    from vllm.v1.engine.async_llm import AsyncLLM

    from app.planning.hardware import VllmBuild
    from app.planning.profiles import STARTER_SAMPLER, plan_engine
    from app.settings import EngineSettings
    from app.engine.vllm_engine import create_vllm_engine

    meet = threading.Barrier(2, timeout=5)


    def fork_engine_core(args):  # what AsyncLLM.from_engine_args does on a GPU, up to its engine core's fork
        config = args.create_engine_config()
        try:
            meet.wait()  # both builds reach their fork together, as two cold starts did
        except threading.BrokenBarrierError:  # the other build is held back: no meeting, fork alone
            pass
        core = multiprocessing.get_context("fork").Process(target=exit_with_the_sampler_setting)
        core.start()
        core.join()
        return SimpleNamespace(model_config=config.model_config, core_exit=core.exitcode)


    def exit_with_the_sampler_setting():  # the engine core: what its sampler would read, as its exit code
        os._exit(int(os.environ.get("VLLM_USE_FLASHINFER_SAMPLER", "7")))


    def build(name, results):
        try:
            engine = create_vllm_engine(sys.argv[1], plan.starter if name == "starting" else plan)
            results[name] = f"ok, engine core exit {engine._llm.core_exit}"
        except BaseException as err:
            results[name] = f"{type(err).__name__}: {err}"


    if __name__ == "__main__":
        AsyncLLM.from_engine_args = staticmethod(fork_engine_core)
        plan = plan_engine(EngineSettings(max_model_len=1024), [], VllmBuild(True, "0.29.0", "cpu"))
        plan = replace(plan, device="cuda")  # vLLM forks its engine core for a GPU plan
        plan = replace(plan, starter=replace(plan, core_env=STARTER_SAMPLER))  # a GPU plan's starter's engine core
        results = {}
        threads = [threading.Thread(target=build, args=(name, results)) for name in ("starting", "full")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name in ("starting", "full"):
            print("BUILD", name, results.get(name), flush=True)
        print("APP", os.environ.get("VLLM_USE_FLASHINFER_SAMPLER", "unset"), flush=True)
""")


def test_two_engine_builds_at_once_never_fork_together_and_each_core_gets_its_own_environment(tmp_path, tiny_model_dir):
    script = tmp_path / "serving_process.py"
    script.write_text(SERVING_PROCESS)
    done = subprocess.run([sys.executable, str(script), str(tiny_model_dir)], cwd=ROOT, capture_output=True,
                          text=True, timeout=240, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    builds = [line for line in done.stdout.splitlines() if line.startswith(("BUILD", "APP"))]
    assert done.returncode == 0 and len(builds) == 3, done.stdout[-2000:] + done.stderr[-3000:]
    # Neither fork refused; the starting engine's core samples without FlashInfer (0), the full one's keeps
    # vLLM's default (unset: exit 7), and the app's own environment is left as it was.
    assert builds == ["BUILD starting ok, engine core exit 0", "BUILD full ok, engine core exit 7", "APP unset"], builds
