"""GPU energy, power, SM clock and throttle reasons over the measured window, from NVML.

:class:`NvmlReader` is a :class:`flopsweep.window.WindowReader`. At the window's start it reads the
GPU's energy counter (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver was
loaded) and the enforced power limit (``nvmlDeviceGetEnforcedPowerLimit``, milliwatts), and starts a
:class:`PowerSampler`: a daemon thread that every :data:`SAMPLE_INTERVAL_S` reads the power (the
instantaneous ``NVML_FI_DEV_POWER_INSTANT`` field, milliwatts; ``nvmlDeviceGetPowerUsage``, a
one-second average, where the field is missing: :func:`instant_power_mw`), the SM clock
(``nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)``, MHz) and the clock event (throttle) reasons
(``nvmlDeviceGetCurrentClocksEventReasons``, ``...ThrottleReasons`` before NVML 12.5), keeping
running sums only (memory does not grow with the window). At the stop it reads the counter again;
the counter's difference is ``energy_j``, the trapezoid integral of the sampled power over the same
span is ``energy_sampled_j`` (the check that the counter is right: they should agree within a few
percent on a steady load).

The bindings are NVIDIA's own ``nvidia-ml-py`` (``import pynvml``, the ``gpu`` extra), imported only
when a window starts on a GPU. The rank's torch device is found in NVML by its UUID
(``torch.cuda.get_device_properties(i).uuid``), never by index, since ``CUDA_VISIBLE_DEVICES``
renumbers devices for torch but not for NVML; the PCI bus id is the fall-back.

Nothing here costs a run: a missing library, a CPU device, or a call the GPU does not support leaves
the figures it would give null, and ``energy_reason`` says why in one line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flopsweep.wire import ENERGY_KEYS

SAMPLE_INTERVAL_S = 0.05
"""Seconds between power, clock and throttle samples (20 Hz of the instantaneous power; a sample
costs well under a millisecond of CPU)."""

THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clock_setting"),
)
"""NVML's clock event (throttle) reason bits and their names, in bit order
(``nvmlClocksEventReason*`` / ``nvmlClocksThrottleReason*`` of ``nvml.h``: ``SwPowerCap`` 0x4: the
power cap; ``HwSlowdown`` 0x8; ``SwThermalSlowdown`` 0x20; ``HwThermalSlowdown`` 0x40;
``HwPowerBrakeSlowdown`` 0x80)."""


def throttle_names(mask: int) -> list[str]:
    """The names of the reason bits set in ``mask``, in bit order; an unknown bit as ``bit_0x200``.

    >>> throttle_names(0x4 | 0x40)
    ['sw_power_cap', 'hw_thermal']
    """
    known = [name for bit, name in THROTTLE_REASONS if mask & bit]
    rest = mask & ~sum(bit for bit, _ in THROTTLE_REASONS)
    extra = [f"bit_{1 << i:#x}" for i in range(64) if rest & (1 << i)]
    return known + extra


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One reading of the sampler: ``power_w`` (W) and ``sm_clock_mhz`` (MHz), each None when the
    GPU does not report it; ``reasons`` the throttle bit mask (0 when unknown)."""

    power_w: float | None
    sm_clock_mhz: float | None
    reasons: int = 0


@dataclass(frozen=True, kw_only=True)
class SampleSummary:
    """What :class:`PowerSampler` saw between its start and stop.

    Attributes:
        energy_j: trapezoid integral of the power samples over the span, joules (None without power).
        span_s: seconds from the first to the last sample (the window, on the host's clock).
        power_w_mean: ``energy_j / span_s``, W (None without power or span).
        sm_clock_mhz_mean: mean of the SM clock samples, MHz (None without any).
        reasons: every throttle bit seen (OR of the masks).
        samples: readings taken.
    """

    energy_j: float | None
    span_s: float
    power_w_mean: float | None
    sm_clock_mhz_mean: float | None
    reasons: int
    samples: int


