"""Session 40: the tuner on a machine without a GPU (docs/reliability-11.md #783 a tuning meant for GPUs,
refused once with the plan of its space as the fix; #784 the blank ``predicted`` cells said with why).
Real Hydra compositions of ``conf/`` through Hydra's config loader, the machine given as an
:class:`flopsweep.plan.Environment`; no rank, no subprocess."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import config_loader
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from flopsweep import tunereport
from flopsweep.plan import Environment
from flopsweep.tune import Budget, Candidate, predicted_reason
from hydra_plugins.flopsweep_tune.no_gpu import no_gpu_line, plan_command
from run import refusal

CONF = Path(__file__).resolve().parents[2] / "conf"
GIB = 2**30
NO_GPU = Environment(cpu_count=2, host_memory_bytes=1024 * GIB)
CPU_SOURCE = (
    "no prediction: predict.calibration=null: uncalibrated, and no GEMM rate is known (no GPU probe, no "
    "datasheet). Fix: give predict.calibration=PATH (a one-GPU record of the same set-up), or set "
    "plan_gpu=NAME for its datasheet peak (e.g. set plan_gpu=H100)"
)
"""The judged row's reason of a CPU set-up before round 0 (``Candidate.source``), as the tuner got it."""


def _ran(i: int, label: str, value: float, source: str = CPU_SOURCE, predicted: float | None = None):
    c = Candidate(
        i, (label, "device=cpu"), label, objective="tokens_per_s", source=source, predicted=predicted
    )
    c.values, c.steps, c.gpu_s = [value], [1 / value], [10.0]
    return c


def _summary(candidates: list[Candidate]) -> dict:
    return tunereport.summary(
        candidates, candidates[:1], objective="tokens_per_s", direction="maximize",
        budget=Budget(100.0, spent_s=30.0), rounds=[], stopped="the finalists are measured",
    )  # fmt: skip


def test_each_blank_predicted_cell_is_said_with_why() -> None:
    """Was: every CPU run of round 0 showed a blank ``predicted`` cell, unexplained. Now one line when the
    blanks share their why, else one per set-up; ``tune.json``'s ``predicted_blank``."""
    said = (
        "predicted blank for 2 set-ups: no prediction before round 0 (predict.calibration=null: "
        "uncalibrated, and no GEMM rate is known (no GPU probe, no datasheet)): round 0 measured in the "
        "space's order"
    )
    s = _summary([_ran(0, "m=1", 9.0), _ran(1, "m=2", 8.0), _ran(2, "m=4", 7.0, predicted=6.5)])
    json.dumps(s, allow_nan=False)
    assert f"  {said}" in tunereport.lines(s)
    assert f"- {said}" in tunereport.markdown(s)
    by = {u["label"]: u["predicted_blank"] for u in s["setups"]}
    assert by["m=4"] is None and by["m=1"] == predicted_reason(CPU_SOURCE) == said.split(": ", 1)[1]
    mixed = _summary([_ran(0, "m=1", 9.0), _ran(1, "m=2", 8.0, source="no prediction: no record")])
    assert [line for line in tunereport.lines(mixed) if "predicted blank" in line] == [
        "  predicted blank for m=1: " + predicted_reason(CPU_SOURCE),
        "  predicted blank for m=2: no prediction before round 0 (no record): round 0 measured in the "
        "space's order",
    ]


loader = pytest.fixture(scope="module", name="loader")(config_loader)


def _judging(loader, task: list[str]) -> SimpleNamespace:
    """What the tuner's judge has (``Judging``): its sweep's config, the GPUs nvidia-smi lists (none), the
    machine's nodes, and each set-up composed as its job would be (``Judging.compose``)."""
    master = loader.load_configuration("config", task, run_mode=RunMode.MULTIRUN)

    def compose(overrides):
        cfg = loader.load_sweep_config(master, list(overrides))
        choices = {k: str(v) for k, v in cfg.hydra.runtime.choices.items() if v is not None}
        with open_dict(cfg):
            del cfg["hydra"]
        return OmegaConf.to_object(cfg), choices

    return SimpleNamespace(s=SimpleNamespace(config=master), gpus=[], nodes=(1, 1), compose=compose)


def test_a_tuning_meant_for_gpus_is_refused_once_with_the_plan_of_its_space_accepted_typed_back(
    loader,
) -> None:
    """Was: each set-up's job refused (``... Fix: run it on a GPU machine, or add plan=true ...``), whose
    ``plan=true`` the tuner refuses. Now one line before any job; its plan, typed back, passes every check
    before Hydra (``run.refusal``)."""
    task = ["hydra/sweeper=tune", "device=cuda", "model=gpt-1.3b", "space.micro_batches=[1,2]", "repeats=3"]
    judging = _judging(loader, task)
    alive = [SimpleNamespace(overrides=(*task[1:3], f"batch.micro_batch_size={m}")) for m in (1, 2)]
    line = no_gpu_line(judging, alive, NO_GPU, free=16 * GIB)
    assert line is not None and "\n" not in line
    assert line.startswith(
        "Invalid config: device='cuda': no CUDA GPU is visible (each of the tuning's 2 set-ups sets it), and "
        "device=cpu is refused too (set-up 0: on the CPU 1 rank needs about"
    )
    command = (
        "flopsweep device=cuda model=gpt-1.3b 'space.micro_batches=[1,2]' plan=true 'plan_clusters=[H100:1]'"
    )
    assert line.endswith(
        f"this tuning is meant for GPUs. Fix: run the tuning on a GPU machine, or rank the same set-ups here "
        f"without a GPU: {command}."
    )
    assert refusal(shlex.split(command)[1:]) is None
    tiny = _judging(
        loader, ["hydra/sweeper=tune", "device=cuda", "model=gpt-tiny", "space.micro_batches=[1,2]"]
    )
    small = [
        SimpleNamespace(overrides=("device=cuda", "model=gpt-tiny", f"batch.micro_batch_size={m}"))
        for m in (1, 2)
    ]
    assert no_gpu_line(tiny, small, NO_GPU, free=16 * GIB).endswith(
        "Fix: run the tuning on a GPU machine, or set device=cpu."
    )


def test_the_plan_is_offered_only_for_a_space_and_where_the_plans_checks_accept_it() -> None:
    assert plan_command(["device=cuda", "backend=ddp,fsdp"], (1, 1)) is None  # Hydra's axes: no space
    assert plan_command(["space.micro_batches=[1,2]", "model=gpt-tiny,gpt-125m"], (1, 1)) is None
    assert plan_command(["space.micro_batches=[1,2]", "hydra.sweeper.budget_gpu_s=60"], (2, 4)) == (
        "flopsweep 'space.micro_batches=[1,2]' plan=true 'plan_clusters=[H100:2x4]'"
    )
    assert plan_command(["space.micro_batches=[1,2]", "plan_format=nope"], (1, 1)) is None
