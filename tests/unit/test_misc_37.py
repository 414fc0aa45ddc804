"""Session 37: a new user's trial (docs/reliability-7.md #404-#439): a ``repeats=`` past its bound in a
sweep (a traceback), the pool's "too few devices" refusal's exit status, a fractional ``budget.tokens``, a
resume on an unreadable ``multirun.yaml``, a model search's resume log and the tuner's winner below its
runner-up. Each exact here; no subprocess."""

from __future__ import annotations

import pytest

import run
from flopsweep.checks import ConfigError
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.override_multirun import sweep_size_problem
from flopsweep.plan_command_line import _cost_problem

BOUND = "must be one whole number from 1 to 100 (repeats is not a sweep axis). Fix: set repeats=3."


@pytest.mark.parametrize(
    "given",
    [
        ["repeats=20000"],
        ["repeats=1000000"],
        ["repeats=20000", "plan=true"],
        ["seed=0,1", "repeats=20000"],
        ["seed=range(0,6000)", "repeats=1000000"],
    ],
)
def test_a_sweeps_repeats_past_its_bound_is_the_bounds_line_not_a_traceback(given: list[str]) -> None:
    argv = ["-m", "device=cpu", "model=gpt-tiny", *given, "hydra.sweep.dir=x"]
    # was: max() arg is an empty sequence, or "give seed fewer values"
    assert sweep_size_problem(argv) is None
    repeats = next(g for g in given if g.startswith("repeats="))
    assert run.refusal(argv) == f"Invalid config: {repeats}: {BOUND}"


def test_a_sweep_too_big_within_the_repeats_bound_still_names_its_widest_axis() -> None:
    argv = ["-m", "device=cpu", "seed=range(0,5000)", "repeats=3"]
    assert sweep_size_problem(argv) == (
        "Invalid config: seed=range(0,5000): the sweep would run 15000 jobs (5000 x repeats=3), over the "
        "bound of 10000. Fix: give seed fewer values, or split the sweep into parts of at most 10000 jobs "
        "(one hydra.sweep.dir each)."
    )
    assert run.refusal(["-m", "device=cpu", "plan=true", "repeats=5"]).startswith(
        "Invalid config: repeats=5: a plan runs nothing"
    )


def test_the_pools_refusals_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from flopsweep import pool
    from hydra_plugins.flopsweep_pool import refuse

    line = pool.too_big_problem([(-1, 3)], ["0", "1"])
    assert line is not None
    with pytest.raises(SystemExit) as stop:
        refuse(line.replace("job -1 ", "a job of this sweep ", 1))
    assert stop.value.code == 2  # was 1, unlike the pool's other value refusals (#329)
    assert capsys.readouterr().err == (
        "flopsweep: hydra/launcher=pool: a job of this sweep needs 3 devices (nproc_per_node=3); the pool "
        "has 2 (0,1). Fix: give the pool more devices (hydra.launcher.slots), or set nproc_per_node=2 or "
        "fewer\n"
    )


@pytest.mark.parametrize("value", ["0.5", "1.5", "0", "-1", "0.999"])
def test_a_token_budget_is_a_whole_number_of_tokens(value: str) -> None:
    assert run.refusal(["device=cpu", "plan=true", f"budget.tokens={value}"]) == (
        f"Invalid config: budget.tokens={value}: must be a whole number of tokens >= 1. Fix: set e.g. "
        "budget.tokens=15e12, or budget.tokens=null."
    )
    with pytest.raises(ConfigError, match=r"must be a whole number of tokens >= 1"):
        _cost_problem("budget.tokens", float(value))


@pytest.mark.parametrize("value", ["1", "15e12", "1e18", "null"])
def test_a_whole_token_budget_passes(value: str) -> None:
    assert run.refusal(["device=cpu", "plan=true", f"budget.tokens={value}"]) is None


