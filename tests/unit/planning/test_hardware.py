"""NVML facts as the planner gets them: CUDA_VISIBLE_DEVICES, --assume-gpu."""
import pytest

from app.errors import SettingsError
from app.planning.hardware import GIB, GpuInfo, parse_assumed_gpu, select_visible


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


def fake_torch(root, version_py: str):
    """A torch package whose import fails: reading its CUDA version must not import it."""
    package = root / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('torch was imported')\n")
    (package / "version.py").write_text(version_py)
    return root


def test_a_cuda_builds_torch_cuda_version_is_read_without_importing_torch(tmp_path, monkeypatch):
    """The launcher plans before the web server listens; importing torch there cost 2 s on the H200 host."""
    import importlib.metadata
    import sys

    from app.planning.hardware import detect_vllm_build

    fake_torch(tmp_path, "__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\nhip = None\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])

    def version(dist):
        if dist == "vllm":
            return "0.26.0"
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)
    # Another test may have built a model with the real torch; here it is not loaded (restored afterwards)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    build = detect_vllm_build()
    assert (build.device, build.version, build.torch_cuda) == ("cuda", "0.26.0", "13.0")
    assert "torch" not in sys.modules  # importing the fake would have raised


@pytest.mark.parametrize(("version_py", "expected"), [
    ("cuda: Optional[str] = '12.8'\n", "12.8"),
    ("__version__ = '2.5.1+cu121'\ncuda = '12.1'\n", "12.1"),
    ("\ufeffcuda = '12.4'\n", "12.4"),  # a BOM
    ("cuda = None\n", None),
    ("cuda: Optional[str] = None\n", None),
    ("this is not python(\n", None),
    ("", None),
])
def test_torch_cuda_version_reads_the_version_file(tmp_path, version_py, expected):
    from app.planning.hardware import torch_cuda_version

    assert torch_cuda_version([str(fake_torch(tmp_path, version_py))]) == expected


def test_no_torch_reads_as_none(tmp_path):
    from app.planning.hardware import torch_cuda_version

    assert torch_cuda_version([str(tmp_path / "nowhere")]) is None
