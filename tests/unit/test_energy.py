"""Energy and cost per token (issue 25): the NVML reader in the measured window, the record's
energy keys, the cost and budget arithmetic, and the analysis columns and Pareto plot.

NVML does not exist on the CPU: :class:`FakeNvml` is a test double of the few ``pynvml``
functions the reader calls, with a counter that is the exact integral of its power over a clock
the test moves. The reader, its sampler thread, the window and every formula are the real ones.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from flopsweep.config import BudgetConfig, ConfigError, CostConfig, RunConfig, StepsConfig
from flopsweep.cost import budget, energy_figures, power_limit_w, usd_per_million_tokens
from flopsweep.energy import ENERGY_KEYS, NvmlReader, PowerSampler, Sample, throttle_names
from flopsweep.metrics import compute_metrics
from flopsweep.window import CudaMemoryReader, HostMemoryReader, MeasuredWindow
from flopsweep.worker import _rank_figures
from tests.helpers import ROOT

CPU = torch.device("cpu")


FIXTURE = ROOT / "tests" / "fixtures" / "records" / "v2-ok" / "metrics.json"


class NotSupported(Exception):
    """As ``pynvml.NVMLError_NotSupported``."""


class FakeNvml:
    """The ``pynvml`` calls of :class:`NvmlReader`: a GPU at ``power_w`` (constant), whose energy
    counter (mJ) is ``power_w x now``, ``now`` being a clock the test advances (:meth:`advance`);
    ``reasons`` gives the throttle mask of each successive reading (the last one repeats)."""

    NVML_CLOCK_SM = 1

    def __init__(
        self,
        power_w: float = 500.0,
        *,
        counter: bool = True,
        reasons: tuple[int, ...] = (0,),
        event_reasons: bool = True,
    ) -> None:
        self.power_w, self.counter, self.reasons = power_w, counter, list(reasons)
        self.now = 1000.0
        self._lock = threading.Lock()
        if not event_reasons:  # bindings older than NVML 12.5 name it ...ThrottleReasons only
            self.nvmlDeviceGetCurrentClocksEventReasons = None

    def clock(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        assert handle == "gpu0"
        if not self.counter:
            raise NotSupported("Not Supported")
        return round(self.power_w * self.clock() * 1e3)

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return round(self.power_w * 1e3)

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return 1410

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        with self._lock:
            return self.reasons.pop(0) if len(self.reasons) > 1 else self.reasons[0]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: str) -> int:
        return FakeNvml.nvmlDeviceGetCurrentClocksEventReasons(self, handle)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        return 700_000


def _reader(nvml: FakeNvml) -> NvmlReader:
    return NvmlReader(CPU, nvml=nvml, handle="gpu0", interval_s=0.005, clock=nvml.clock)


def _measure(nvml: FakeNvml, steps: int = 3, step_s: float = 2.0) -> dict[str, Any]:
    """One rank's figures from a real window with the fake GPU: each step advances its clock."""
    window = MeasuredWindow(
        CPU, readers=[CudaMemoryReader(CPU), HostMemoryReader(), _reader(nvml)], barrier=False
    )
    window.start()
    losses = []
    for i in range(steps):
        nvml.advance(step_s)
        losses.append(torch.tensor(1.0 + i))
        window.step_done()
    return _rank_figures(0, CPU, window.stop(), losses)


def test_throttle_bits_map_to_names_in_bit_order() -> None:
    assert throttle_names(0) == []
    assert throttle_names(0x4) == ["sw_power_cap"]
    assert throttle_names(0x80 | 0x8 | 0x4) == ["sw_power_cap", "hw_slowdown", "hw_power_brake"]
    assert throttle_names(0x20 | 0x40 | 0x1) == ["gpu_idle", "sw_thermal", "hw_thermal"]
    assert throttle_names(0x4 | 0x200) == ["sw_power_cap", "bit_0x200"]


