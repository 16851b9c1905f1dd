"""The engine wing: EngineHost and the engines behind its protocol (vLLM's AsyncLLM in this process, or a vLLM
server elsewhere), their status and start progress, the fair queue, and what keeps forks and child processes safe.
It reads the plan from app/planning; it never imports the UI."""
