"""Entry point: `python launch.py [--help]`. Everything happens in app/launcher.py.

The guard matters: a process started with multiprocessing's spawn method re-imports its parent's main file as
``__mp_main__`` (vLLM's CPU platform spawns its engine core that way, from the engine process that
app/engine/engine_process.py runs); nothing may start at import.
"""

if __name__ == "__main__":
    from app.launcher import leave, main

    leave(main())
