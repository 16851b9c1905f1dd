"""Entry point: `python launch.py [--help]`. Everything happens in app/launcher.py.

The guard matters: vLLM's CPU platform starts its engine with the spawn method, which re-imports this
file as ``__mp_main__``; nothing may start at import.
"""

if __name__ == "__main__":
    from app.launcher import leave, main

    leave(main())
