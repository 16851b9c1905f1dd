"""NVML facts as the planner gets them: CUDA_VISIBLE_DEVICES, --assume-gpu."""
import pytest

from app.errors import SettingsError
from app.hardware import GIB, GpuInfo, parse_assumed_gpu, select_visible


def card(name, cc, total_gib, index=0, uuid=""):
    major, minor = (int(x) for x in cc.split("."))
    return GpuInfo(index=index, name=name, compute_capability=(major, minor), total_bytes=int(total_gib * GIB),
                   free_bytes=int(total_gib * 0.97 * GIB), uuid=uuid)


def test_cuda_visible_devices_is_honoured():
    gpus = [card("A", "8.0", 80, index=0, uuid="GPU-a"), card("B", "8.6", 24, index=1, uuid="GPU-b"),
            card("C", "8.9", 24, index=2, uuid="GPU-c")]
    assert [g.name for g in select_visible(gpus, {"CUDA_VISIBLE_DEVICES": "2,0"})] == ["C", "A"]
    assert [g.index for g in select_visible(gpus, {"CUDA_VISIBLE_DEVICES": "2,0"})] == [0, 1]
    assert [g.name for g in select_visible(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-b"})] == ["B"]
    assert select_visible(gpus, {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert [g.name for g in select_visible(gpus, {"CUDA_VISIBLE_DEVICES": "1,7,0"})] == ["B"]
    assert len(select_visible(gpus, {})) == 3


def test_assume_gpu_parsing():
    gpu = parse_assumed_gpu("NVIDIA A10,8.6,24")
    assert gpu.sm == 86 and gpu.total_bytes == 24 * GIB
    assert parse_assumed_gpu("NVIDIA A10,8.6,24,2.5").free_bytes == int(2.5 * GIB)
    with pytest.raises(SettingsError, match="NAME,CC,MEM_GIB"):
        parse_assumed_gpu("A10")
    with pytest.raises(SettingsError, match="FREE_GIB must be in"):
        parse_assumed_gpu("NVIDIA A10,8.6,24,30")
