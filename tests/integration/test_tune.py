"""hydra/sweeper=tune end to end on gloo ranks, its set-ups from ``space.*`` (the plan's space, placed
on two ranks; tests/unit/test_tune.py checks the Hydra-axes form and the crossing of the two): the
pruning (a set-up over the memory budget or refused by the rules never runs and is listed with its
reason), the halving (rounds shrink, survivors get more runs, the budget stops it), the records (each
run an ordinary ok record that the analysis loads and pools), and resume=true. Not which layout wins."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, records, run_sweep

SPACE = (
    "hydra/sweeper=tune",
    "device=cpu",
    "nproc_per_node=2",
    "model=gpt-tiny",
    "steps.warmup=1",
    "steps.measure=2",
    "repeats=2",
    "hydra.sweeper.initial=3",
    "hydra.sweeper.eta=3",
    "hydra.sweeper.finalists=1",
    "hydra.sweeper.memory_gib=0.05",  # gpt-tiny at micro batch 64 is estimated over 90% of it, at 1 under
    "space.backends=[ddp,fsdp]",
    "space.layouts=[dp,tp2]",  # DDP with tp=2: refused by the rules
    "space.checkpointing=[none]",
    "space.micro_batches=[1,64]",
)


def _swept(record: dict) -> tuple:
    c = record["config"]
    return c["model"]["name"], c["backend"]["name"], c["parallel"]["tp"], c["batch"]["micro_batch_size"]


@pytest.mark.slow
def test_tuner_prunes_halves_records_and_resumes(tmp_path: Path):
    sweep = tmp_path / "tune"
    done = run_sweep(sweep, *SPACE)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((sweep / "tune.json").read_text())
    assert (sweep / "tune.md").read_text().startswith("# Tuning")

    # pruning: 8 set-ups; DDP with tp=2 refused (both micro batches), micro batch 64 over memory
    pruned = {u["label"]: u["pruned"] for u in report["setups"] if u["pruned"]}
    assert len(report["setups"]) == 8 and len(pruned) == 5
    ddp_tp = [why for label, why in pruned.items() if "backend=ddp" in label and "parallel.tp=2" in label]
    assert len(ddp_tp) == 2 and all(why.startswith("refused: parallel.tp=2") for why in ddp_tp)
    big = {label: why for label, why in pruned.items() if why not in ddp_tp}
    assert len(big) == 3 and all("batch.micro_batch_size=64" in label for label in big)
    assert all(w.startswith("over memory") and "hydra.sweeper.memory_gib" in w for w in big.values())
    for label in pruned:
        assert f"pruned {label}: " in done.stdout
    recs = records(sweep)
    ran = {_swept(r) for r in recs}
    assert {r[1:] for r in ran} == {("ddp", 1, 1), ("fsdp", 1, 1), ("fsdp", 2, 1)}  # nothing pruned ever ran

    # halving: 3 set-ups measured once, the best one (eta=3, one finalist) up to repeats=2
    assert [(r["round"], r["pool"], r["repeats"], r["jobs"]) for r in report["rounds"]] == [
        (0, 3, 1, 3),
        (1, 1, 2, 1),
    ]
    assert "schedule if no run fails: 3 x 1, 1 x 2 run(s), 4 jobs in 2 rounds;" in done.stdout
    assert (
        "round 0 (1/2): 3 set-ups left, 1 run(s) each, jobs 0-2 (4 in all); 0/3600 rank-s spent"
        in done.stdout
    )
    assert "round 1 (2/2): 1 set-ups left, 2 run(s) each, job 3 (4 in all);" in done.stdout
    # every job's progress line says of how many (it said "job 3 done: ok, 0:38 elapsed")
    progress = [
        line for line in done.stdout.splitlines() if re.match(r"flopsweep: \d+ of \d+ jobs? done", line)
    ]
    assert [line.split(": ")[1] for line in progress] == [
        f"{n + 1} of 4 jobs done (job {n})" for n in range(4)
    ]
    assert all(" left" in line for line in progress)
    assert report["stopped"] == "the finalists are measured"
    winner = report["winner"]
    assert winner["runs"] == 2 and winner["ci_over"] == "repeats" and report["runner_up"]["runs"] == 1
    assert (
        f"winner: {winner['label']}: " in done.stdout
        and f"run the winner: {report['command']}" in done.stdout
    )
    assert report["command"].startswith("flopsweep device=cpu") and "repeat" not in report["command"]
    assert "space." not in report["command"] and " backend=" in report["command"]

    # records: one ordinary ok record per job, the winner's two runs one repeat group
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    assert sorted(r["run"]["repeat"] for r in recs) == [0, 0, 0, 1]
    spent = sum(g for u in report["setups"] for g in u["gpu_s"])
    assert report["spent_gpu_s"] == pytest.approx(spent) and spent > 0
    assert report["rounds"][-1]["spent_gpu_s"] == pytest.approx(spent)
    out = subprocess.run(
        [sys.executable, "-m", "analysis", str(sweep), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out.stdout)
    assert len(rows) == 3 and all(r["status"] == "ok" for r in rows)
    assert sorted(r["repeats"] for r in rows) == [1, 1, 2]
    # the winner's figure and interval are the pooled row's for its two runs (spread.pooled_figure), both
    # ends finite however far two CPU runs are apart (the rate's interval on the log scale: session 33)
    pooled, objective = next(r for r in rows if r["repeats"] == 2), report["objective"]
    assert winner["value"] == pytest.approx(pooled[objective], rel=1e-9, abs=1e-10)
    for end in ("ci_low", "ci_high"):
        theirs = pooled[f"{objective}_{end}"]
        assert theirs is not None and winner[end] == pytest.approx(theirs, rel=1e-9, abs=1e-10)
    assert "nulls" not in winner

    # resume=true with a budget spent by round 0: every job skipped, the budget stops round 1
    budget = report["rounds"][0]["spent_gpu_s"]
    again = run_sweep(sweep, *SPACE, "resume=true", f"hydra.sweeper.budget_gpu_s={budget}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("): skipped, ") == 3 and "): ok, " not in again.stdout  # round 0's
    assert "flopsweep summary: 0 ok, 0 oom, 0 error, 0 invalid" in again.stdout
    cut_short = json.loads((sweep / "tune.json").read_text())
    assert cut_short["stopped"].startswith("budget: round 1 (1 x 2 run(s): 1 job) would cost about")
    assert [r["round"] for r in cut_short["rounds"]] == [0]
    assert cut_short["spent_gpu_s"] == pytest.approx(budget) and budget <= cut_short["budget_gpu_s"]
    assert len(records(sweep)) == 4  # nothing new ran


@pytest.mark.parametrize(
    ("space", "count", "reason"),
    [
        (  # placed, and every set-up refused by the rules, for no layout's fault (single on 2 ranks)
            ("space.backends=[single]", "space.layouts=[dp]"),
            "all 1 dropped; the commonest reason (1 of 1): refused: backend='single': runs at most 1 rank",
            "Fix: set nproc_per_node=1 and nnodes=1, or list ddp or fsdp or deepspeed in space.backends "
            "(space.backends=[single,ddp])",
        ),
    ],
    ids=[
        "refused"
    ],  # placed nowhere, or each layout refused (tp2 off FSDP2): test_tune_*layouts_39.py, exit 2
)
def test_a_space_that_leaves_nothing_to_measure_says_why_in_one_line(tmp_path: Path, space, count, reason):
    """No set-up left after placing and pruning: the commonest reason in one line (as plan=true says
    it), exit status 1, and no job runs."""
    one = ("space.checkpointing=[none]", "space.micro_batches=[1]", "space.precisions=[fp32]")
    done = run_sweep(tmp_path / "t", *SPACE[:4], *space, *one)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"flopsweep: tune: no set-up to measure: {count}") and last.endswith(reason), last
    assert "0 set-ups" not in done.stdout and not records(tmp_path / "t")


@pytest.mark.parametrize("layout", ["tp2", "cp2"])
def test_a_layout_off_fsdp2_is_one_line_with_the_spaces_fixes(tmp_path: Path, layout: str):
    """``space.backends=[ddp]`` with ``tp2`` or ``cp2``: every set-up of the layout refused (#620), one
    ``Invalid config`` line, exit 2, its fixes in the space's lists (was "all 1 dropped", exit 1)."""
    one = ("space.checkpointing=[none]", "space.micro_batches=[1]", "space.precisions=[fp32]")
    done = run_sweep(tmp_path / "t", *SPACE[:4], "space.backends=[ddp]", f"space.layouts=[{layout}]", *one)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"flopsweep: Invalid config: space.layouts=[{layout}]: the rules refuse every"), (
        last
    )
    assert last.endswith(
        "Fix: set space.layouts=[dp], or list fsdp in space.backends (space.backends=[ddp,fsdp])."
    ), last
    assert not records(tmp_path / "t")


