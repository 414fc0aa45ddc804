"""The layer probe's replay (``flopsweep.layer_probe.replays``, ``replay_steps``): on a CPU, a layout whose
shapes change from step to step (expert parallel) has each copy stepped untimed first, as many steps as its
timed build can run, so that the timed steps find oneDNN's per-shape kernels built as the run does.
Reliability row 1050 (docs/reliability-14.md); the runs: benchmarks/results/cpu/session43-ep/."""

from __future__ import annotations

import itertools

import pytest

from flopsweep.cpu_probe import SETTLE, STEPS
from flopsweep.degrees import DEGREE_SPECS, SHAPE_VARYING_DEGREES
from flopsweep.layer_probe import LAYER_STEPS, replay_steps, replays, schedule
from flopsweep.probe_schedule import Steps

EP2 = ["model=hf", "model.config=olmoe-tiny", "backend=fsdp", "nproc_per_node=2", "parallel.ep=2"]
"""The session-42 EP 2 set-up (``benchmarks/cpu_predict.py``'s ``ep2``) less its sequence length."""


@pytest.mark.parametrize(
    ("overrides", "device", "want"),
    [
        (EP2, "cpu", True),  # EP 2: +27.6% before, the probe timed the first build's kernel builds
        ([*EP2[:-2], "nproc_per_node=4", "parallel.ep=2"], "cpu", True),  # FSDP 2 x EP 2: +45.2% before
        (EP2, "cuda", False),  # cuBLAS builds no kernel per shape: a GPU's probe is left as it was
        (EP2[:-1], "cpu", False),  # the same MoE model without expert parallel: every step's shapes alike
        # FSDP 2 x TP 2: its shapes repeat, so its first step (never timed) builds every kernel
        (["model=llama-tiny", "backend=fsdp", "nproc_per_node=4", "parallel.tp=2"], "cpu", False),
        (["model=llama-tiny"], "cpu", False),  # the README's first command: its probe as it was
    ],
)
def test_a_cpu_probe_replays_its_copies_only_for_expert_parallel(
    hydra_compose, overrides, device, want
) -> None:
    assert replays(hydra_compose(["device=cpu", *overrides]), device) is want


def test_expert_parallel_is_the_one_degree_whose_shapes_vary_by_step() -> None:
    assert SHAPE_VARYING_DEGREES == ("ep",)
    assert [s.name for s in DEGREE_SPECS if s.varies_shapes] == ["ep"]


def _most_steps(steps: Steps, settle: float) -> int:
    """Steps :func:`schedule` runs a copy whose steps never agree and whose median stays noisy, with no
    budget left to stop it: the most it can run under ``steps``."""
    times = itertools.cycle([0.1, 0.3])  # never within any settle share, never falling
    ran = schedule(
        lambda: (next(times),) * 2,
        settle,
        noisy=lambda timed: True,
        steps=Steps(warmup=steps.warmup, measured=steps.measured, most=steps.most, budget_s=None),
    )[0]
    return len(ran)


@pytest.mark.parametrize(("steps", "settle", "want"), [(STEPS, SETTLE, 8), (LAYER_STEPS, 0.05, 17)])
def test_the_replay_runs_as_many_steps_as_the_timed_build_can(steps, settle, want) -> None:
    assert replay_steps(steps) == want
    assert _most_steps(steps, settle) == want  # every timed step's shapes were met in the replay


def test_a_budget_or_an_early_stop_only_shortens_the_timed_build() -> None:
    steady = schedule(lambda: (0.1, 0.1), SETTLE, steps=STEPS)[0]  # the early stop after 1 + 3 steps
    spent = schedule(lambda: (0.3, 0.3), 0.0, spent=bool, steps=STEPS)[0]  # 0.5 s of steps after the first
    assert (len(steady), len(spent)) == (4, 3)
    assert max(len(steady), len(spent)) <= replay_steps(STEPS)
