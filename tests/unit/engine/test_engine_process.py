"""The engine process's sockets to the app (app/engine/engine_process.py, app/engine/wire.py)."""
import os
import socket

from app.engine import wire
from app.engine.engine_process import AppSockets, error_text
from app.engine.protocol import Delta, Sampling


def test_messages_and_a_socket_cross_whole():
    ours, theirs = socket.socketpair()
    extra_ours, extra_theirs = socket.socketpair()
    sampling = Sampling(temperature=0.7, top_p=0.9, max_tokens=12, stop_token_ids=(2,))
    wire.send(ours, ("generate", "r1", list(range(10_000)), sampling))
    wire.send(ours, ("delta", "r1", Delta("你好", 2)))
    wire.send_socket(ours, extra_theirs)
    assert wire.receive(theirs) == ("generate", "r1", list(range(10_000)), sampling)
    assert wire.receive(theirs) == ("delta", "r1", Delta("你好", 2))
    crossed = wire.receive_socket(theirs)
    wire.send(crossed, "through the socket that crossed")
    assert wire.receive(extra_ours) == "through the socket that crossed"
    ours.close()
    try:
        wire.receive(theirs)
        raise AssertionError("no end seen")
    except EOFError:
        pass


def test_a_process_forked_from_the_engine_process_keeps_no_socket_to_the_app():
    """vLLM forks its engine core from the engine process on a GPU: a copy of a socket kept there would hide the
    engine process's death from the app (no end of file while the core lives)."""
    app_end, engine_end = socket.socketpair()
    AppSockets().held.append(engine_end)
    pid = os.fork()
    if pid == 0:  # the forked child: the socket is closed here
        os._exit(0 if engine_end.fileno() == -1 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    engine_end.close()  # the engine process dies: the app sees the end at once
    assert app_end.recv(1) == b""


def test_an_error_crosses_with_its_type_and_cause():
    try:
        try:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except RuntimeError as cause:
            raise ValueError("Engine core initialization failed. See root cause above.") from cause
    except ValueError as err:
        text = error_text(err)
    assert text.startswith("ValueError: Engine core initialization failed")
    assert "(cause: RuntimeError: CUDA out of memory" in text  # the host's out-of-memory retry reads this wording


def test_the_engine_process_gets_the_plans_variables_and_none_of_the_apps_secrets():
    from app.engine.engine_link import engine_environment
    from app.planning.engine_plan import EnginePlan

    plan = EnginePlan(profile="cpu", device="cpu", gpu=None, reasons={}, max_concurrent=4, engine_args={},
                      env={"CUDA_VISIBLE_DEVICES": "GPU-1"}, env_defaults={"OMP_NUM_THREADS": "1"})
    env = engine_environment(plan, {"PATH": "/bin", "OMP_NUM_THREADS": "3", "CHAINLIT_AUTH_SECRET": "s",
                                    "ERNIE_CHAT_AUTH_TOKEN": "t", "VLLM_LOGGING_CONFIG_PATH": "/x.json"})
    assert env == {"PATH": "/bin", "OMP_NUM_THREADS": "3",  # the user's own value stays
                   "VLLM_LOGGING_CONFIG_PATH": "/x.json", "VLLM_HOST_IP": "127.0.0.1", "CUDA_VISIBLE_DEVICES": "GPU-1"}
