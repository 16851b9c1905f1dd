"""The card -> engine-arguments rules on simulated cards, as NVML would report them."""
import json
from types import SimpleNamespace

import pytest

from app.errors import InsufficientMemoryError, SettingsError, UnsupportedHardwareError
from app.planning.engine_plan import ModelShape
from app.planning.hardware import GIB, GpuInfo, VllmBuild
from app.planning.profiles import (
    ENGINE_OVERRIDES,
    CpuFacts,
    decode_graph_batch,
    plan_engine,
    reserve_bytes,
    with_smaller_kv,
)
from app.planning.tutorial_lines import CHATS12_AFTER_FIX, CHATS12_RUN, MEASURED, TUTORIAL_LINES
from app.settings import EngineSettings
from tests.conftest import ROOT

CUDA13 = VllmBuild(installed=True, version="0.29.0", device="cuda", torch_cuda="13.0")
CUDA12 = VllmBuild(installed=True, version="0.29.0+cu129", device="cuda", torch_cuda="12.9")
CPU_BUILD = VllmBuild(installed=True, version="0.29.0", device="cpu")
ERNIE = ModelShape()


def card(name, cc, total_gib, free_gib=None, index=0, uuid=""):
    major, minor = (int(x) for x in cc.split("."))
    total = int(total_gib * GIB)
    free = int((free_gib if free_gib is not None else total_gib * 0.97) * GIB)
    return GpuInfo(index=index, name=name, compute_capability=(major, minor), total_bytes=total,
                   free_bytes=free, uuid=uuid)


# name, cc, total GiB (NVML), free GiB, expected dtype, expected max_model_len
CARDS = [
    ("Tesla T4", "7.5", 15.0, 14.6, "float16", 32768),
    ("NVIDIA GeForce RTX 2080 Ti", "7.5", 11.0, 10.2, "float16", 32768),
    ("NVIDIA A100-SXM4-40GB", "8.0", 40.0, 39.4, "bfloat16", 32768),
    ("NVIDIA A100-SXM4-80GB", "8.0", 80.0, 79.2, "bfloat16", 32768),
    ("NVIDIA A30", "8.0", 24.0, 23.5, "bfloat16", 32768),
    ("NVIDIA A10", "8.6", 22.5, 22.1, "bfloat16", 32768),
    ("NVIDIA GeForce RTX 3060", "8.6", 12.0, 11.0, "bfloat16", 32768),
    ("NVIDIA A40", "8.6", 45.0, 44.3, "bfloat16", 32768),
    ("NVIDIA L4", "8.9", 22.5, 22.0, "bfloat16", 32768),
    ("NVIDIA GeForce RTX 4090", "8.9", 24.0, 20.5, "bfloat16", 32768),
    ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9", 8.0, 6.9, "bfloat16", 32768),
    ("NVIDIA L40S", "8.9", 45.0, 44.4, "bfloat16", 32768),
    ("NVIDIA H100 80GB HBM3", "9.0", 79.6, 79.1, "bfloat16", 32768),
    ("NVIDIA H200", "9.0", 140.4, 139.8, "bfloat16", 32768),
    ("NVIDIA H20", "9.0", 95.6, 95.0, "bfloat16", 32768),
    ("NVIDIA GH200 480GB", "9.0", 95.0, 94.5, "bfloat16", 32768),
    ("NVIDIA B200", "10.0", 179.0, 178.0, "bfloat16", 32768),
    ("NVIDIA GeForce RTX 5090", "12.0", 31.8, 30.0, "bfloat16", 32768),
    ("NVIDIA GeForce RTX 3050 (shared)", "8.6", 8.0, 2.4, "bfloat16", 16384),
    ("NVIDIA T4 (busy)", "7.5", 15.0, 2.5, "float16", 8192),
]


