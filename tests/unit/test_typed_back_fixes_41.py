"""Session 41's fixes that are typed back (docs/reliability-13.md rows 940-944): the folder key a refusal
names is the command's own (#940), the plan's host-memory footnote (#941), a fullwidth digit for an
integer key (#942), the words of a SIGKILLed job's skip (#943) and the note of a backends sweep on one
CPU rank (#944)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _record(path: Path, overrides: list[str]) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"run": {"overrides": overrides}}))


@pytest.mark.parametrize(
    ("argv", "key"), [(["device=cpu"], "hydra.run.dir"), (["-m", "device=cpu"], "hydra.sweep.dir")]
)
def test_another_run_s_record_names_this_command_s_folder_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], key: str
) -> None:
    """#940: resume=true into another run's folder: a single run's fix names hydra.run.dir, a sweep's
    hydra.sweep.dir, and the folder it names is accepted (no record there, nothing refused)."""
    from flopsweep import free_folder
    from flopsweep.job.resume import other_run_problem

    monkeypatch.setattr(free_folder, "COMMAND", [tuple(argv)])  # run.py's command_started
    _record(tmp_path / "x" / "metrics.json", ["device=cpu", "steps.measure=30"])
    line = other_run_problem(tmp_path / "x" / "metrics.json", ["device=cpu", "steps.measure=31"])
    assert line is not None and line.endswith(f"Fix: choose another {key}, e.g. {key}={tmp_path / 'x'}-2"), (
        line
    )
    assert "single run" not in line
    assert other_run_problem(tmp_path / "x-2" / "metrics.json", ["device=cpu", "steps.measure=31"]) is None


def test_the_plan_s_no_gemm_rate_fix_on_the_cpu_drops_device_cpu_and_is_accepted(hydra_compose) -> None:
    """#941: ``plan=true batch=auto device=cpu``'s footnote names ``drop device=cpu and set plan_gpu=H100``;
    that command passes the rules, where ``device=cpu plan_gpu=H100`` (the old fix typed back) is refused."""
    from flopsweep import rules
    from flopsweep.compute_time import compute_uncalibrated
    from flopsweep.config import ConfigError
    from flopsweep.forecast import workload
    from flopsweep.layout import Layout
    from flopsweep.workload import PredictionError

    typed = ["plan=true", "batch.micro_batch_size=4", "device=cpu"]
    cfg = hydra_compose(typed)
    target = workload(cfg, Layout.resolve(cfg.parallel, 1))
    with pytest.raises(PredictionError) as cpu:
        compute_uncalibrated(target, gemm_tflops=None, gpu="H100", device="cpu")
    assert str(cpu.value).endswith(
        "or drop device=cpu and set plan_gpu=NAME for its datasheet peak "
        "(e.g. drop device=cpu and set plan_gpu=H100)"
    ), str(cpu.value)
    with pytest.raises(
        PredictionError, match=r"or set plan_gpu=NAME for its datasheet peak \(e\.g\. set plan_gpu=H100\)$"
    ):
        compute_uncalibrated(target, gemm_tflops=None, gpu="H100", device="auto")
    with pytest.raises(ConfigError, match="drop device=cpu"):
        rules.check(hydra_compose([*typed, "plan_gpu=H100"]))
    rules.check(hydra_compose([*typed[:-1], "plan_gpu=H100"]))  # the fix as written: accepted


@pytest.mark.parametrize("value", ["２", '"２"', "٢"])
def test_a_foreign_digit_for_nproc_per_node_is_fixed_with_the_ascii_value(value: str) -> None:
    """#942: ``nproc_per_node=２`` (a key held as text that takes a whole number) gets the value in digits
    0-9, as ``steps.measure=２`` does, not the grammar's ``'nproc_per_node="２"'``; the fix typed back is
    accepted before Hydra (``run.refusal``)."""
    from run import refusal

    line = refusal(["device=cpu", "backend=ddp", f"nproc_per_node={value}"])
    assert line is not None and line.endswith("Fix: write nproc_per_node=2."), line
    assert "quote" not in line and "nproc_per_node takes a count of ranks (or auto) in digits 0-9" in line
    assert refusal(["device=cpu", "backend=ddp", "nproc_per_node=2"]) is None
    steps = refusal(["device=cpu", "steps.measure=２"])
    assert steps is not None and steps.endswith("Fix: write steps.measure=2."), steps


def test_a_sigkilled_job_s_line_says_what_the_record_knows(tmp_path: Path) -> None:
    """#943: a record of a rank ended by SIGKILL cannot tell the OOM killer from a user's ``kill -9``: the
    line names the rank and the signal, says both causes read the same, states the repeat only as a
    condition, and keeps the fix (a single run's folder key: ``hydra.run.dir``)."""
    from flopsweep.job.killed_rounds import kept_on_resume

    config = {"repeats": 1, "model": "gpt-tiny", "device": "cpu"}
    message = "rank 1 was killed by SIGKILL (often the kernel's OOM killer: check host memory)"
    path = tmp_path / "x" / "metrics.json"
    path.parent.mkdir()
    record = {"status": "error", "config": config, "error": {"type": "WorkerKilled", "message": message}}
    path.write_text(json.dumps(record))
    kept = kept_on_resume(path, config)
    assert kept is not None and kept[1] is not None
    line = kept[1]
    assert (
        "its rank 1 was killed by SIGKILL (often the kernel's OOM killer: check host memory; a kill -9 "
        in line
    )
    assert (
        "the record cannot tell them apart); if it was the OOM killer, the same set-up here meets it" in line
    )
    assert "would be killed again" not in line
    assert "Fix: run a smaller model or batch.micro_batch_size in a new hydra.run.dir (plan=true" in line
    assert line.endswith(f"rm -r {tmp_path / 'x'} and resume=true again")


BACKENDS = ["single", "ddp", "fsdp", "zero1", "zero2", "zero3"]
SWEEP = {"plan": False, "nnodes": 1, "nproc_per_node": "auto", "device": "cpu"}


def test_a_backends_sweep_of_one_cpu_rank_each_gets_one_note() -> None:
    """#944: ``-m +sweep=backends device=cpu`` (nproc_per_node=auto: 1 CPU rank each) gets a note naming the
    distributed backends and ``nproc_per_node=2``; two ranks, a GPU, a plan or one backend get none."""
    from flopsweep.one_rank_sweep import one_rank_note

    said = [{"backend": b, "device": "cpu", "model": "gpt-tiny"} for b in BACKENDS]
    assert one_rank_note(said, SWEEP, lambda: True) == (
        "flopsweep: note: every job of this sweep runs on 1 rank on the CPU (nproc_per_node=auto is 1 "
        "there), so backend=ddp,fsdp,zero1,zero2,zero3 compare no all-reduce or sharding; to compare them, "
        "add nproc_per_node=2 (2 CPU ranks over gloo) (backend=single runs one rank only and is then "
        "refused on its own)"
    )
    two = [{**s, "nproc_per_node": "2"} for s in said]
    assert one_rank_note(two, SWEEP, lambda: True) is None  # the note's fix: no note
    assert one_rank_note(said, {**SWEEP, "plan": True}, lambda: True) is None
    auto = [{"backend": b} for b in BACKENDS]
    assert one_rank_note(auto, {**SWEEP, "device": "auto"}, lambda: False) is None  # a GPU here
    assert one_rank_note(auto, {**SWEEP, "device": "auto"}, lambda: True) is not None  # none here: the CPU
    assert one_rank_note([{"backend": "single"}, {"backend": "single"}], SWEEP, lambda: True) is None
    assert one_rank_note([{"seed": "1"}, {"seed": "2"}], SWEEP, lambda: True) is None


def test_the_note_s_fix_is_accepted_for_the_distributed_backends(hydra_compose) -> None:
    """``nproc_per_node=2`` with each distributed backend on the CPU passes the launch's checks (2 ranks)."""
    from flopsweep.plan import Environment, plan

    env = Environment(cpu_count=8, host_memory_bytes=64 * 2**30)
    for backend in BACKENDS[1:]:
        cfg = hydra_compose([f"backend={backend}", "device=cpu", "model=gpt-tiny", "nproc_per_node=2"])
        assert plan(cfg, env).layout.world_size == 2
