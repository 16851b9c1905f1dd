"""ernie-chat: ERNIE-4.5-0.3B-PT in a Chainlit chat UI with vLLM's engine in the same process."""
__version__ = "0.1.0"
