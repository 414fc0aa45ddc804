"""``predict.cpu_probe``: when a CPU run times its own step before warm-up, its short schedule and the
prediction made from it (``flopsweep.cpu_probe``, ``flopsweep.layer_probe.schedule``,
``flopsweep.forecast``); the run: integration/test_cpu_probe.py."""

from __future__ import annotations

import pytest

from flopsweep.cpu_probe import MARK, SETTLE, STEPS, runs
from flopsweep.layer_probe import LAYER_STEPS, MEASURED_STEPS, WARMUP_STEPS, schedule


@pytest.mark.parametrize(
    ("overrides", "device", "want"),
    [
        ([], "cpu", True),  # the README's first command: on by default
        (["backend=fsdp", "nproc_per_node=2"], "cpu", True),
        (["backend=zero3", "nproc_per_node=2"], "cpu", True),  # its once-a-process set-up before the clock
        ([], "cuda", False),  # a GPU's prediction is left as it was
        (["predict.cpu_probe=false"], "cpu", False),
        (["predict.probe=true"], "cpu", False),  # the probe asked for is the probe
        (["predict.layer_probe=true"], "cpu", False),
        (["predict.calibration=x"], "cpu", False),  # a record of the set-up predicts it
        (["compile=true"], "cpu", False),  # the copies would compile their graphs
    ],
)
def test_the_cpu_probe_runs_on_a_cpu_with_no_other_probe_nor_calibration(
    hydra_compose, overrides, device, want
) -> None:
    assert runs(hydra_compose(["device=cpu", *overrides]), device) is want


def _stepped(times: list[float], steps=STEPS, settle: float = SETTLE) -> tuple[list[float], int, list[bool]]:
    """:func:`schedule` over scripted step times on one rank: the steps run, the first timed one and
    what each budget check said."""
    script = iter(times)
    asked: list[bool] = []

    def spent(mine: bool) -> bool:
        asked.append(mine)
        return mine

    ran, _, first = schedule(lambda: (next(script),) * 2, settle, bool, lambda timed: False, steps, spent)
    return ran, first, asked


def test_a_slow_first_step_is_untimed_and_steady_steps_stop_after_three() -> None:
    ran, first, _ = _stepped([1.5, 0.03, 0.026, 0.028, 9.0])  # the process's first step, then steady
    assert ran == [1.5, 0.03, 0.026, 0.028] and first == 1


def test_the_cpu_probe_stops_once_its_steps_took_its_budget() -> None:
    """A loaded CPU's single rank stepped 0.3-1.3 s (two threads on two busy cores): after the first
    step and two timed ones, the budget ends the copy, where 8 such steps took the job seconds longer."""
    ran, first, asked = _stepped([0.33, 0.49, 0.38, 0.026, 9.0])
    assert ran == [0.33, 0.49, 0.38] and first == 1 and asked == [True]
    ran, first, asked = _stepped([2.0, 0.05, 0.09, 0.05, 0.09, 0.05, 0.09, 0.05, 9.0])  # unsettled, cheap
    assert len(ran) == 8 and ran[first:] == [0.09, 0.05] * 3 and asked == [False] * 6  # 2 untimed, 6 timed


def test_the_layer_probes_schedule_has_no_budget_and_is_unchanged() -> None:
    """``predict.layer_probe`` (and every GPU run) steps as before: no budget, never asked."""
    assert LAYER_STEPS.budget_s is None and (LAYER_STEPS.warmup, LAYER_STEPS.measured) == (
        WARMUP_STEPS,
        MEASURED_STEPS,
    )
    times = [5.0, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 99.0]
    ran, first, asked = _stepped(times, LAYER_STEPS, 0.05)
    assert ran == times[: WARMUP_STEPS + MEASURED_STEPS] and first == WARMUP_STEPS and asked == []


def _predicted(hydra_compose, probe, overrides=()):
    from flopsweep.forecast import prediction
    from flopsweep.layout import Layout
    from flopsweep.plan import validate

    cfg = validate(hydra_compose(["model=gpt-tiny", "device=cpu", *overrides]))
    return prediction(
        cfg, Layout(), [], gpus_per_node=1, device_name="cpu", gemm_tflops=0.1, layer_probe=probe
    )


def test_a_cpu_probe_predicts_the_step_and_names_itself(hydra_compose) -> None:
    probe = {"layers": [2], "step_s": [0.0412], "fallback": None, "wall_s": 0.4, MARK: True}
    made = _predicted(hydra_compose, probe)
    assert made["compute_source"] == "layers" and made["iteration_time_s"] == pytest.approx(0.0412)
    assert made["source"] == "cpu probe: the full 2 blocks timed, 41.2 ms"
    assert made["layer_probe"][MARK] is True
    plain = _predicted(hydra_compose, None)  # none ran (predict.cpu_probe=false, a GPU): FLOPs, no probe key
    assert plain["compute_source"] == "flops" and "layer_probe" not in plain


def test_a_cpu_probe_that_fell_back_is_one_warning_naming_its_key(hydra_compose) -> None:
    from flopsweep.probe_fallback import probe_fallback_lines

    made = _predicted(hydra_compose, {"fallback": "a shallow copy ran out of memory", MARK: True})
    assert made["compute_source"] == "flops"
    assert made["source"].endswith("; cpu probe fell back: a shallow copy ran out of memory")
    used = made["source"].split("; cpu probe fell back: ")[0]
    assert probe_fallback_lines(made) == [
        "predict.cpu_probe: the CPU step probe fell back (a shallow copy ran out of memory); "
        f"predicted from: {used}"
    ]
