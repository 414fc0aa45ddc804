"""A CPU host-memory refusal's fix that ends within ``timeout_s`` (docs/reliability-9.md #501): the value it
names fits the free memory and is counted (:func:`flopsweep.cpu_duration.run_seconds`) to end within the
run's ``timeout_s``, and typed back it passes the same check."""

from __future__ import annotations

import dataclasses
import re

import pytest

from flopsweep.config import ConfigError, RunConfig
from flopsweep.cpu_duration import CPU_CORE_FLOPS, START_S, run_seconds, steps_counted
from flopsweep.job import check_free_host_memory
from flopsweep.plan import Environment, plan

GIB = 2**30
FREE = int(22.4 * GIB)  # what the machine of the trial had free
HOST = Environment(cpu_count=2, host_memory_bytes=1 << 60)  # validation passes: the launch checks


def _planned(seq_len: int, timeout_s: float = 1800.0):
    cfg = RunConfig(device="cpu", timeout_s=timeout_s)
    return plan(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seq_len=seq_len)), HOST)


def _seconds(p) -> float:
    batch = p.cfg.batch
    return run_seconds(
        p.cfg, p.layout.global_batch(batch.micro_batch_size, batch.grad_accum) * p.cfg.model.seq_len, 2
    )


@pytest.mark.parametrize(("timeout_s", "expected"), [(1800.0, 16384), (120.0, 4096)])
def test_a_cpu_memory_refusals_fix_ends_within_the_runs_timeout(timeout_s: float, expected: int) -> None:
    """Trial: ``device=cpu model.seq_len=1048576`` (22.4 GiB free, 2 cores): ``Fix: set
    model.seq_len=262144``, which fits the memory; typed back with ``timeout_s=120`` it ended ``error:
    timeout`` in init (its attention's steps take hours). Now the value also ends within ``timeout_s`` at 2
    cores' pace."""
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(
            _planned(2**20, timeout_s), free=FREE, overrides=["device=cpu", "model.seq_len=1048576"], cores=2
        )
    line = str(err.value)
    assert "\n" not in line and line.startswith(
        "Invalid config: model.seq_len=1048576: on the CPU 1 rank needs"
    )
    assert (
        f"Fix: set model.seq_len={expected} (the largest power of two that fits the memory free now and ends "
        f"within timeout_s={timeout_s:g} on 2 cores)" in line
    )
    fit = int(re.search(r"Fix: set model.seq_len=(\d+) ", line).group(1))
    assert check_free_host_memory(_planned(fit, timeout_s), free=FREE, cores=2) is None  # the fix, typed back
    assert _seconds(_planned(fit, timeout_s)) <= timeout_s < _seconds(_planned(2 * fit, timeout_s))
    assert _seconds(_planned(262144)) > 1800  # the old fix: past the default timeout_s


def test_the_count_is_the_hardware_flops_of_every_step_at_the_cores_pace() -> None:
    """gpt-tiny at ``model.seq_len=8192``: 13 steps (3 probe, 2 warm-up, 5 extra, 5 measured) of the hardware
    FLOPs at 25 GFLOP/s a core on 2 cores, plus the start; measured there: 8.4 s a step (70 s in all)."""
    p = _planned(8192)
    assert steps_counted(p.cfg) == 15
    step_s = (_seconds(p) - START_S) / 15
    assert CPU_CORE_FLOPS == 25e9 and 8.4 < step_s < 30  # an upper bound of the measured step, not a wild one