def test_a_memory_cap_that_fits_no_set_up_is_the_users_value_in_one_line(tmp_path: Path):
    """Every set-up over ``hydra.sweeper.memory_gib`` (reliability #458): the cap as typed and the least
    set-up's estimate in one ``Invalid config`` line, exit 2, no ``pruned`` lines, no job (``memory_gib=1e-9``
    printed 36 ``pruned`` lines of ``9.31e-10 GiB``, then exit 1)."""
    one = ("space.checkpointing=[none]", "space.micro_batches=[1,2]", "space.precisions=[fp32]")  # two
    cap = ("space.backends=[ddp]", "space.layouts=[dp]", "hydra.sweeper.memory_gib=0.0001")
    done = run_sweep(tmp_path / "t", *SPACE[:4], *cap, *one)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [x for x in done.stderr.strip().splitlines() if x.startswith("flopsweep")]
    assert len(lines) == 1 and "pruned" not in done.stdout + done.stderr
    assert lines[0].startswith(
        "flopsweep: Invalid config: hydra.sweeper.memory_gib=0.0001: fits no set-up"
    ), lines
    fix = r"Fix: set hydra\.sweeper\.memory_gib=[0-9.e-]+ \(keeps \d+ set-ups\), or leave it unset"
    assert re.search(fix, lines[0]), lines
    assert not records(tmp_path / "t")
