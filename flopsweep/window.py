"""The measured window: exactly the measured optimizer steps of a rank, and every counter read
around them.

:class:`MeasuredWindow` owns the step clock (CUDA events between steps on a GPU, one
``time.perf_counter`` reading between steps on the CPU) and a list of :class:`WindowReader`
counters, each read once when the window starts and once when it stops: the CUDA allocator's
peaks and ``num_alloc_retries`` (:class:`CudaMemoryReader`) and the host's peak resident set
(:class:`HostMemoryReader`), and the GPU's energy counter, power, SM clock and throttle reasons
from NVML (:class:`flopsweep.energy.NvmlReader`).

Starting a window again restarts it as a whole: the step marks and every reader begin anew,
so that after the extra warm-up of an unsteady run (``worker.measure_steady``) the figures
are those of the final measured steps only. Torch is imported only when a window runs.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class WindowReader(Protocol):
    """A counter read around exactly the measured steps.

    ``start`` is called after the device is idle and every rank has reached the window (a
    barrier), right before the first step; ``stop`` after the last step has finished on the device.
    ``stop`` returns figures keyed by :class:`flopsweep.wire.RankFigures` field names. A reader
    may be started again without being stopped (a restarted window): it then begins anew.
    """

    def start(self) -> None: ...

    def stop(self) -> dict[str, Any]: ...


class CudaMemoryReader:
    """The caching allocator's peak allocated and reserved bytes (reset at the start) and its
    ``num_alloc_retries`` (a count since the start: end minus start), on a CUDA device; all null
    on the CPU. Source: ``torch.cuda.memory_stats``, ``torch.cuda.reset_peak_memory_stats``."""

    KEYS = ("peak_cuda_allocated_bytes", "peak_cuda_reserved_bytes", "cuda_alloc_retries")

    def __init__(self, device: Any) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._retries_at_start = 0

    def start(self) -> None:
        if not self.cuda:
            return
        import torch

        torch.cuda.reset_peak_memory_stats(self.device)
        self._retries_at_start = torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)

    def stop(self) -> dict[str, Any]:
        if not self.cuda:
            return dict.fromkeys(self.KEYS)
        import torch

        retries = torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)
        return {
            "peak_cuda_allocated_bytes": torch.cuda.max_memory_allocated(self.device),
            "peak_cuda_reserved_bytes": torch.cuda.max_memory_reserved(self.device),
            "cuda_alloc_retries": retries - self._retries_at_start,
        }


class HostMemoryReader:
    """The process's peak resident set, bytes (``getrusage`` ``ru_maxrss``, KiB on Linux).

    The kernel keeps one peak per process and offers no portable reset, so this is the peak since
    the rank started (model build and warm-up included), read when the window stops."""

    def start(self) -> None:
        pass

    def stop(self) -> dict[str, Any]:
        return {"peak_host_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


@dataclass(frozen=True, kw_only=True)
class WindowFigures:
    """What one measured window saw.

    Attributes:
        step_times_s: seconds per measured step, in order (one per :meth:`MeasuredWindow.step_done`).
        counters: the readers' figures merged, keyed by ``RankFigures`` field names.
    """

    step_times_s: list[float]
    counters: dict[str, Any] = field(default_factory=dict)


class MeasuredWindow:
    """The measured steps of one rank: ``start()``, a ``step_done()`` after each step, ``stop()``.

    Args:
        device: the rank's ``torch.device``.
        readers: the counters; default :func:`default_readers`.
        barrier: wait for every rank before the first step (``torch.distributed.barrier``, when a
            process group is up), so that the ranks' windows begin together.
    """

    def __init__(self, device: Any, readers: Sequence[WindowReader] | None = None, *, barrier: bool = True):
        self.device = device
        self.readers = list(default_readers(device) if readers is None else readers)
        self.barrier = barrier
        self._marks: list[Any] = []
        self._running = False

    def add_reader(self, reader: WindowReader) -> None:
        """Register one more counter; it is read from the next :meth:`start` on."""
        self.readers.append(reader)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def start(self) -> None:
        """Begin the window, or begin it again (every mark and reader anew): the device goes idle,
        the ranks meet, the readers start, and the clock takes its first mark."""
        import torch
        import torch.distributed as dist

        if self.cuda:
            torch.cuda.synchronize(self.device)
        if self.barrier and dist.is_available() and dist.is_initialized():
            dist.barrier()
        for reader in self.readers:
            reader.start()
        self._marks, self._running = [], True
        self._mark()

    def step_done(self) -> None:
        """Mark the end of one measured step (no host synchronisation on a GPU)."""
        if not self._running:
            raise RuntimeError("MeasuredWindow.step_done() outside a started window")
        self._mark()

    def stop(self) -> WindowFigures:
        """End the window: wait for the device, then read the clock and every reader.

        Raises:
            RuntimeError: the window was not started.
        """
        if not self._running:
            raise RuntimeError("MeasuredWindow.stop() without start()")
        self._running = False
        if self.cuda:
            import torch

            torch.cuda.synchronize(self.device)
            times = [a.elapsed_time(b) / 1e3 for a, b in zip(self._marks, self._marks[1:], strict=False)]
        else:
            times = [b - a for a, b in zip(self._marks, self._marks[1:], strict=False)]
        counters: dict[str, Any] = {}
        for reader in self.readers:
            counters.update(reader.stop())
        return WindowFigures(step_times_s=times, counters=counters)

    def _mark(self) -> None:
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter())


def default_readers(device: Any) -> list[WindowReader]:
    """The counters every run reads: CUDA memory (null on the CPU), the host's peak RSS, and NVML
    energy, power, clock and throttle reasons (null with a reason on the CPU)."""
    from flopsweep.energy import NvmlReader

    return [CudaMemoryReader(device), HostMemoryReader(), NvmlReader(device)]