@pytest.mark.parametrize("text", ["garbage: [\n", "", "just words\n", "hydra: 3\n"])
def test_an_unreadable_multirun_yaml_gives_a_fix_that_resumes(tmp_path, text: str) -> None:
    from flopsweep.folders import other_sweep_problem

    (tmp_path / "multirun.yaml").write_text(text)
    line = other_sweep_problem(tmp_path, {"job": {"config_name": "config"}}, resume=True)
    assert line == (
        f"{tmp_path}/multirun.yaml is unreadable (not a sweep's config); resume=true continues only the "
        f"sweep that wrote it. Fix: to keep the jobs' records, restore the file or remove it (rm "
        f"{tmp_path}/multirun.yaml) and resume with the command line that started this sweep (a job whose "
        f"record holds another config is refused), or {another(tmp_path, 'hydra.sweep.dir')}"
    )  # was: "or resume with the command line that started this sweep", refused again the same way
    assert other_sweep_problem(tmp_path, {"job": {"config_name": "config"}}, resume=False) is None


def test_a_resumed_search_says_what_it_drops_and_what_it_reused(caplog) -> None:
    import logging

    from flopsweep.reuse import Machine, Resumed, reusable_probes, reused_line

    here = Machine(device_name="cpu", gpu_memory_bytes=None, world_size=1, hostname="h")
    probes = [
        {"n_layer": "abc", "status": "ok"},
        {"n_layer": 200, "status": "ok"},
        {"n_layer": True, "status": "ok"},
    ]
    record = {
        "status": "error",
        "run": {"id": "r1", "model_search": {"grow": "n_layer", "micro_batch_size": 1, "probes": probes}},
        "system": {"device_name": "cpu", "world_size": 1, "hostname": "h"},
    }
    resumed = Resumed(record=record, name="metrics.error-r1.json")
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        taken = reusable_probes(
            resumed,
            "model_search",
            "n_layer",
            here=here,
            same={"grow": "n_layer", "micro_batch_size": 1},
            what="s",
        )
    assert list(taken) == [200]
    assert caplog.messages == [
        # was: "reusing 1 probe ..., not run again", the "abc" probe dropped without a word
        "s: resume=true: 1 probe of run r1 (metrics.error-r1.json; n_layer 200) can stand in for the sizes "
        "this search reaches",
        "s: resume=true: not reused from run r1: n_layer 'abc' (not a whole number above 0); n_layer True "
        "(not a whole number above 0)",
    ]
    after = {"probes": [{"n_layer": 1, "status": "ok"}, {"n_layer": 9, "status": "ok"}]}
    assert reused_line("s", taken, after, "n_layer") == (
        "s: resume=true: reused 0 probes (n_layer none); not on this search's path, so unused: n_layer 200"
    )
    after["probes"].append({"n_layer": 200, "status": "ok", "reused": True})
    assert reused_line("s", taken, after, "n_layer") == "s: resume=true: reused 1 probe (n_layer 200)"
    assert reused_line("s", {}, after, "n_layer") is None


def test_the_tuner_says_a_runner_up_that_measured_better_and_an_overrun() -> None:
    from flopsweep.tunereport import gpu_time_line, runner_up_note

    win = {"value": 0.5, "runs": 3}
    run_up = {"value": 0.7, "runs": 1}
    s = {
        "winner": win,
        "runner_up": run_up,
        "direction": "maximize",
        "spent_gpu_s": 61.0,
        "budget_gpu_s": 60.0,
    }
    assert runner_up_note(s) == (
        "the runner-up measured higher (0.7 against 0.5, 1 run(s) against 3); the winner is the best of the "
        "last round's set-ups, which the runner-up was not in"
    )  # was: no word
    assert runner_up_note(s | {"direction": "minimize"}) is None
    assert runner_up_note(s | {"runner_up": None}) is None
    assert runner_up_note(s | {"direction": "minimize", "runner_up": {"value": 0.2, "runs": 2}}) == (
        "the runner-up measured lower (0.2 against 0.5, 2 run(s) against 3); the winner is the best of the "
        "last round's set-ups, which the runner-up was not in"
    )
    assert gpu_time_line(s) == "GPU time: 61 of 60 GPU-s, over the budget by 1 GPU-s"
    assert gpu_time_line(s | {"spent_gpu_s": 26.0}) == "GPU time: 26 of 60 GPU-s"
    assert gpu_time_line(s | {"spent_gpu_s": 60.0}) == "GPU time: 60 of 60 GPU-s"
