"""verl's platform interface for the host CPU, used only inside a rehearsal.

verl 0.9 resolves every device question (device name, collective back-end, Ray resource, the
``torch.<device>`` module) through ``verl.plugin.platform.get_platform()``; it ships CUDA, NPU and
ROCm platforms and falls back to CUDA when none is detected. This one answers for a CPU-only
process: device ``cpu``, back-end ``gloo``, and Ray resource ``GPU`` so that verl's resource-pool
check (which counts only GPU/NPU) and its placement bundles line up with the logical GPUs the
rehearsal starts Ray with. torch's CPU build ignores the ``CUDA_VISIBLE_DEVICES`` Ray sets.

Imported by :mod:`verl_ascend.rehearse.loop.runtime` once ``verl.plugin.platform`` is loaded; it
imports torch and verl, so never at interpreter start.
"""

import contextlib
import os
import types

import torch
from verl.plugin.platform.platform_base import PlatformBase

NAME = "cpu"


def _meminfo() -> dict:
    """/proc/meminfo in bytes (empty where there is no /proc)."""
    values = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts:
                    values[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return values


def _rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _Event:
    """A host event: work on the CPU is synchronous, so recording is taking the time."""

    def __init__(self, enable_timing=False, **_):
        self._t = None

    def record(self, stream=None):
        import time

        self._t = time.perf_counter()

    def query(self):
        return True

    def synchronize(self):
        return None

    def wait(self, stream=None):
        return None

    def elapsed_time(self, end):
        return (end._t - self._t) * 1000.0


def _device_module() -> types.ModuleType:
    """The ``torch.<device>`` stand-in verl calls (``empty_cache``, ``synchronize``, memory stats, RNG,
    streams, events): ``torch.cpu`` where it has the function, host answers where it has not."""
    mod = types.ModuleType("verl_ascend_cpu_device")
    cpu = torch.cpu
    none = lambda *a, **k: None  # noqa: E731 - no device cache, no device to select

    def mem_get_info(device=None):
        info = _meminfo()
        return info.get("MemAvailable", 0), info.get("MemTotal", 0)

    def rng_state(device=None):
        return torch.get_rng_state()

    def set_rng_state(state, device=None):
        torch.set_rng_state(state)

    funcs = dict(
        is_available=lambda: True, device_count=lambda: 1, current_device=lambda: NAME,
        set_device=none, synchronize=none, empty_cache=none, ipc_collect=none,
        set_per_process_memory_fraction=none, reset_peak_memory_stats=none, reset_max_memory_allocated=none,
        memory_allocated=lambda device=None: _rss(), memory_reserved=lambda device=None: _rss(),
        max_memory_allocated=lambda device=None: _rss(), max_memory_reserved=lambda device=None: _rss(),
        memory_stats=lambda device=None: {}, mem_get_info=mem_get_info,
        get_rng_state=rng_state, set_rng_state=set_rng_state,
        manual_seed=torch.manual_seed, manual_seed_all=torch.manual_seed, seed=torch.seed,
        get_device_name=lambda device=None: "cpu", Event=_Event,
        Stream=getattr(cpu, "Stream", None), current_stream=cpu.current_stream, stream=cpu.stream,
        is_initialized=lambda: True, init=none,
    )
    for name, func in funcs.items():
        setattr(mod, name, func)
    mod.__getattr__ = lambda name: getattr(cpu, name)  # anything else torch.cpu has
    return mod


class PlatformCPU(PlatformBase):
    """The host CPU as a verl platform (rehearsal only)."""

    _module = None

    @property
    def device_name(self) -> str:
        return NAME

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self):
        if PlatformCPU._module is None:
            PlatformCPU._module = _device_module()
        return PlatformCPU._module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        # Never picked by auto-detection: a rehearsal names it, a real job never gets it.
        return False

    def current_device(self):
        # verl feeds this to .to() and torch.device(); torch.device(0) needs an accelerator.
        return NAME

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index) -> None:
        return None

    def synchronize(self, device_index=None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None