def test_the_reader_gives_the_counter_the_sampled_integral_and_the_reasons_seen() -> None:
    nvml = FakeNvml(500.0, reasons=(0x4, 0x40))  # the start reading, then every other
    figures = _measure(nvml, steps=3, step_s=2.0)
    assert set(ENERGY_KEYS) <= set(figures)
    assert figures["energy_j"] == pytest.approx(500.0 * 6.0)  # 500 W for 3 x 2 s of the clock
    # constant power: the trapezoid integral over the same span equals the counter
    assert figures["energy_sampled_j"] == pytest.approx(figures["energy_j"], rel=1e-9)
    assert figures["energy_window_s"] == pytest.approx(6.0)
    assert figures["power_w_sampled_mean"] == pytest.approx(500.0)
    assert figures["sm_clock_mhz_mean"] == 1410.0 and figures["power_limit_w"] == 700.0
    assert figures["throttle_reasons"] == ["sw_power_cap", "hw_thermal"]
    assert figures["power_samples"] >= 2 and figures["energy_reason"] is None
    assert not [t for t in threading.enumerate() if t.name == "flopsweep-power-sampler"]  # stopped


def test_older_bindings_read_the_throttle_reasons_by_their_old_name() -> None:
    figures = _measure(FakeNvml(reasons=(0x4,), event_reasons=False), steps=1)
    assert figures["throttle_reasons"] == ["sw_power_cap"]


def test_a_restarted_window_counts_only_its_own_energy() -> None:
    nvml = FakeNvml(400.0)
    reader = _reader(nvml)
    window = MeasuredWindow(CPU, readers=[reader], barrier=False)
    window.start()
    nvml.advance(10.0)  # the unsteady first attempt
    window.start()  # measure_steady measures again: the window restarts as a whole
    nvml.advance(3.0)
    window.step_done()
    counters = window.stop().counters
    assert counters["energy_j"] == pytest.approx(1200.0) and counters["energy_window_s"] == pytest.approx(3.0)


def test_a_gpu_without_the_counter_keeps_power_and_says_why_energy_is_null() -> None:
    figures = _measure(FakeNvml(300.0, counter=False), steps=2)
    assert figures["energy_j"] is None and "NotSupported" in figures["energy_reason"]
    assert figures["energy_sampled_j"] == pytest.approx(300.0 * 4.0)
    assert figures["power_limit_w"] == 700.0


def test_a_cpu_run_has_null_energy_and_a_one_line_reason() -> None:
    reader = NvmlReader(CPU)
    window = MeasuredWindow(CPU, readers=[reader], barrier=False)
    window.start()
    window.step_done()
    counters = window.stop().counters
    reason = counters.pop("energy_reason")
    assert counters == dict.fromkeys(ENERGY_KEYS[:-1]) and reason == "no GPU energy counter on a cpu run"


def test_a_failing_sensor_stops_the_sampling_not_the_run() -> None:
    calls = iter([Sample(power_w=100.0, sm_clock_mhz=None)])

    def read() -> Sample:
        return next(calls)  # StopIteration on the second reading

    sampler = PowerSampler(read, interval_s=0.005)
    sampler.start()
    seen = sampler.stop()
    assert seen.samples == 1 and seen.energy_j is None and "StopIteration" in sampler.problem


def _cfg(**kw: Any) -> RunConfig:
    return RunConfig(device="cpu", steps=StepsConfig(warmup=0, measure=3), **kw)


