"""The NVML fault watch on a fake NVML (no GPU here): Xid events and new uncorrected ECC errors."""
from app.planning.hardware import GpuFaultWatch, GpuInfo


class FakeNvml:
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    nvmlEventTypeXidCriticalError = 8

    class NVMLError(Exception):
        pass

    def __init__(self):
        self.ecc = 0
        self.xids = []

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return "h"

    def nvmlDeviceGetHandleByIndex(self, index):
        return "h"

    def nvmlEventSetCreate(self):
        return "set"

    def nvmlDeviceRegisterEvents(self, handle, kind, events):
        pass

    def nvmlEventSetWait_v2(self, events, timeout_ms):
        if not self.xids:
            raise self.NVMLError("timeout")
        return type("Event", (), {"eventData": self.xids.pop(0)})()

    def nvmlDeviceGetTotalEccErrors(self, handle, kind, counter):
        return self.ecc


def test_quiet_card_reports_nothing_then_xid_then_ecc():
    nvml = FakeNvml()
    nvml.ecc = 3  # old errors before we started do not count
    watch = GpuFaultWatch(GpuInfo(0, "NVIDIA A10", (8, 6), 1, 1, uuid="GPU-x"), nvml=nvml)
    assert watch() is None
    nvml.xids.append(79)
    assert watch() == "GPU Xid 79 on NVIDIA A10"
    assert watch() is None
    nvml.ecc = 4
    assert "uncorrected ECC" in watch()
    assert watch() is None


def test_memory_in_use_matches_nvidia_smi_and_falls_back_to_v1():
    """nvidia-smi's "used" leaves out the driver's reserved memory (NVML v2); old bindings have only v1."""
    from types import SimpleNamespace

    from app.planning.hardware import memory_in_use

    class NewBindings:
        nvmlMemory_v2 = 0x2000028

        @staticmethod
        def nvmlDeviceGetMemoryInfo(handle, version=None):
            if version == NewBindings.nvmlMemory_v2:
                return SimpleNamespace(used=2573 * 2**20, reserved=611 * 2**20)
            return SimpleNamespace(used=3184 * 2**20)

    class OldBindings:
        @staticmethod
        def nvmlDeviceGetMemoryInfo(handle):
            return SimpleNamespace(used=3184 * 2**20)

    assert memory_in_use(NewBindings, object()) == 2573 * 2**20
    assert memory_in_use(OldBindings, object()) == 3184 * 2**20
