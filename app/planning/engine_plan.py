"""The records an engine start is described by: the model's shape and the engine plan.

app/planning/profiles.py makes the plan from the card and the model's shape; the engine protocol, the engine host and
the engines read it. Here, apart from the planner, so that those readers import neither the planner nor its
hardware probes, settings and tutorial command lines.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from app.planning.hardware import GpuInfo

# The plan's `distributed_executor_backend` for the model inside vLLM's engine process (vLLM's "uni").
ONE_PROCESS_EXECUTOR = "uni"


@dataclass(frozen=True)
class ModelShape:
    """What the memory plan needs to know about the model (read from its config.json)."""

    num_layers: int = 18
    num_kv_heads: int = 2
    head_dim: int = 128
    num_params: int = 360_700_000
    max_position_embeddings: int = 131072

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModelShape:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        layers = int(config["num_hidden_layers"])
        vocab = int(config["vocab_size"])
        inter = int(config.get("intermediate_size", 4 * hidden))
        kv_heads = int(config.get("num_key_value_heads", heads))
        head_dim = int(config.get("head_dim") or hidden // heads)
        # Llama-like block: q,o (hidden x heads*head_dim), k,v (hidden x kv_heads*head_dim), 3 MLP mats.
        per_layer = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * inter
        embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
        return cls(num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim,
                   num_params=layers * per_layer + embeddings,
                   max_position_embeddings=int(config.get("max_position_embeddings", 131072)))

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """K and V for every layer: 2 * 18 * 2 * 128 * 2 = 18,432 bytes for ERNIE-4.5-0.3B in 16 bit."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    def weight_bytes(self, dtype_bytes: int = 2) -> int:
        return self.num_params * dtype_bytes


@dataclass(frozen=True)
class EnginePlan:
    """Engine arguments (vLLM's names) with a reason for each, and what the plan expects to use."""

    profile: str
    device: str  # "cuda" or "cpu"
    gpu: Optional[GpuInfo]
    engine_args: dict[str, Any]
    reasons: dict[str, str]
    # Answers generated at once (reasons["max_concurrent"] says why): the fair queue lets this many through, the
    # warm-up batches up to it, and vLLM's max_num_seqs is sized from it. 1 only in hand-made plans (tests).
    max_concurrent: int = 1
    warnings: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # set for the engine's processes
    env_defaults: dict[str, str] = field(default_factory=dict)  # set unless the user set them already
    # Set, unless the user set them, inside this engine's own engine-core process only (the process vLLM forks
    # for it): the engine built beside it at the same time keeps vLLM's defaults.
    core_env: dict[str, str] = field(default_factory=dict)
    planned_bytes: int = 0  # device memory the plan expects the engine to take
    user_set: frozenset[str] = frozenset()  # engine arguments the user gave; a retry never changes these
    kv_bytes_per_token: int = 0  # KV cache per token of context (model and KV dtype); 0 where unknown
    # The eager engine that answers while this one is built (--quick-start); None: this one starts alone.
    starter: Optional[EnginePlan] = None

    def to_dict(self) -> dict[str, Any]:
        from app.planning.hardware import GIB  # here: reading a plan needs no hardware module, only printing one

        return {
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "profile": self.profile,
            "device": self.device,
            "max_concurrent": self.max_concurrent,
            "engine_args": dict(self.engine_args),
            "reasons": dict(self.reasons),
            "warnings": list(self.warnings),
            "env": dict(self.env),
            "env_defaults": dict(self.env_defaults),
            "core_env": dict(self.core_env),
            "planned_gib": round(self.planned_bytes / GIB, 2),
            "set_by_you": sorted(self.user_set),
            "starter": None if self.starter is None else {
                "engine_args": dict(self.starter.engine_args),
                "core_env": dict(self.starter.core_env),
                "reasons": self.starter_differences(),
                "planned_gib": round(self.starter.planned_bytes / GIB, 2)},
        }

    def starter_differences(self) -> dict[str, str]:
        """The starting engine's arguments that differ from this plan's, each with its reason."""
        starter = self.starter
        if starter is None:
            return {}
        differing = [name for name, value in starter.engine_args.items() if self.engine_args.get(name) != value]
        differing += [name for name, value in starter.core_env.items() if self.core_env.get(name) != value]
        return {name: starter.reasons.get(name, "") for name in differing}
