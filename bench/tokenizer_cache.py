"""Tokenizer word cache benchmark: the memory and speed of counting tokens with the tokenizers library's word cache
(its default) and without it (the app's tokenizer, app/token_count.py ``without_word_cache``).

    python -m bench.tokenizer_cache [--rounds 3] [--messages 30000]

On ERNIE's tokenizer file set (tests/tiny_model.py trains its SentencePiece model; transformers converts it as it
converts ERNIE's). Each measurement runs in a fresh process, the two loaders interleaved round by round:
``messages`` distinct chat messages of ~250 characters counted 10 at a time (as a chat's turns are counted): how
much glibc's heap grew (malloc in use, MiB) and the seconds; then a 2-million-character document counted in passages
of 4,000 characters (as a document is fitted): the seconds. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.app_process import ROOT

LOADERS = {"library default": "transformers", "app (no word cache)": "app"}
DOCUMENT_CHARS = 2_000_000
PASSAGE_CHARS = 4_000


def _malloc_in_use_mib() -> float:
    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                          "fsmblks", "uordblks", "fordblks", "keepcost")]

    mallinfo = ctypes.CDLL("libc.so.6").mallinfo2
    mallinfo.restype = MallInfo2
    info = mallinfo()
    return (info.uordblks + info.hblkhd) / 2**20


def tokenizer_folder(folder: Path) -> Path:
    """ERNIE's tokenizer file set with the model files the app's model check reads (no weights)."""
    from tests.tiny_model import REAL_FILES, build_sentencepiece

    build_sentencepiece(folder)
    for name in ("config.json", "generation_config.json"):
        shutil.copy(REAL_FILES / name, folder / name)
    return folder


def _load(folder: str, how: str) -> Any:
    if how == "app":  # as the app loads it
        from app.model_source import ModelFiles
        from app.settings import ModelSettings

        files = ModelFiles(ModelSettings(model=folder))
        files.provide(lambda *args, **kwargs: None)
        files.wait_loaded()
        return files.tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def measure(folder: str, how: str, messages: int) -> dict[str, float]:
    """In this process: the tokenizer loaded ``how`` ("app" or "transformers"), then the counts above."""
    from app.token_count import count_with

    backend = _load(folder, how).backend_tokenizer
    rng = random.Random(7)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(5000)]
    texts = [" ".join(rng.choices(words, k=30))[:250] for _ in range(messages)]
    count_with(backend, texts[:10])  # the first call's own allocations are not the cache
    before, started = _malloc_in_use_mib(), time.perf_counter()
    for start in range(0, len(texts), 10):
        count_with(backend, texts[start:start + 10])
    row = {"grew_mib": _malloc_in_use_mib() - before, "messages_s": time.perf_counter() - started}
    document = " ".join(rng.choices(words, k=DOCUMENT_CHARS // 6))[:DOCUMENT_CHARS]
    started = time.perf_counter()
    count_with(backend, [document[i:i + PASSAGE_CHARS] for i in range(0, len(document), PASSAGE_CHARS)])
    row["document_s"] = time.perf_counter() - started
    return row


def measured_in_a_fresh_process(folder: Path, how: str, messages: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", "bench.tokenizer_cache", "--one", str(folder), how,
                           "--messages", str(messages)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the {how} measurement failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--one", nargs=2, metavar=("FOLDER", "HOW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], args.messages)))
        return 0
    folder = tokenizer_folder(Path(tempfile.mkdtemp(prefix="tokenizer-cache-")))
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in LOADERS}
    for round_ in range(args.rounds):
        for name in (LOADERS if round_ % 2 == 0 else reversed(list(LOADERS))):
            rows[name].append(measured_in_a_fresh_process(folder, LOADERS[name], args.messages))
    cores = len(os.sched_getaffinity(0))
    print(f"\n{args.messages:,} messages of ~250 characters, 10 a call; a {DOCUMENT_CHARS:,}-character document; "
          f"{cores} cores; {args.rounds} rounds, medians (all runs)")
    print("| tokenizer | heap growth, messages (MiB) | messages (s) | document (s) |\n|---|---|---|---|")
    for name, runs in rows.items():
        cells = [" / ".join(f"{run[key]:.{digits}f}" for run in runs) for key, digits in
                 (("grew_mib", 1), ("messages_s", 2), ("document_s", 2))]
        medians = [statistics.median(run[key] for run in runs) for key in ("grew_mib", "messages_s", "document_s")]
        print(f"| {name} | **{medians[0]:.1f}** ({cells[0]}) | **{medians[1]:.2f}** ({cells[1]}) | "
              f"**{medians[2]:.2f}** ({cells[2]}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