def test_joules_per_token_times_tokens_per_s_is_mean_power_times_gpus() -> None:
    ranks = [{**_measure(FakeNvml(500.0)), "rank": 0}, {**_measure(FakeNvml(300.0)), "rank": 1}]
    ranks[1]["step_times_s"] = list(ranks[0]["step_times_s"])
    m = compute_metrics(_cfg(cost=CostConfig(usd_per_gpu_hour=2.5), budget=BudgetConfig(tokens=15e12)), ranks)
    assert m["energy_j"] == pytest.approx(500.0 * 6 + 300.0 * 6)
    assert m["energy_sampled_j"] == pytest.approx(m["energy_j"])
    measured_tokens = m["tokens_per_step"] * len(m["iteration_time_s"]["values"])
    assert m["joules_per_token"] == pytest.approx(m["energy_j"] / measured_tokens)
    assert m["joules_per_token"] * m["tokens_per_s"] == pytest.approx(m["power_w_mean"] * 2, rel=1e-9)
    assert m["sm_clock_mhz_mean"] == 1410.0 and m["throttle_reasons"] == [] and m["energy_reason"] is None
    assert m["usd_per_million_tokens"] == pytest.approx(2.5 * 2 / 3600 / m["tokens_per_s"] * 1e6)
    b = m["budget"]
    assert b["gpu_hours"] == pytest.approx(15e12 / m["tokens_per_s"] * 2 / 3600)
    assert b["days"] == pytest.approx(15e12 / m["tokens_per_s"] / 86400)
    assert b["energy_kwh"] == pytest.approx(15e12 * m["joules_per_token"] / 3.6e6)
    assert b["usd"] == pytest.approx(b["gpu_hours"] * 2.5)
    assert power_limit_w(ranks) == 700.0


def test_without_a_price_or_budget_or_counter_those_figures_are_null() -> None:
    ranks = [_measure(FakeNvml(counter=False))]
    m = compute_metrics(_cfg(), ranks)
    assert m["energy_j"] is None and m["joules_per_token"] is None and m["power_w_mean"] is None
    assert "NotSupported" in m["energy_reason"]
    assert m["usd_per_million_tokens"] is None and m["budget"] is None
    b = compute_metrics(_cfg(budget=BudgetConfig(tokens=1e9)), ranks)["budget"]
    assert b["gpu_hours"] > 0 and b["energy_kwh"] is None and b["usd"] is None


def test_cost_and_budget_arithmetic() -> None:
    # 8 GPUs at $2.50/h making 80,000 tokens/s: $20/h for 288M tokens an hour
    assert usd_per_million_tokens(2.5, world=8, tokens_per_s=80_000) == pytest.approx(20 / 288)
    assert usd_per_million_tokens(None, world=8, tokens_per_s=80_000) is None
    b = budget(15e12, tokens_per_s=10_000, world=1, joules_per_token=0.069, usd_per_gpu_hour=2.5)
    assert b == pytest.approx(
        {
            "tokens": 15e12,
            "gpu_hours": 15e8 / 3600,
            "days": 15e8 / 86400,
            "energy_kwh": 287_500.0,
            "usd": 15e8 / 1440,
        }
    )
    assert budget(None, tokens_per_s=1.0, world=1, joules_per_token=None, usd_per_gpu_hour=None) is None
    ranks = [
        {"energy_j": 10.0, "throttle_reasons": ["sw_power_cap"]},
        {"energy_j": None, "energy_reason": "x"},
    ]
    assert energy_figures(ranks, tokens=10, window_s=1.0, world=2)["energy_reason"] == "x"


def test_cost_and_budget_keys_compose_and_are_checked(hydra_compose) -> None:
    from flopsweep.plan import validate

    cfg = hydra_compose(["cost.usd_per_gpu_hour=2.5", "budget.tokens=15e12", "device=cpu"])
    assert cfg.cost.usd_per_gpu_hour == 2.5 and cfg.budget.tokens == 15e12
    validate(cfg)
    assert hydra_compose(["device=cpu"]).cost.usd_per_gpu_hour is None
    with pytest.raises(ConfigError, match=r"cost.usd_per_gpu_hour=-1: must be >= 0"):
        validate(hydra_compose(["cost.usd_per_gpu_hour=-1", "device=cpu"]))
    with pytest.raises(ConfigError, match=r"budget.tokens=0: must be a whole number of tokens >= 1"):
        validate(hydra_compose(["budget.tokens=0", "device=cpu"]))


