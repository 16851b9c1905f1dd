"""`python launch.py --print-config --json` as a user runs it: the plan, the tutorial's lines, the docs' tables."""
import json
import os
import re
import subprocess
import sys

import pytest

from scripts.card_tables import DOCS, marked, tables
from tests.conftest import ROOT

TUTORIAL_TABLE = ROOT / "tests" / "data" / "tutorial-flags.md"
# The card each tutorial line was printed for (its table's first column), as NVML names it.
LINE_CARDS = {"A10": ("tutorial-a10", "NVIDIA A10,8.6,22.5"),
              "A100": ("tutorial-a100", "NVIDIA A100-SXM4-40GB,8.0,40"),
              "V100": ("tutorial-v100", "Tesla V100-SXM2-16GB,7.0,16")}


def print_config(*flags):
    out = subprocess.run([sys.executable, "launch.py", "--print-config", "--json", *flags],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def tutorial_lines():
    """{profile: (card spec, engine args)} read from the tutorial's own table (tests/data/tutorial-flags.md)."""
    text = TUTORIAL_TABLE.read_text()
    common = {}
    for flag in re.search(r"`(--tensor-parallel-size[^`]*)`", text).group(1).split(" --"):
        name, value = flag.strip("-").split()
        common[name.replace("-", "_")] = int(value)
    header, lines = None, {}
    for row in (r for r in text.splitlines() if r.startswith("| ") and not r.startswith("|---")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        if header is None:
            header = [c.lstrip("-").replace("-", "_") for c in cells]
            continue
        profile, spec = LINE_CARDS[cells[0].split()[0]]
        args = dict(common)
        for name, cell in zip(header[1:], cells[1:], strict=True):
            if cell.startswith("(") or cell.startswith("**not"):
                continue  # not on the command line: vLLM's default
            args[name] = (True if cell == "yes" else int(cell) if cell.isdigit() else
                          float(cell) if re.fullmatch(r"\d+\.\d+", cell) else cell)
        lines[profile] = (spec, args)
    # The text's variants: the A100 line with graphs off "everywhere", and the A10 tip.
    spec, a100 = lines["tutorial-a100"]
    lines["tutorial-a100-eager"] = (spec, {**a100, "enforce_eager": True})
    tip = re.search(r"add `(--disable-custom-all-reduce) (--max-num-batched-tokens) (\d+)`", text)
    spec, a10 = lines["tutorial-a10"]
    lines["tutorial-a10-lean"] = (spec, {**a10, "disable_custom_all_reduce": True,
                                         "max_num_batched_tokens": int(tip.group(3))})
    return lines


def test_the_tutorial_table_reads_as_five_lines():
    lines = tutorial_lines()
    assert sorted(lines) == ["tutorial-a10", "tutorial-a10-lean", "tutorial-a100", "tutorial-a100-eager",
                             "tutorial-v100"]
    assert lines["tutorial-a100"][1]["max_model_len"] == 8192 and "enforce_eager" not in lines["tutorial-a100"][1]
    assert lines["tutorial-v100"][1]["dtype"] == "float16"


@pytest.mark.parametrize("profile", sorted(tutorial_lines()))
def test_each_tutorial_profile_is_the_tutorials_line_flag_for_flag(profile):
    spec, expected = tutorial_lines()[profile]
    plan = print_config("--assume-gpu", spec, "--profile", profile)
    assert plan["engine_args"] == expected
    assert plan["profile"] == profile


@pytest.mark.parametrize("spec", ["NVIDIA A10,8.6,24", "Tesla T4,7.5,16", "NVIDIA H200,9.0,141"])
def test_print_config_json_without_loading_a_model(spec):
    data = print_config("--assume-gpu", spec)
    assert set(data) >= {"gpu", "profile", "engine_args", "reasons"}
    assert data["engine_args"]["enforce_eager"] is False
    assert data["engine_args"]["kv_cache_memory_bytes"] < 0.85 * data["gpu"]["total_bytes"] / 10
    assert all(data["reasons"][k] for k in data["engine_args"])
    assert data["set_by_you"] == []


def test_print_config_names_what_you_set():
    data = print_config("--assume-gpu", "NVIDIA A10,8.6,24", "--max-model-len", "8192")
    assert data["set_by_you"] == ["max_model_len"]
    assert data["engine_args"]["max_model_len"] == 8192 and data["reasons"]["max_model_len"] == "set by you"


def test_print_config_v100_says_what_to_install():
    out = subprocess.run([sys.executable, "launch.py", "--print-config", "--assume-gpu", "Tesla V100,7.0,16"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "cu129" in out.stderr and "Traceback" not in out.stderr


def test_the_docs_card_tables_are_what_print_config_says():
    """README.md and docs/profiles.md hold exactly the tables scripts/card_tables.py builds from
    --print-config --json; after a planner change, `python scripts/card_tables.py --write` updates them."""
    for name, table in tables().items():
        stale = f"{DOCS[name]} is stale: run scripts/card_tables.py --write"
        assert marked(name, table) in DOCS[name].read_text(), stale


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_a_reader_that_leaves_early_gets_no_traceback(flags):
    """`python launch.py --print-config | head -1`: the pipe is closed before the plan is written. Without
    PYTHONUNBUFFERED, as in a user's shell: the plan then sits in Python's buffer until it is flushed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen([sys.executable, "launch.py", "--print-config", "--assume-gpu", "NVIDIA A10,8.6,24",
                             *flags], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err.decode()) == (1, "")


def test_print_config_names_the_tokens_answers_end_at(tiny_model_dir):
    """The tiny ERNIE carries ERNIE's template, which closes a turn with <|end_of_sentence|>: named beside eos."""
    data = print_config("--model", str(tiny_model_dir))
    assert [(end["token_id"], end["text"]) for end in data["answer_end_tokens"]] == [
        (4, "<|end_of_sentence|>"), (2, "</s>")]
    text = subprocess.run([sys.executable, "launch.py", "--print-config", "--model", str(tiny_model_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    assert "answers end at: <|end_of_sentence|> (id 4: the chat template ends an assistant turn with it), </s>" in text
    # A hub id not downloaded yet: nothing is fetched to say it.
    assert print_config("--model", "baidu/ERNIE-4.5-0.3B-PT")["answer_end_tokens"] is None