@pytest.mark.parametrize("name, cc, total, free, dtype, context", CARDS, ids=[c[0] for c in CARDS])
def test_auto_plan_per_card(name, cc, total, free, dtype, context):
    gpu = card(name, cc, total, free)
    plan = plan_engine(EngineSettings(), [gpu], CUDA13, ERNIE)
    args = plan.engine_args
    assert args["dtype"] == dtype
    assert args["enforce_eager"] is False, "CUDA graphs stay on: the model is dense"
    assert args["kv_cache_dtype"] == "auto"
    assert args["max_num_seqs"] == 16, "16 chats: a batch size vLLM captures a full CUDA graph for"
    assert args["max_model_len"] == context
    # The KV cache is what chats need, never a share of the card...
    assert args["kv_cache_memory_bytes"] >= context * ERNIE.kv_bytes_per_token()
    assert args["kv_cache_memory_bytes"] <= 1.25 * GIB
    # ...the whole plan fits the FREE memory with room left for others...
    assert plan.planned_bytes <= gpu.free_bytes - reserve_bytes(gpu)
    # ...and vLLM's start check (free >= utilization * total) passes.
    assert args["gpu_memory_utilization"] * gpu.total_bytes <= gpu.free_bytes
    assert args["gpu_memory_utilization"] < 0.85
    for key in ("dtype", "enforce_eager", "kv_cache_memory_bytes", "max_model_len", "max_num_seqs",
                "gpu_memory_utilization", "attention_backend"):
        assert plan.reasons[key], key


def test_h200_auto_stays_under_5_gib():
    plan = plan_engine(EngineSettings(), [card("NVIDIA H200", "9.0", 140.4, 139.8)], CUDA13, ERNIE)
    assert plan.planned_bytes < 5 * GIB


def test_v100_refused_on_cuda13_with_the_fix():
    with pytest.raises(UnsupportedHardwareError) as info:
        plan_engine(EngineSettings(), [card("Tesla V100-SXM2-16GB", "7.0", 16)], CUDA13, ERNIE)
    msg = str(info.value)
    assert "sm_70" in msg and "CUDA 13.0" in msg and "cu129" in msg and "pip install" in msg


def test_v100_runs_fp16_on_a_cuda12_build():
    plan = plan_engine(EngineSettings(), [card("Tesla V100-SXM2-32GB", "7.0", 32)], CUDA12, ERNIE)
    assert plan.engine_args["dtype"] == "float16"
    assert plan.engine_args["enforce_eager"] is False
    assert any("sm75" in w for w in plan.warnings)


def test_pre_volta_refused():
    with pytest.raises(UnsupportedHardwareError, match="older than Volta"):
        plan_engine(EngineSettings(), [card("NVIDIA GeForce GTX 1080", "6.1", 8)], CUDA13, ERNIE)


def test_bf16_asked_on_turing_is_refused_with_the_allowed_values():
    with pytest.raises(SettingsError, match="--dtype = 'bfloat16'.*float16"):
        plan_engine(EngineSettings(dtype="bfloat16"), [card("Tesla T4", "7.5", 15)], CUDA13, ERNIE)


def test_fp8_kv_only_where_supported_and_asked():
    l4 = plan_engine(EngineSettings(kv_cache_dtype="fp8"), [card("NVIDIA L4", "8.9", 22.5)], CUDA13, ERNIE)
    assert l4.engine_args["kv_cache_dtype"] == "fp8"
    a10 = plan_engine(EngineSettings(kv_cache_dtype="fp8"), [card("NVIDIA A10", "8.6", 22.5)], CUDA13, ERNIE)
    assert a10.engine_args["kv_cache_dtype"] == "auto"
    assert any("fp8" in w and "sm86" in w for w in a10.warnings)


def test_too_little_free_memory_is_one_clear_line():
    with pytest.raises(InsufficientMemoryError) as info:
        plan_engine(EngineSettings(), [card("NVIDIA A10", "8.6", 22.5, free_gib=1.0)], CUDA13, ERNIE)
    assert "1.00 GiB free" in str(info.value) and "nvidia-smi" in str(info.value)


def test_user_overrides_win_and_are_checked():
    gpu = card("NVIDIA A10", "8.6", 22.5)
    plan = plan_engine(EngineSettings(max_model_len=8192, enforce_eager=True, max_num_seqs=4), [gpu], CUDA13, ERNIE)
    assert plan.engine_args["max_model_len"] == 8192 and plan.engine_args["enforce_eager"] is True
    assert plan.engine_args["max_num_seqs"] == 4
    assert plan.reasons["max_model_len"] == "set by you"
    with pytest.raises(InsufficientMemoryError, match="kv-cache-memory-bytes"):
        plan_engine(EngineSettings(kv_cache_memory_bytes=40 * GIB), [gpu], CUDA13, ERNIE)


