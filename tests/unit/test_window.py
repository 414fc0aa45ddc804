"""The measured window (flopsweep.window): one object that owns the step clock and every counter
read around exactly the measured steps, restarted as a whole after the extra warm-up.

Runs in this process on a one-rank gloo process group (the window's barrier and the worker's
all-reduced verdict are real collectives)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from flopsweep.config import FaultConfig, RunConfig, StepsConfig
from flopsweep.rank_faults import Phase
from flopsweep.window import CudaMemoryReader, HostMemoryReader, MeasuredWindow
from flopsweep.worker import _rank_figures, measure, measure_steady, warm_up

CPU = torch.device("cpu")


@pytest.fixture
def one_rank(tmp_path: Path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


class Trainer:
    """A trainer whose steps the test scripts: step ``n`` (counting from 1) sleeps ``slow[n]``
    seconds (else ``base_s``) and "uses" ``size[n]`` units of a peak-tracked resource."""

    def __init__(self, *, slow: dict[int, float] | None = None, size: dict[int, int] | None = None):
        self.calls, self.slow, self.size = 0, slow or {}, size or {}
        self.base_s = 0.02
        self.in_use_peak = 0  # a counter with a resettable peak, like the CUDA allocator's

    def step(self, batches: list[Any]) -> torch.Tensor:
        self.calls += 1
        time.sleep(self.slow.get(self.calls, self.base_s))
        self.in_use_peak = max(self.in_use_peak, self.size.get(self.calls, 1))
        return torch.tensor(float(self.calls))


@dataclasses.dataclass
class StepCounter:
    """A later counter (as NVML energy would be): a reading at the start and at the end of the
    window, and the difference reported; plus the trainer's resettable peak."""

    trainer: Trainer
    starts: int = 0
    _at_start: int = 0

    def start(self) -> None:
        self.starts += 1
        self._at_start = self.trainer.calls
        self.trainer.in_use_peak = 0

    def stop(self) -> dict[str, Any]:
        return {"steps_counted": self.trainer.calls - self._at_start, "peak_in_use": self.trainer.in_use_peak}


def _cfg(measure: int, max_extra: int) -> RunConfig:
    return RunConfig(device="cpu", steps=StepsConfig(warmup=1, measure=measure, max_extra_warmup=max_extra))


def _phase(tmp_path: Path) -> Phase:
    return Phase(tmp_path / "phase.txt", fault=FaultConfig(), rank=0)


def test_a_window_times_its_steps_and_reads_its_counters(one_rank, tmp_path: Path) -> None:
    trainer = Trainer(size={2: 7})
    window = MeasuredWindow(CPU)
    counter = StepCounter(trainer)
    window.add_reader(counter)
    figures, losses = measure(trainer, [], 3, window, lambda _: None)
    assert len(figures.step_times_s) == 3 and all(t > 0 for t in figures.step_times_s)
    assert [x.item() for x in losses] == [1.0, 2.0, 3.0]
    assert figures.counters["steps_counted"] == 3 and figures.counters["peak_in_use"] == 7
    # the built-in readers: no CUDA figures on the CPU, the process's peak RSS
    assert figures.counters["peak_cuda_allocated_bytes"] is None
    assert figures.counters["cuda_alloc_retries"] is None
    assert figures.counters["peak_host_rss_bytes"] > 2**20
    ranks = _rank_figures(0, CPU, figures, losses)
    assert ranks["step_times_s"] == figures.step_times_s and ranks["steps_counted"] == 3
    assert ranks["losses"] == [1.0, 2.0, 3.0] and ranks["device"] == "cpu"


def test_a_window_restarted_after_extra_warm_up_reports_only_the_final_steps(
    one_rank, tmp_path: Path
) -> None:
    # The first measured step (call 2, after one warm-up step) is slow and uses 1000 units: the
    # run warms up more and measures again; nothing of the first window may remain.
    measure_n, phase = 4, _phase(tmp_path)
    trainer = Trainer(slow={2: 0.6}, size={2: 1000})
    window = MeasuredWindow(CPU)
    counter = StepCounter(trainer)
    window.add_reader(counter)
    cfg = _cfg(measure_n, max_extra=2 * measure_n)
    warm_up(trainer, [], cfg.steps.warmup, CPU, lambda _: None, phase)
    figures, losses, extra = measure_steady(trainer, [], cfg, window, lambda _: None, phase)
    attempts = 1 + extra // measure_n
    assert extra >= measure_n and extra % measure_n == 0 and counter.starts == attempts
    assert trainer.calls == cfg.steps.warmup + attempts * measure_n + extra
    assert len(losses) == attempts * measure_n + extra  # every step run here, warm-up included
    assert len(figures.step_times_s) == measure_n
    assert figures.counters["steps_counted"] == measure_n
    assert figures.counters["peak_in_use"] == 1  # the 1000 of the first window is gone


def test_a_steady_run_measures_once(one_rank, tmp_path: Path) -> None:
    trainer, phase = Trainer(), _phase(tmp_path)
    window = MeasuredWindow(CPU, readers=[StepCounter(trainer)])
    figures, losses, extra = measure_steady(trainer, [], _cfg(2, max_extra=4), window, lambda _: None, phase)
    assert extra == 0 and trainer.calls == 2 and len(losses) == 2  # two steps: too few to judge
    assert figures.counters == {"steps_counted": 2, "peak_in_use": 1}  # only the readers given


def test_a_window_refuses_steps_and_a_stop_outside_it() -> None:
    window = MeasuredWindow(CPU, readers=[HostMemoryReader()], barrier=False)
    with pytest.raises(RuntimeError, match="step_done"):
        window.step_done()
    with pytest.raises(RuntimeError, match="without start"):
        window.stop()
    window.start()
    window.step_done()
    assert len(window.stop().step_times_s) == 1
    with pytest.raises(RuntimeError, match="without start"):
        window.stop()


@pytest.mark.gpu
def test_cuda_peaks_and_retries_cover_only_the_restarted_window() -> None:
    device = torch.device("cuda", 0)
    reader = CudaMemoryReader(device)
    window = MeasuredWindow(device, readers=[reader], barrier=False)
    window.start()
    big = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)  # 256 MiB in the first window
    window.step_done()
    first = window.stop()
    del big
    held = torch.cuda.memory_allocated(device)  # what earlier tests of this process still hold
    window.start()
    small = torch.empty(2**20, dtype=torch.uint8, device=device)
    window.step_done()
    second = window.stop()
    del small
    assert first.counters["peak_cuda_allocated_bytes"] >= 256 * 2**20
    assert second.counters["peak_cuda_allocated_bytes"] - held < 256 * 2**20
    assert second.counters["cuda_alloc_retries"] == 0
    assert len(second.step_times_s) == 1 and second.step_times_s[0] >= 0
