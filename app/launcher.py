"""What `python launch.py` does: parse, probe, plan, then print the plan, check a running app, or serve.

Kept out of launch.py so that the spawn start method (vLLM's CPU platform re-imports the main file as
``__mp_main__``) finds nothing to run there.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import NoReturn, Optional

from app.cli import Command, parse_command
from app.engine.end_of_turn import EndToken, describe
from app.errors import ErnieChatError, InsecureBindError, PortInUseError
from app.model_source import check_model_setting, model_answer_end, model_files_here, model_shape
from app.planning.engine_plan import EnginePlan
from app.planning.hardware import cpu_facts, detect_vllm_build, gib, parse_assumed_gpu, probe_gpus
from app.planning.profiles import plan_engine
from app.settings import AppSettings

log = logging.getLogger("ernie_chat")


def make_plan(command: Command) -> EnginePlan:
    settings = command.settings
    if settings.model.remote_url:
        from app.planning.profiles import plan_remote

        return plan_remote(settings.engine, settings.model.remote_url)
    if command.assume_gpu:
        gpus = [parse_assumed_gpu(spec, i) for i, spec in enumerate(command.assume_gpu)]
    else:
        gpus = probe_gpus()
    build = detect_vllm_build()
    if command.assume_gpu and build.device != "cuda":
        # Planning for a card we do not have: assume the GPU build users install (requirements.txt).
        from app.planning.hardware import VllmBuild

        build = VllmBuild(installed=True, version="0.29.0", device="cuda", torch_cuda="13.0")
    elif not build.installed and command.action == "serve":
        raise ErnieChatError("vLLM is not installed: pip install -r requirements.txt (NVIDIA GPU) or "
                             "pip install -r requirements-cpu.txt (no GPU)")
    return plan_engine(settings.engine, gpus, build, model_shape(settings.model), cpu_facts())


def print_plan(plan: EnginePlan, as_json: bool, answer_end: Optional[tuple[EndToken, ...]] = None) -> None:
    """The plan, and the tokens answers end at (None: the model's files are not here yet)."""
    if as_json:
        ends = None if answer_end is None else [asdict(end) for end in answer_end]
        print(json.dumps({**plan.to_dict(), "answer_end_tokens": ends}, indent=2, ensure_ascii=False))
        return
    gpu = plan.gpu
    print(f"card:    {gpu.name} (sm{gpu.sm}, {gib(gpu.total_bytes, 1)}, {gib(gpu.free_bytes, 1)} free)"
          if gpu else "card:    none (CPU)" if plan.device == "cpu" else "card:    none needed here")
    print(f"profile: {plan.profile}   planned memory: {gib(plan.planned_bytes)}")
    print(f"answers at once: {plan.max_concurrent}\n      why: {plan.reasons.get('max_concurrent', '')}")
    for name, value in plan.engine_args.items():
        print(f"  --{name.replace('_', '-')}={value}\n      why: {plan.reasons.get(name, '')}")
    for name, value in {**plan.env_defaults, **plan.env}.items():
        if name in plan.reasons:
            print(f"  env {name}={value}\n      why: {plan.reasons[name]}")
    if "gpu" in plan.reasons:
        print(f"  gpu: {plan.reasons['gpu']}")
    if "quick_start" in plan.reasons:
        print(f"quick start: {plan.reasons['quick_start']}")
    if plan.starter is not None:
        print(f"  the starting engine ({gib(plan.starter.planned_bytes)}) differs in:")
        starter = plan.starter
        for name, why in plan.starter_differences().items():
            setting = (f"env {name}={starter.core_env[name]} (its engine core only)" if name in starter.core_env
                       else f"--{name.replace('_', '-')}={starter.engine_args[name]}")
            print(f"  {setting}\n      why: {why}")
    print(f"answers end at: {describe(answer_end)}")
    for line in plan.warnings:
        print(f"warning: {line}")


def print_plan_to_stdout(plan: EnginePlan, as_json: bool, answer_end: Optional[tuple[EndToken, ...]] = None) -> int:
    """Print the plan; `--print-config | head` (the reader leaves early) ends quietly with exit 1."""
    try:
        print_plan(plan, as_json, answer_end)
        sys.stdout.flush()  # into a pipe the plan sits in Python's buffer: a closed pipe shows only here
    except BrokenPipeError:
        # Nothing more to say; stdout goes to /dev/null so that Python's own flush at exit does not print a
        # second complaint (the recipe in Python's signal docs).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def ensure_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            raise PortInUseError(f"cannot listen on {host}:{port} ({err.strerror}); another program uses it: "
                                 f"pick another with --port, or stop it (ss -ltnp | grep :{port})") from None


def ensure_safe_exposure(settings: AppSettings) -> None:
    server = settings.server
    if server.is_loopback or server.auth_token or server.insecure_no_auth:
        return
    raise InsecureBindError(f"--host {server.host} exposes the chat to the network without a password; "
                            "set --auth-token (or ERNIE_CHAT_AUTH_TOKEN), or pass --insecure-no-auth if you "
                            "really mean it")


def launched_at() -> float:
    """When this process started: the moment the user pressed Enter, which every "ready in N s" counts from.

    On Linux from the process's age (now minus its start in seconds since boot, 10 ms ticks): psutil's
    create_time adds that start to the boot time, which Linux gives in whole seconds, so it read up to 1 s
    early (the log said the web server started at 2.3 s when it answered at 1.9 s).
    """
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            # the fields after the command name, which is in parentheses and may hold spaces; starttime is 22nd
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            seconds_since_boot = float(uptime.read().split()[0])
        return time.time() - (seconds_since_boot - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):  # not Linux
        import psutil

        return psutil.Process().create_time()


def serve(settings: AppSettings, plan: EnginePlan) -> int:
    # Everything that can be known before start is checked here, so it is one line and exit 2, not a
    # started server that fails later.
    ensure_safe_exposure(settings)
    check_model_setting(settings.model)
    ensure_port_free(settings.server.host, settings.server.port)
    for line in plan.warnings:  # the lines --print-config shows: a start does not hide them
        print(f"warning: {line}", file=sys.stderr)
    from app.serve import serve as run

    return run(settings, plan, launched_at())


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        command = parse_command(argv)
        if command.action == "check":
            from app.check import run_check

            return run_check(command.settings)
        if command.action in ("export", "import"):  # chat history: no engine needed
            from app.history.transfer import run_transfer_command

            return run_transfer_command(command)
        if command.action == "users":  # per-person logins: no engine needed
            from app.users_command import run_users_command

            return run_users_command(command)
        if command.action == "chats":  # whose chats are whose: no engine needed
            from app.chats_command import run_chats_command

            return run_chats_command(command)
        plan = make_plan(command)
        if command.action == "print-config":
            answer_end = model_answer_end(model_files_here(command.settings.model))
            return print_plan_to_stdout(plan, command.as_json, answer_end)
        return serve(command.settings, plan)
    except ErnieChatError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130


def leave(code: int) -> NoReturn:
    """End the process once ``main`` has returned: run the exit handlers (logging's flush among them) and flush
    the terminal, then exit without the interpreter's teardown. By then the database is closed, the engine's
    processes are reaped and every file written is closed; the teardown frees every module's objects one by one,
    torch's C++ state included, and took 2-5 s of a Ctrl-C exit (the log's "shutdown: done, leaving" line to
    the process's end) with nothing left to save."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: nothing more can be said there
            stream.flush()
    os._exit(code)