def test_more_chats_get_more_kv():
    gpu = card("NVIDIA H200", "9.0", 140.4)
    small = plan_engine(EngineSettings(max_concurrent_chats=12), [gpu], CUDA13, ERNIE)
    big = plan_engine(EngineSettings(max_concurrent_chats=64), [gpu], CUDA13, ERNIE)
    assert big.engine_args["kv_cache_memory_bytes"] > small.engine_args["kv_cache_memory_bytes"]
    assert big.engine_args["max_num_seqs"] == 64


def test_multi_gpu_host_picks_the_card_with_most_free_memory():
    gpus = [card("NVIDIA A100-SXM4-80GB", "8.0", 80, 5, index=0, uuid="GPU-aaa"),
            card("NVIDIA A100-SXM4-80GB", "8.0", 80, 70, index=1, uuid="GPU-bbb")]
    plan = plan_engine(EngineSettings(), gpus, CUDA13, ERNIE)
    assert plan.gpu.index == 1
    assert plan.env == {"CUDA_VISIBLE_DEVICES": "GPU-bbb"}
    assert "tensor parallelism" in plan.reasons["gpu"]


def test_no_gpu_uses_the_cpu_build_or_says_what_to_install():
    plan = plan_engine(EngineSettings(), [], CPU_BUILD, ERNIE, CpuFacts(has_bf16=True, available_bytes=16 * GIB))
    assert plan.device == "cpu" and plan.engine_args["dtype"] == "bfloat16"
    assert plan.engine_args["enforce_eager"] is True
    # The model runs in vLLM's engine process: no third process importing torch and vLLM again; its math
    # threads leave one core to the scheduler and the app, as vLLM's own CPU layout does.
    assert plan.engine_args["distributed_executor_backend"] == "uni"
    assert plan.env_defaults["OMP_NUM_THREADS"] == "3"  # CpuFacts' 4 cores
    one_core = plan_engine(EngineSettings(), [], CPU_BUILD, ERNIE, CpuFacts(available_bytes=16 * GIB, cores=1))
    assert one_core.env_defaults["OMP_NUM_THREADS"] == "1"
    # The CPU worker's oneDNN kernel cache is bounded (it grew the worker +9% in a 20-min soak), but a
    # value the user set wins: it is a default, not an override.
    assert int(plan.env_defaults["ONEDNN_PRIMITIVE_CACHE_CAPACITY"]) < 1024
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in plan.env and plan.reasons["ONEDNN_PRIMITIVE_CACHE_CAPACITY"]
    with pytest.raises(UnsupportedHardwareError, match="requirements-cpu.txt"):
        plan_engine(EngineSettings(), [], CUDA13, ERNIE)


@pytest.mark.parametrize("profile", sorted(TUTORIAL_LINES))
def test_every_tutorial_warning_cites_a_run_of_that_very_line(profile):
    plan = plan_engine(EngineSettings(profile=profile), [card("NVIDIA H200", "9.0", 140.4)], CUDA13, ERNIE)
    assert plan.engine_args == TUTORIAL_LINES[profile]
    seen = MEASURED[profile]
    assert plan.warnings
    for warning in plan.warnings:
        # the run, its figures, and either "this exact line" or how the line that ran differed
        assert warning.endswith(f"({seen.source()})") or (  # the 12-chat figures after auto's graph fix
            profile in CHATS12_AFTER_FIX and warning.endswith(f"({CHATS12_RUN})")), warning
        assert (seen.decode_tps and seen.decode_tps in warning) or f"{seen.gpu_gib:.1f} GiB" in warning, warning
    args = TUTORIAL_LINES[profile]
    assert any(w.startswith("gpu_memory_utilization") for w in plan.warnings)
    if seen.decode_tps:
        assert any(w.startswith("enforce_eager") for w in plan.warnings) == bool(args.get("enforce_eager"))
        assert any(w.startswith("quantization=fp8") for w in plan.warnings) == (args.get("quantization") == "fp8")


