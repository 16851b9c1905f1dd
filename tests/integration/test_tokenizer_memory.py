"""The app's tokenizer keeps no per-thread word cache: counting many distinct short messages leaves the process
about as large as before.

The tokenizers library keeps up to 10,000 encoded words in each thread that encodes and never empties them; ERNIE's
tokenizer makes each short message one word (app/token_count.py). Measured by bench/tokenizer_cache.py in a fresh
process each, on ERNIE's tokenizer file set, loaded the way the app loads it (ModelFiles) and, as the baseline in
the same run, the way transformers loads it.

Slow: transformers' import and the SentencePiece conversion take seconds."""
from __future__ import annotations

import pytest

from bench.tokenizer_cache import measured_in_a_fresh_process, tokenizer_folder

pytestmark = pytest.mark.slow


def test_counting_many_distinct_messages_leaves_no_word_cache(tmp_path):
    folder = tokenizer_folder(tmp_path)
    baseline = measured_in_a_fresh_process(folder, "transformers", 30_000)["grew_mib"]
    app = measured_in_a_fresh_process(folder, "app", 30_000)["grew_mib"]
    # The library's cache: ~7 KB a message, 10,000 a thread (72 MiB a thread measured); the app's: none.
    assert baseline > 40, f"the baseline grew only {baseline:.1f} MiB: the library's cache is not what this tests"
    assert app < 8, f"the app's tokenizer grew the process by {app:.1f} MiB (the library's default: {baseline:.1f})"
