"""Build the card tables of README.md and docs/profiles.md from `launch.py --print-config --json`.

    python scripts/card_tables.py           # print both tables
    python scripts/card_tables.py --write   # put them into the docs, between their <!-- card-table --> markers

Every figure in the tables (dtype, graphs, context, KV cache, planned memory, the tutorial lines' flags)
comes from the planner as a user would see it; only the prose in NOTES is written here. A test
(tests/integration/test_print_config.py) asserts the docs hold exactly these tables, so they cannot drift.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
DOCS = {"readme": ROOT / "README.md", "profiles": ROOT / "docs" / "profiles.md"}


@dataclass(frozen=True)
class Card:
    """One row: the card NVML would report (--assume-gpu), and what the docs say about it."""

    label: str  # README's card column
    family: str  # docs/profiles.md's family column
    spec: str  # --assume-gpu "NAME,CC,MEM_GIB[,FREE_GIB]"
    readme_note: str
    profiles_note: str
    tutorial: Optional[str] = None  # the tutorial's line for this card, if it printed one


CARDS = (
    Card("V100 (sm70)", "Volta (V100)", "Tesla V100-SXM2-16GB,7.0,16",
         "needs a **CUDA 12 build of vLLM**: the default wheels link CUDA 13, which has no sm_70 code. We refuse "
         "with the exact command: `{fix}`; with it: float16 (no bf16 below sm80), graphs on",
         "vLLM's default wheels link CUDA 13, which has no sm_70 code: we **refuse** and print the fix (a CUDA "
         "12.9 build: `{fix}`); with it, float16 (bf16 does not exist on sm70). sm70 is below vLLM's stated "
         "minimum (sm75): best effort.", "tutorial-v100"),
    Card("T4, RTX 20 (sm75)", "Turing (T4, RTX 20)", "Tesla T4,7.5,15",
         "no bf16 below sm80", "no bf16; FlashAttention needs sm80, vLLM falls back by itself"),
    Card("A100, A30 (sm80)", "Ampere DC (A100 40/80, A30)", "NVIDIA A100-SXM4-40GB,8.0,40",
         "the model's own dtype",
         "sm80 has no fp8 hardware: the tutorial's fp8 weights and KV cache run through fallbacks there (not "
         "measured); the line as printed held 126.6 GiB of an H200 (docs/benchmarks.md, 2026-12-03)", "tutorial-a100"),
    Card("A10, A40, RTX 30 (sm86)", "Ampere (A10, A40, RTX 30)", "NVIDIA A10,8.6,22.5",
         "no fp8 here: fp8 KV would change backends or fail",
         "the tutorial's line is eager: on an H200 it decoded 100-132 tok/s single-stream, auto "
         "488-648 (docs/benchmarks.md, 2026-12-03); sm86 has no fp8, so the KV cache stays bf16", "tutorial-a10"),
    Card("L4, L40S, RTX 40 (sm89)", "Ada (L4, L40S, RTX 40)", "NVIDIA L4,8.9,22.5",
         "fp8 KV only if you ask; it buys nothing for one user", "fp8 KV possible here, only if asked"),
    Card("H100, H200 (sm90)", "Hopper (H100, H200, H20, GH200)", "NVIDIA H200,9.0,140.4",
         "499-606 tok/s single stream, 16 chats at 5.5-7.6k tok/s together, 2.8 GiB of the card, measured on an "
         "H200 (docs/benchmarks.md)",
         "measured on an H200: 499-606 tok/s single stream, 16 chats at 5.5-7.6k tok/s together, 2.8 GiB of the "
         "card (docs/benchmarks.md, 2026-12-04)"),
    Card("B200, RTX 50 (sm100/120)", "Blackwell (B200; RTX 50)", "NVIDIA B200,10.0,179",
         "", "default CUDA 13 wheels carry sm100/sm120"),
    Card("8 GB laptop, 6.9 GiB free (sm89)", "small or shared card (RTX 4060 Laptop, 6.9 GiB free)",
         "NVIDIA GeForce RTX 4060 Laptop GPU,8.9,8,6.9", "the share follows the plan, not the card",
         "gpu_memory_utilization is what the plan needs of this card"),
    Card("shared card, 2.4 GiB free (sm86)", "shared card (RTX 3050, 2.4 GiB free)",
         "NVIDIA GeForce RTX 3050,8.6,8,2.4", "the longest context that fits; chats share the rest",
         "the longest context that fits alone; chats share the rest (paged KV)"),
)
CPU_README = ("| no GPU | bf16 / fp32 | eager | for 16 chats | RAM | the engine (eager already) "
              "| CPU build; compile costs 100 s of start on a CPU |")
CPU_PROFILES = ("| no NVIDIA card | - | bfloat16 with AVX512-BF16/AMX, else float32 | eager | 8k / for 16 chats | - | "
                "CPU build (`requirements-cpu.txt`); torch.compile on a CPU took 115 s to start vs 16 s eager; "
                "the model runs in vLLM's engine process, not a worker process of its own (ready 4-5 s sooner on 2 "
                "cores) |")


def print_config(spec: str, profile: str = "auto") -> tuple[Optional[dict], str]:
    """(the plan as --print-config --json gives it, or None when refused; stderr)."""
    out = subprocess.run([sys.executable, "launch.py", "--print-config", "--json", "--assume-gpu", spec,
                          "--profile", profile], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    return (json.loads(out.stdout) if out.returncode == 0 else None), out.stderr


def _gib(n: float) -> str:
    return f"{n:.2f} GiB"


def _context(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def describe_line(args: dict) -> str:
    """A tutorial line in a few words, from its engine arguments."""
    words = [f"{args['dtype']}", "eager" if args.get("enforce_eager") else "graphs on",
             f"util {args['gpu_memory_utilization']}", f"{_context(args['max_model_len'])} context"]
    if args.get("quantization"):
        words.append(f"{args['quantization']} weights")
    if args.get("kv_cache_dtype"):
        words.append(f"{args['kv_cache_dtype']} KV")
    return ", ".join(words)


def _first_answers(plan: dict) -> str:
    """Who answers while the compiled engine is built: an eager starting engine (and what it holds meanwhile)."""
    starter = plan.get("starter")
    if starter is None:
        reason = plan["reasons"]["quick_start"]
        return "the full engine alone" + (" (two do not fit)" if "together need" in reason else "")
    return f"an eager engine, +{_gib(starter['planned_gib'])} until the switch"


def _fix(stderr: str) -> str:
    found = re.search(r"pip install \S+(?: --extra-index-url \S+)+", stderr)
    return found.group(0) if found else ""


def tables() -> dict[str, str]:
    """{"readme": table, "profiles": table}, each a block of Markdown lines."""
    with ThreadPoolExecutor(4) as pool:
        plans = list(pool.map(lambda c: print_config(c.spec), CARDS))
        lines = list(pool.map(lambda c: print_config(c.spec, c.tutorial)[0] if c.tutorial else None, CARDS))
    readme = ["| card | dtype | CUDA graphs | context | KV cache | planned GPU memory | first answers (--quick-start) "
              "| why |", "|---|---|---|---|---|---|---|---|"]
    profiles = ["| family (examples) | sm | dtype | graphs | context / KV / planned GPU memory | tutorial line | "
                "what differs and why |", "|---|---|---|---|---|---|---|"]
    for card, (plan, stderr), line in zip(CARDS, plans, lines, strict=True):
        sm = card.spec.split(",")[1].replace(".", "")
        tutorial = f"{card.tutorial}: {describe_line(line['engine_args'])}" if line else "-"
        if plan is None:  # refused: the default CUDA 13 wheels on a V100
            fix = _fix(stderr)
            readme.append(f"| {card.label} | - | - | - | - | refused | - | {card.readme_note.format(fix=fix)} |")
            profiles.append(f"| {card.family} | {sm} | - | - | refused | {tutorial} | "
                            f"{card.profiles_note.format(fix=fix)} |")
            continue
        args = plan["engine_args"]
        graphs = "off" if args["enforce_eager"] else "on"
        kv = _gib(args["kv_cache_memory_bytes"] / 2**30)
        planned = f"{_gib(plan['planned_gib'])} (util {args['gpu_memory_utilization']})"
        readme.append(f"| {card.label} | {args['dtype']} | {graphs} | {_context(args['max_model_len'])} | {kv} | "
                      f"{planned} | {_first_answers(plan)} | {card.readme_note} |")
        profiles.append(f"| {card.family} | {sm} | {args['dtype']} | {graphs} | "
                        f"{_context(args['max_model_len'])} / {kv} / {planned} | {tutorial} | {card.profiles_note} |")
    readme.append(CPU_README)
    profiles.append(CPU_PROFILES)
    return {"readme": "\n".join(readme), "profiles": "\n".join(profiles)}


def marked(name: str, table: str) -> str:
    return f"<!-- card-table:{name} (scripts/card_tables.py --write) -->\n{table}\n<!-- /card-table:{name} -->"


def write(generated: dict[str, str]) -> None:
    for name, path in DOCS.items():
        text = path.read_text()
        pattern = re.compile(rf"<!-- card-table:{name} .*?<!-- /card-table:{name} -->", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{path}: no <!-- card-table:{name} ... --> markers")
        path.write_text(pattern.sub(lambda _, name=name: marked(name, generated[name]), text))


def main() -> None:
    generated = tables()
    if "--write" in sys.argv[1:]:
        write(generated)
    else:
        for name, table in generated.items():
            print(marked(name, table), end="\n\n")


if __name__ == "__main__":
    main()