def test_tutorial_lines_warn_about_the_card_they_cannot_run_on():
    t4 = plan_engine(EngineSettings(profile="tutorial-a10"), [card("Tesla T4", "7.5", 15)], CUDA13, ERNIE)
    assert any("dtype=bfloat16 on sm75" in w and "refuses" in w for w in t4.warnings)
    v100 = plan_engine(EngineSettings(profile="tutorial-v100"), [card("Tesla V100", "7.0", 16)], CUDA13, ERNIE)
    assert any("sm_70" in w and "cu129" in w for w in v100.warnings)
    assert not any(w.startswith("dtype=") for w in v100.warnings), "the tutorial's V100 line is float16"
    a100 = plan_engine(EngineSettings(profile="tutorial-a100"), [card("NVIDIA A100", "8.0", 40)], CUDA13, ERNIE)
    assert any("fp8 on sm80" in w for w in a100.warnings)


def test_flags_you_type_win_over_a_tutorial_line_and_are_named():
    plan = plan_engine(EngineSettings(profile="tutorial-a100", max_model_len=2048),
                       [card("NVIDIA H200", "9.0", 140.4)], CUDA13, ERNIE)
    assert plan.engine_args["max_model_len"] == 2048 and plan.reasons["max_model_len"] == "set by you"
    assert plan.user_set == {"max_model_len"}
    assert plan.engine_args["quantization"] == "fp8"


def test_what_you_set_is_data_not_a_reason_text():
    assert set(ENGINE_OVERRIDES) == {"max_model_len", "dtype", "gpu_memory_utilization", "kv_cache_memory_bytes",
                                     "enforce_eager", "kv_cache_dtype", "max_num_seqs"}
    gpu = card("NVIDIA A10", "8.6", 22.5)
    assert plan_engine(EngineSettings(), [gpu], CUDA13, ERNIE).user_set == frozenset()
    mine = plan_engine(EngineSettings(enforce_eager=False, kv_cache_dtype="auto"), [gpu], CUDA13, ERNIE)
    assert mine.user_set == {"enforce_eager", "kv_cache_dtype"}
    assert mine.reasons["enforce_eager"] == "set by you"


def test_smaller_kv_retry_halves_the_budget():
    plan = plan_engine(EngineSettings(), [card("NVIDIA A10", "8.6", 22.5)], CUDA13, ERNIE)
    smaller = with_smaller_kv(plan)
    assert smaller.engine_args["kv_cache_memory_bytes"] == plan.engine_args["kv_cache_memory_bytes"] // 2
    kv_needed = smaller.engine_args["max_model_len"] * ERNIE.kv_bytes_per_token()
    assert kv_needed <= smaller.engine_args["kv_cache_memory_bytes"]


def test_smaller_kv_retry_also_asks_vllm_for_a_smaller_share_of_the_card():
    """vLLM refuses to start unless free >= utilization x total: a retry after "less than desired GPU
    memory utilization" must ask for less, or it is refused again (seen on an H200)."""
    h200 = card("NVIDIA H200", "9.0", 139.8)
    plan = plan_engine(EngineSettings(kv_cache_memory_bytes=100 * GIB), [h200], CUDA13, ERNIE)
    smaller = with_smaller_kv(plan)
    old_share, new_share = plan.engine_args["gpu_memory_utilization"], smaller.engine_args["gpu_memory_utilization"]
    assert new_share * h200.total_bytes >= smaller.planned_bytes  # still covers the plan
    assert new_share < old_share - 0.3  # ~50 GiB less of a 140 GiB card
    mine = plan_engine(EngineSettings(kv_cache_memory_bytes=40 * GIB, gpu_memory_utilization=0.5), [h200],
                       CUDA13, ERNIE)
    assert with_smaller_kv(mine).engine_args["gpu_memory_utilization"] == 0.5  # the user's own share stays


def test_model_shape_from_the_real_config():
    config = json.loads((ROOT / "tests/data/ernie-4.5-0.3b/config.json").read_text())
    shape = ModelShape.from_config(config)
    assert shape.kv_bytes_per_token() == 18432
    assert abs(shape.num_params - 360.7e6) < 1e6


