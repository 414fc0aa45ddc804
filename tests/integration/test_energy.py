"""Energy and cost per token (issue 25): the NVML reader in the measured window, the record's
energy keys, the cost and budget arithmetic, and the analysis columns and Pareto plot.

NVML does not exist on the CPU: :class:`FakeNvml` is a test double of the few ``pynvml``
functions the reader calls, with a counter that is the exact integral of its power over a clock
the test moves. The reader, its sampler thread, the window and every formula are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_py


@pytest.mark.slow
def test_a_cpu_run_records_null_energy_with_its_reason(tmp_path: Path) -> None:
    proc = run_py(
        "device=cpu",
        "steps.warmup=1",
        "steps.measure=2",
        "cost.usd_per_gpu_hour=2.5",
        "budget.tokens=15e12",
        f"hydra.run.dir={tmp_path}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    m = record["metrics"]
    assert record["status"] == "ok" and record["system"]["power_limit_w"] is None
    for key in (
        "energy_j",
        "energy_sampled_j",
        "joules_per_token",
        "power_w_mean",
        "sm_clock_mhz_mean",
        "throttle_reasons",
    ):
        assert m[key] is None, key
    assert m["energy_reason"] == "no GPU energy counter on a cpu run"
    assert m["per_rank"][0]["energy_reason"] == "no GPU energy counter on a cpu run"
    assert m["usd_per_million_tokens"] == pytest.approx(2.5 / 3600 / m["tokens_per_s"] * 1e6)
    assert m["budget"]["energy_kwh"] is None and m["budget"]["usd"] > 0
    assert not any("energy" in w for w in record["warnings"])