def _record(precision: str, step_s: float, power_w: float, *, price: float | None = None) -> dict[str, Any]:
    """The fixture's ok record (2 ranks) as if run at ``precision`` with every step ``step_s`` long
    at ``power_w`` per GPU, its figures derived by the run's own formulas."""
    record = json.loads(FIXTURE.read_text())
    record["config"]["precision"] = {"name": precision}
    record["config"]["cost"] = {"usd_per_gpu_hour": price}
    record["config"]["budget"] = {"tokens": 15e12}
    record["run"]["id"] = f"run-{precision}-{step_s}"
    m, world = record["metrics"], record["system"]["world_size"]
    values = [step_s] * 5
    m["iteration_time_s"] = {
        "mean": step_s,
        "median": step_s,
        "min": step_s,
        "max": step_s,
        "std": 0.0,
        "cv": 0.0,
        "values": values,
    }
    m["tokens_per_s"] = m["tokens_per_step"] / step_s
    m["tokens_per_s_per_device"] = m["tokens_per_s"] / world
    m["model_tflops_per_device"] = m["model_flops_per_iteration"] / (step_s * world * 1e12)
    m["hardware_tflops_per_device"] = m["hardware_flops_per_iteration"] / (step_s * world * 1e12)
    for key, top in (("mfu", "model"), ("hfu", "hardware")):
        m[key] = m[f"{top}_tflops_per_device"] / m["peak_tflops"]
    m["matmul_fraction"] = m["model_tflops_per_device"] / m["measured_matmul_tflops"]
    m["tflops_per_device"] = None
    ranks = [
        {
            "energy_j": power_w * sum(values),
            "energy_sampled_j": power_w * sum(values),
            "sm_clock_mhz_mean": 1400.0,
            "throttle_reasons": ["sw_power_cap"],
        }
        for _ in range(world)
    ]
    m.update(
        energy_figures(ranks, tokens=m["tokens_per_step"] * len(values), window_s=sum(values), world=world)
    )
    m["usd_per_million_tokens"] = usd_per_million_tokens(price, world=world, tokens_per_s=m["tokens_per_s"])
    m["budget"] = budget(
        15e12,
        tokens_per_s=m["tokens_per_s"],
        world=world,
        joules_per_token=m["joules_per_token"],
        usd_per_gpu_hour=price,
    )
    return record


def _write(root: Path, records: dict[str, dict[str, Any]]) -> Path:
    for name, record in records.items():
        (root / name).mkdir(parents=True)
        (root / name / "metrics.json").write_text(json.dumps(record))
    return root


def test_energy_columns_load_check_and_rank_lower_first(tmp_path: Path) -> None:
    from analysis import compact, load, table

    root = _write(
        tmp_path,
        {
            "bf16": _record("bf16", 0.30, 690.0, price=2.5),
            "fp8": _record("fp8", 0.22, 700.0, price=2.5),
            "fp8-rowwise": _record("fp8-rowwise", 0.25, 650.0, price=2.5),
        },
    )
    df = load(root)
    assert df["implausible"].isna().all(), df["implausible"].tolist()
    ranked = table(
        df,
        columns=["precision", "joules_per_token", "power_w_mean", "usd_per_million_tokens"],
        metric="joules_per_token",
    )
    assert ranked["precision"].tolist() == [
        "fp8",
        "fp8-rowwise",
        "bf16",
    ]  # 700 x 0.22 < 650 x 0.25 < 690 x 0.3
    assert ranked["joules_per_token"].is_monotonic_increasing
    assert ranked["power_w_mean"].tolist() == pytest.approx([700.0, 650.0, 690.0])
    assert df["budget_gpu_hours"].notna().all() and df["budget_usd"].notna().all()
    assert df["throttle_reasons"].map(list).tolist() == [["sw_power_cap"]] * 3
    shown = compact(table(df))
    assert {"joules_per_token", "power_w_mean", "usd_per_million_tokens"} <= set(shown.columns)


def test_a_record_whose_joules_per_token_disagrees_with_its_energy_is_flagged(tmp_path: Path) -> None:
    from analysis import load

    bad = _record("bf16", 0.3, 690.0)
    bad["metrics"]["joules_per_token"] *= 1.5
    df = load(_write(tmp_path, {"bad": bad}))
    assert "joules_per_token" in df["implausible"].iloc[0]