def test_remote_plan_needs_no_card_and_takes_the_context_from_the_server():
    from app.planning.profiles import plan_remote

    plan = plan_remote(EngineSettings(_env_file=None, max_concurrent_chats=4), "http://gpu-box:8000/v1")
    assert (plan.device, plan.gpu, plan.profile) == ("remote", None, "remote")
    assert plan.engine_args == {"remote_url": "http://gpu-box:8000/v1"}  # no vLLM argument: none starts here
    assert plan.max_concurrent == 4 and "server batches them" in plan.reasons["max_concurrent"]
    assert "server's" in plan.reasons["max_model_len"]
    capped = plan_remote(EngineSettings(_env_file=None, max_model_len=1024), "http://gpu-box:8000/v1")
    assert capped.engine_args["max_model_len"] == 1024 and capped.reasons["max_model_len"].startswith("set by you")


def test_status_panel_names_the_remote_server_instead_of_a_card():
    from types import SimpleNamespace

    from app.engine.status import EngineStatus
    from app.planning.profiles import plan_remote
    from app.ui.status_panel import status_markdown

    plan = plan_remote(EngineSettings(_env_file=None), "http://gpu-box:8000/v1")
    plan.engine_args["max_model_len"] = 2048  # as the server said
    runtime = SimpleNamespace(host=SimpleNamespace(status=EngineStatus(), plan=plan), plan=plan, gpu=None,
                              gpu_memory=None, max_model_len=2048, history=None,
                              settings=SimpleNamespace(model=SimpleNamespace(model="/models/SmolLM2-135M-Instruct")))
    assert "**Remote vLLM server:** http://gpu-box:8000/v1" in status_markdown(runtime, "en-US")
    # the model it serves, by name and folder, in both languages
    assert "**Model:** SmolLM2-135M-Instruct (/models/SmolLM2-135M-Instruct)" in status_markdown(runtime, "en-US")
    assert "**模型:** SmolLM2-135M-Instruct (/models/SmolLM2-135M-Instruct)" in status_markdown(runtime, "zh-CN")
    assert "**远程 vLLM 服务:** http://gpu-box:8000/v1" in status_markdown(runtime, "zh-CN")


# ----- the starting engine (--quick-start, issue 13 item 1) ---------------------------------------------------
def test_gpu_plan_starts_an_eager_twin_first_when_both_fit():
    plan = plan_engine(EngineSettings(), [card("NVIDIA H200", "9.0", 140.4, 139.8)], CUDA13, ERNIE)
    starter = plan.starter
    assert starter is not None and starter.starter is None
    assert starter.engine_args["enforce_eager"] is True and plan.engine_args["enforce_eager"] is False
    same = ("max_model_len", "kv_cache_memory_bytes", "max_num_seqs", "dtype")
    assert all(starter.engine_args[k] == plan.engine_args[k] for k in same)
    # No graphs to hold: the starting engine plans less memory, and asks vLLM's start-up check for just that.
    assert starter.planned_bytes < plan.planned_bytes
    assert starter.engine_args["gpu_memory_utilization"] <= plan.engine_args["gpu_memory_utilization"]
    assert plan.reasons["quick_start"].startswith("on (auto)")
    assert json.loads(json.dumps(plan.to_dict()))["starter"]["engine_args"]["enforce_eager"] is True
    # vLLM's eager level: no FlashInfer autotune for an engine that lives for seconds; said with its reason
    assert starter.engine_args["optimization_level"] == 0 and "optimization_level" not in plan.engine_args
    differences = json.loads(json.dumps(plan.to_dict()))["starter"]["reasons"]
    assert {"enforce_eager", "optimization_level"} <= set(differences) and "dtype" not in differences
    assert differences["optimization_level"].startswith("0: an engine that lives for seconds")
    # PyTorch's sampler in the starting engine's core only: FlashInfer's is built on a first launch (issue 31)
    assert starter.core_env == {"VLLM_USE_FLASHINFER_SAMPLER": "0"} and plan.core_env == {}
    assert differences["VLLM_USE_FLASHINFER_SAMPLER"].startswith("0: the starting engine samples with PyTorch")


