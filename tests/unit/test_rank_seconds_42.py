"""A tuning on the CPU says its device time in rank-seconds, its keys unchanged (docs/reliability-13.md
row 1010)."""

from __future__ import annotations

from flopsweep.tune import Budget, budget_stop, record_time_unit, time_unit
from flopsweep.tunereport import gpu_time_line, table_head


def test_the_cpu_s_unit_is_rank_seconds_and_a_gpu_s_is_gpu_seconds():
    assert time_unit("cpu", gpus_here=True) == "rank-s"
    assert time_unit("auto", gpus_here=False) == "rank-s"
    assert time_unit("auto", gpus_here=True) == time_unit("cuda", gpus_here=False) == "GPU-s"
    assert record_time_unit({"system": {"device_name": "cpu"}}) == "rank-s"
    assert record_time_unit({"system": {"device_name": "NVIDIA H100 80GB HBM3"}}) == "GPU-s"
    assert record_time_unit({}) is None


def test_the_lines_and_the_report_say_rank_seconds_on_the_cpu():
    assert Budget(3600.0, spent_s=1920.0, unit="rank-s").line() == "1920/3600 rank-s spent"
    s = {"spent_gpu_s": 1920.0, "budget_gpu_s": 3600.0, "time_unit": "rank-s"}
    assert gpu_time_line(s) == "Rank time: 1920 of 3600 rank-s"
    assert "rank-s" in table_head(s) and "GPU-s" not in table_head(s)
    stop = budget_stop(1, pool=2, target=2, challengers=0, jobs=4, cost=536.0, left=10.0, unit="rank-s")
    assert "would cost about 536 rank-s" in stop
    old = {"spent_gpu_s": 26.0, "budget_gpu_s": 3600.0}  # a tune.json written before time_unit
    assert gpu_time_line(old) == "GPU time: 26 of 3600 GPU-s" and "GPU-s" in table_head(old)