def test_records_without_energy_show_no_energy_column_and_say_why_when_asked() -> None:
    from analysis import ENERGY_COLUMNS, compact, load, table, why_blank

    df = load(ROOT / "tests" / "fixtures" / "sweep")
    assert df[ENERGY_COLUMNS].isna().all().all()
    assert not set(ENERGY_COLUMNS) & set(compact(table(df)).columns)
    assert "metrics.energy_j" in why_blank(df, "joules_per_token")


def test_the_pareto_front_and_its_plot(tmp_path: Path) -> None:
    from analysis import load, make_plots, pareto_front

    points = pd.DataFrame(
        {"jpt": [0.07, 0.05, 0.09, 0.05, 0.06, None], "tps": [10.0, 6.0, 12.0, 5.0, 6.0, 99.0]}
    )
    front = pareto_front(points, x="jpt", y="tps")
    assert front.index.tolist() == [1, 0, 2]  # (0.06, 6) ties (0.05, 6) on speed and loses on energy

    runs = {"bf16": (0.30, 690.0), "fp8": (0.22, 700.0), "fp8-rowwise": (0.25, 750.0)}
    df = load(_write(tmp_path, {name: _record(name, step, watts) for name, (step, watts) in runs.items()}))
    figures, skipped = make_plots(df)
    assert "tokens_vs_joules_per_token" in figures, skipped
    ax = figures["tokens_vs_joules_per_token"].axes[0]
    ringed = next(
        line for line in ax.lines if line.get_marker() == "o" and line.get_markerfacecolor() == "none"
    )
    # fp8 is both faster and cheaper per token than fp8-rowwise and bf16: the front is fp8 alone
    assert len(ringed.get_xdata()) == 1 and ringed.get_ydata()[0] == pytest.approx(32768 / 0.22)


@pytest.mark.gpu
def test_a_gemm_burst_energy_counter_agrees_with_the_sampled_power() -> None:
    """A real CUDA window around 2 s of bf16 GEMMs (after 2 s of them, so that the power is
    steady): finite energy > 0, and NVML's counter within 5% of the sampled power's integral.

    NVML's power reading on Hopper is averaged over about a second, so it lags the counter while
    the power still climbs: on a GPU just started (session 11, the first test of the call) 1 s of
    warm-up left the sampled integral 3.8% low (1,387 J against 1,442 J); three reruns on the
    warm GPU agreed within 3%."""
    import time

    device = torch.device("cuda", 0)
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)

    def burst(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(10):
                a @ b
            torch.cuda.synchronize(device)

    burst(2.0)
    window = MeasuredWindow(device, readers=[NvmlReader(device)], barrier=False)
    window.start()
    burst(2.0)
    window.step_done()
    counters = window.stop().counters
    assert counters["energy_reason"] is None, counters
    assert math.isfinite(counters["energy_j"]) and counters["energy_j"] > 0
    assert counters["power_samples"] >= 10 and counters["power_limit_w"] > 0
    assert counters["energy_sampled_j"] == pytest.approx(counters["energy_j"], rel=0.05), counters
    print(f"GEMM burst: {counters}")


def test_instant_power_is_read_from_the_field_and_falls_back_without_it() -> None:
    """The sampler reads NVML's instantaneous power field where the bindings have it (the one-second
    average lags the load), and None, i.e. the average, where the field or the call is missing."""
    from types import SimpleNamespace

    from flopsweep.energy import instant_power_mw

    class Fields:
        NVML_FI_DEV_POWER_INSTANT = 186

        def __init__(self, ret: int) -> None:
            self.ret = ret

        def nvmlDeviceGetFieldValues(self, handle, ids):  # noqa: N802 - NVML's name
            assert ids == [186]
            return [SimpleNamespace(nvmlReturn=self.ret, value=SimpleNamespace(uiVal=612_345))]

    assert instant_power_mw(Fields(0), object()) == 612_345.0
    assert instant_power_mw(Fields(3), object()) is None  # NVML_ERROR_NOT_SUPPORTED
    assert instant_power_mw(SimpleNamespace(), object()) is None  # older bindings