@pytest.mark.parametrize("settings, gpu, why", [
    (EngineSettings(quick_start="off"), card("NVIDIA H200", "9.0", 140.4), "off: set by you"),
    (EngineSettings(enforce_eager=True), card("NVIDIA H200", "9.0", 140.4), "off: the engine is eager already"),
    (EngineSettings(gpu_memory_utilization=0.5), card("NVIDIA H200", "9.0", 140.4), "off: with --gpu-memory"),
    # A crowded card: the full engine takes what is usable, a second one does not fit beside it.
    (EngineSettings(), card("NVIDIA T4 (busy)", "7.5", 15.0, 2.5), "off: the starting and the full engine"),
])
def test_gpu_plan_starts_the_full_engine_alone_and_says_why(settings, gpu, why):
    plan = plan_engine(settings, [gpu], CUDA13, ERNIE)
    assert plan.starter is None
    assert plan.reasons["quick_start"].startswith(why)


def test_cpu_plan_has_no_starting_engine_unless_asked():
    plan = plan_engine(EngineSettings(), [], CPU_BUILD, ERNIE, CpuFacts(available_bytes=16 * GIB))
    assert plan.starter is None and plan.reasons["quick_start"].startswith("off: the CPU engine is eager")
    asked = plan_engine(EngineSettings(quick_start="on"), [], CPU_BUILD, ERNIE, CpuFacts(available_bytes=16 * GIB))
    assert asked.starter is not None and asked.starter.engine_args["enforce_eager"] is True
    with pytest.raises(InsufficientMemoryError, match="--quick-start off"):
        plan_engine(EngineSettings(quick_start="on"), [], CPU_BUILD, ERNIE, CpuFacts(available_bytes=8 * GIB))


@pytest.mark.parametrize("chats, seqs", [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (9, 16), (12, 16), (16, 16),
                                         (17, 24), (64, 64), (250, 256), (256, 256), (257, 272)])
def test_chats_round_up_to_a_batch_size_vllm_captures_a_full_cuda_graph_for(chats, seqs):
    """vLLM 0.26-0.29 captures decode graphs for 1, 2, 4, 8, 16, 24, ... (steps of 16 past 256), but full ones only
    up to max_num_seqs: at 12, 12 chats fell back to piecewise graphs at half the speed (H200, docs/benchmarks.md)."""
    assert decode_graph_batch(chats) == seqs
    if chats > 256:  # more than --max-concurrent-chats allows
        return
    gpu = card("NVIDIA H200", "9.0", 140.4, 139.8)
    plan = plan_engine(EngineSettings(max_concurrent_chats=chats), [gpu], CUDA13, ERNIE)
    assert plan.engine_args["max_num_seqs"] == seqs
    if seqs != chats:
        assert plan.reasons["max_num_seqs"].startswith(f"{seqs}: max_concurrent ({chats}) rounded up")


def test_without_cuda_graphs_max_num_seqs_is_the_number_of_chats():
    gpu = card("NVIDIA H200", "9.0", 140.4, 139.8)
    eager = plan_engine(EngineSettings(max_concurrent_chats=12, enforce_eager=True), [gpu], CUDA13, ERNIE)
    cpu = plan_engine(EngineSettings(max_concurrent_chats=12), [], VllmBuild(True, "0.29.0", "cpu"), ERNIE)
    mine = plan_engine(EngineSettings(max_concurrent_chats=12, max_num_seqs=12), [gpu], CUDA13, ERNIE)
    assert eager.engine_args["max_num_seqs"] == cpu.engine_args["max_num_seqs"] == 12
    assert mine.engine_args["max_num_seqs"] == 12 and mine.reasons["max_num_seqs"] == "set by you"