class PowerSampler:
    """Calls ``read`` every ``interval_s`` seconds on a daemon thread, from :meth:`start` (one
    reading there) to :meth:`stop` (one reading there), and keeps running sums only.

    Args:
        read: one reading (:class:`Sample`); an exception from it ends the sampling (the sums so
            far stand; :attr:`problem` says why).
        interval_s: seconds between readings.
        clock: seconds, monotonic (``time.perf_counter``).
    """

    def __init__(
        self,
        read: Callable[[], Sample],
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.read, self.interval_s, self.clock = read, interval_s, clock
        self.problem: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._first_t: float | None = None
        self._last: tuple[float, float | None] | None = None  # (t, power_w) of the last reading
        self._energy, self._powered = 0.0, False
        self._clock_sum, self._clock_n, self._reasons, self._n = 0.0, 0, 0, 0

    def start(self) -> None:
        """Begin anew (a running sampler is stopped first): one reading now, then every interval."""
        self._halt()
        with self._lock:
            self._reset()
            self.problem = None
        self._take()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="flopsweep-power-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> SampleSummary:
        """Stop the thread (joined), take one last reading, and sum up."""
        self._halt()
        self._take()
        with self._lock:
            span = self._last[0] - self._first_t if self._last and self._first_t is not None else 0.0
            energy = self._energy if self._powered else None
            return SampleSummary(
                energy_j=energy,
                span_s=span,
                power_w_mean=energy / span if energy is not None and span > 0 else None,
                sm_clock_mhz_mean=self._clock_sum / self._clock_n if self._clock_n else None,
                reasons=self._reasons,
                samples=self._n,
            )

    def _halt(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10 * self.interval_s + 5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._take():
                return

    def _take(self) -> bool:
        """One reading into the sums; False (and :attr:`problem`) when ``read`` failed."""
        try:
            s = self.read()
        except Exception as exc:  # noqa: BLE001 - a failing sensor must not cost the run
            self.problem = f"sampling stopped: {type(exc).__name__}: {exc}"
            return False
        t = self.clock()
        with self._lock:
            if self._first_t is None:
                self._first_t = t
            if s.power_w is not None and self._last is not None and self._last[1] is not None:
                self._energy += 0.5 * (s.power_w + self._last[1]) * (t - self._last[0])
                self._powered = True
            self._last = (t, s.power_w)
            if s.sm_clock_mhz is not None:
                self._clock_sum += s.sm_clock_mhz
                self._clock_n += 1
            self._reasons |= s.reasons
            self._n += 1
        return True


def _call(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """``(fn(*args), None)``, or ``(None, "nvmlX: NVMLError_NotSupported: Not Supported")``."""
    try:
        return fn(*args), None
    except Exception as exc:  # noqa: BLE001 - an unsupported query leaves its figure null
        return None, f"{getattr(fn, '__name__', 'nvml')}: {type(exc).__name__}: {exc}"


def instant_power_mw(nv: Any, handle: Any) -> float | None:
    """The GPU's instantaneous power in milliwatts (``NVML_FI_DEV_POWER_INSTANT`` through
    ``nvmlDeviceGetFieldValues``), or None where the driver or bindings lack the field.
    ``nvmlDeviceGetPowerUsage`` is the fall-back: on Ampere and newer it is an average over the
    last second, which lags the load, so over a window of a few seconds its integral missed the
    energy counter by 3.6% on an H200 GEMM burst (2026-12-01), against the 3% the check allows."""
    field = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", None)
    get = getattr(nv, "nvmlDeviceGetFieldValues", None)
    if field is None or get is None:
        return None
    values, _ = _call(get, handle, [field])
    if not values or getattr(values[0], "nvmlReturn", 1) != 0:
        return None
    value = values[0].value
    power = getattr(value, "uiVal", None) or getattr(value, "ullVal", None)
    return float(power) if power else None


def load_nvml() -> tuple[Any, str | None]:
    """``(pynvml, None)`` with NVML initialised, or ``(None, reason)``. Source: nvidia-ml-py."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install -e '.[gpu]')"
    _, problem = _call(pynvml.nvmlInit)
    return (None, problem) if problem else (pynvml, None)


def nvml_handle(nvml: Any, device: Any) -> tuple[Any, str | None]:
    """The NVML handle of the torch CUDA ``device``, found by the device's UUID (NVML's
    ``GPU-<uuid>``), else by its PCI bus id: never by index, since ``CUDA_VISIBLE_DEVICES``
    renumbers torch's devices and not NVML's. ``(handle, None)`` or ``(None, reason)``."""
    import torch

    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", "") or "")
    problems = []
    if uuid:
        name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        handle, problem = _call(nvml.nvmlDeviceGetHandleByUUID, name)
        if handle is not None:
            return handle, None
        problems.append(problem)
    if hasattr(props, "pci_bus_id"):
        bus = f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
        handle, problem = _call(nvml.nvmlDeviceGetHandleByPciBusId, bus)
        if handle is not None:
            return handle, None
        problems.append(problem)
    return None, "; ".join(p for p in problems if p) or "no UUID or PCI bus id from torch"


class NvmlReader:
    """Energy, power, SM clock and throttle reasons of one rank's GPU over the measured window.

    Args:
        device: the rank's ``torch.device``; a CPU device gives null figures and a reason.
        nvml: the NVML bindings (``pynvml``, loaded on first start when None); a test passes a
            double with the same functions.
        handle: the device's NVML handle; None: found from ``device`` (:func:`nvml_handle`).
        interval_s: the sampler's period, seconds.
        clock: the sampler's clock, seconds (``time.perf_counter``; a test's double pairs it with
            its counter).
    """

    KEYS = ENERGY_KEYS

    def __init__(
        self,
        device: Any,
        *,
        nvml: Any = None,
        handle: Any = None,
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.device, self.nvml, self.handle, self.interval_s = device, nvml, handle, interval_s
        self.clock = clock
        self.reason: str | None = None
        self.sampler: PowerSampler | None = None
        self._energy_mj: int | None = None
        self._limit_w: float | None = None

    def _ready(self) -> bool:
        """NVML loaded and the handle found (once); else :attr:`reason` says why not."""
        if self.handle is not None and self.nvml is not None:
            return True
        if self.reason is not None:
            return False
        if getattr(self.device, "type", None) != "cuda":
            self.reason = f"no GPU energy counter on a {getattr(self.device, 'type', self.device)} run"
            return False
        if self.nvml is None:
            self.nvml, self.reason = load_nvml()
            if self.nvml is None:
                return False
        self.handle, self.reason = nvml_handle(self.nvml, self.device)
        return self.handle is not None

    def _sample(self) -> Sample:
        nv, h = self.nvml, self.handle
        power_mw = instant_power_mw(nv, h)
        if power_mw is None:
            power_mw, _ = _call(nv.nvmlDeviceGetPowerUsage, h)
        clock, _ = _call(nv.nvmlDeviceGetClockInfo, h, getattr(nv, "NVML_CLOCK_SM", 1))
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        mask, _ = _call(reasons_fn, h) if reasons_fn else (None, None)
        return Sample(
            power_w=None if power_mw is None else power_mw / 1e3,
            sm_clock_mhz=None if clock is None else float(clock),
            reasons=int(mask or 0),
        )

    def start(self) -> None:
        if not self._ready():
            return
        self._energy_mj, problem = _call(self.nvml.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        self.reason = problem
        limit_mw, _ = _call(self.nvml.nvmlDeviceGetEnforcedPowerLimit, self.handle)
        self._limit_w = None if limit_mw is None else limit_mw / 1e3
        if self.sampler is None:
            self.sampler = PowerSampler(self._sample, self.interval_s, self.clock)
        self.sampler.start()

    def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = dict.fromkeys(self.KEYS)
        if self.sampler is None:  # never started on a GPU: the reason only
            out["energy_reason"] = self.reason
            return out
        seen = self.sampler.stop()
        end_mj, problem = (
            (None, None)
            if self._energy_mj is None
            else _call(self.nvml.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        )
        energy = None if end_mj is None else (end_mj - self._energy_mj) / 1e3
        out.update(
            energy_j=energy,
            energy_sampled_j=seen.energy_j,
            energy_window_s=seen.span_s,
            power_w_sampled_mean=seen.power_w_mean,
            sm_clock_mhz_mean=seen.sm_clock_mhz_mean,
            throttle_reasons=throttle_names(seen.reasons),
            power_limit_w=self._limit_w,
            power_samples=seen.samples,
            energy_reason=None if energy is not None else (problem or self.reason or self.sampler.problem),
        )
        return out