@pytest.mark.parametrize("where", ["graphs", "eager", "cpu", "tutorial", "remote"])
def test_answers_at_once_are_one_number_in_the_plan_with_its_reason(where):
    """plan.max_concurrent is what the fair queue lets through, what the warm-up batches up to and what vLLM's
    max_num_seqs is sized from (app/engine/host.py reads it from the plan, not from the settings)."""
    from app.planning.profiles import plan_remote

    gpu = card("NVIDIA H100 80GB HBM3", "9.0", 80.0)
    settings = EngineSettings(_env_file=None, max_concurrent_chats=12, enforce_eager=where == "eager",
                              profile="tutorial-a100" if where == "tutorial" else "auto")
    plan = (plan_remote(settings, "http://gpu-box:8000/v1") if where == "remote" else
            plan_engine(settings, [] if where == "cpu" else [gpu], CPU_BUILD if where == "cpu" else CUDA13, ERNIE))
    assert plan.max_concurrent == 12 and plan.to_dict()["max_concurrent"] == 12
    assert plan.reasons["max_concurrent"].startswith("12 (--max-concurrent-chats")
    if where in ("graphs", "eager", "cpu"):
        assert plan.engine_args["max_num_seqs"] == (16 if where == "graphs" else 12)
        assert "max_concurrent" in plan.reasons["max_num_seqs"]
    if plan.starter is not None:  # the starting engine serves through the same queue
        assert plan.starter.max_concurrent == 12
    assert not any("--max-num-seqs" in line for line in plan.warnings)
    default = plan_engine(EngineSettings(_env_file=None), [gpu], CUDA13, ERNIE)
    assert default.max_concurrent == 16 and "the default" in default.reasons["max_concurrent"]


@pytest.mark.parametrize("profile", ["auto", "cpu", "tutorial-a100"])
def test_a_hand_set_max_num_seqs_below_the_answers_at_once_warns_in_one_line(profile):
    gpus = [] if profile == "cpu" else [card("NVIDIA H100 80GB HBM3", "9.0", 80.0)]
    build = CPU_BUILD if profile == "cpu" else CUDA13
    low = plan_engine(EngineSettings(_env_file=None, profile=profile, max_num_seqs=8), gpus, build, ERNIE)
    assert low.engine_args["max_num_seqs"] == 8 and low.max_concurrent == 16
    warned = [line for line in low.warnings if "--max-num-seqs" in line]
    assert len(warned) == 1 and "\n" not in warned[0]
    assert warned[0].startswith("--max-num-seqs 8 is below --max-concurrent-chats 16")
    for enough in (16, 64):
        plan = plan_engine(EngineSettings(_env_file=None, profile=profile, max_num_seqs=enough), gpus, build, ERNIE)
        assert not any("--max-num-seqs" in line for line in plan.warnings)


def test_print_config_shows_the_answers_at_once_with_its_reason_and_the_warning(capsys):
    from app.launcher import print_plan

    gpu = card("NVIDIA H100 80GB HBM3", "9.0", 80.0)
    print_plan(plan_engine(EngineSettings(_env_file=None, max_num_seqs=8), [gpu], CUDA13, ERNIE), as_json=False)
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("answers at once: 16")
    assert lines[at + 1].startswith("      why: 16 (--max-concurrent-chats, the default): answers generated at once")
    assert [line for line in lines if "--max-num-seqs 8 is below" in line] == [
        next(line for line in lines if line.startswith("warning: --max-num-seqs 8 is below --max-concurrent-chats 16"))]


def test_a_start_prints_the_plans_warnings_too(capsys, monkeypatch):
    """A user who starts with --max-num-seqs 8 sees the warning without asking for --print-config."""
    import app.launcher as launcher
    import app.serve

    for check in ("ensure_safe_exposure", "check_model_setting", "ensure_port_free"):
        monkeypatch.setattr(launcher, check, lambda *args: None)
    monkeypatch.setattr(app.serve, "serve", lambda settings, plan, launched_at: 0)
    gpu = card("NVIDIA H100 80GB HBM3", "9.0", 80.0)
    plan = plan_engine(EngineSettings(_env_file=None, max_num_seqs=8), [gpu], CUDA13, ERNIE)
    settings = SimpleNamespace(server=SimpleNamespace(host="127.0.0.1", port=8000), model=None)
    assert launcher.serve(settings, plan) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if "--max-num-seqs 8 is below" in line] == [
        f"warning: {next(line for line in plan.warnings if '--max-num-seqs' in line)}"]
