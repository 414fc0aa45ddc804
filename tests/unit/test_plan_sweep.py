"""A sweep of plans over clusters (session 24's trial: ``-m plan=true model=a,b plan_clusters=[H100:8]``
printed no ranking, its sweep ``plan.csv`` only a header): each job's rows join the sweep's file
(:func:`flopsweep.job.plansweep.append_job`) and one table ranks them all (:func:`sweep_output`); large
money and time figures read right; a ``plan.csv`` that cannot be written is one line, the plan printed
anyway. Jobs are planned in process (:func:`flopsweep.job.plandecide.decide_job`); no process starts."""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import pytest

from flopsweep.job.planfit import unwrapped
from flopsweep.job.planrender import count_figure, exponent, si_figure

SMALL = [
    "plan=true",
    "plan_clusters=[H100:8,H200:16]",
    "space.backends=[fsdp]",
    "space.layouts=[dp,tp2]",
    "space.checkpointing=[none]",
    "space.micro_batches=[1,2]",
    "cost.usd_per_gpu_hour=2",
    "budget.tokens=1e12",
]
MODELS = ("llama3.1-8b", "llama3.2-3b")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, hydra_compose) -> Path:
    """Two jobs of one sweep, one per model, planned into ``<sweep>/0`` and ``<sweep>/1`` as Hydra's
    basic launcher runs them; the sweep's ``plan.csv`` started afresh as the callback starts it."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job
    from flopsweep.job.plantable import start_plan_file

    root = tmp_path_factory.mktemp("sweep")
    start_plan_file(root)
    for job, model in enumerate(MODELS):
        given = [*SMALL, f"model={model}"]
        (root / str(job)).mkdir()
        info = JobInfo(job_dir=str(root / str(job)), overrides=given, job_num=job)
        out = decide_job(hydra_compose(given), info)
        assert out["status"] == "plan" and "unwritten" not in out
    return root / "plan.csv"


def test_a_sweeps_plan_ranks_every_jobs_set_ups_in_one_table(sweep: Path) -> None:
    """One table over both models: ``all`` 1, 2, 3 ... over every job's rows, ``#`` within each cluster,
    one ``*`` per cluster; the jobs told apart by their own overrides; the best of each cluster's
    command carries its job's model; no hint to add what the command already has."""
    from flopsweep.job.plansweep import sweep_output

    text, stderr = sweep_output(sweep, "tokens_per_s_per_device", "table", top=3)
    assert stderr == []  # written, no job invalid
    table = text.split("\n\n")[0].splitlines()
    header, rows = table[0].split(), [line for line in table[1:] if not line.startswith("job ")]
    assert header[:5] == ["#", "all", "cluster", "job", "set-up"] and len(rows) == 6  # 3 per cluster
    assert [int(r.split()[1]) for r in rows] == sorted(int(r.split()[1]) for r in rows)
    assert sum(r.split()[0].endswith("*") for r in rows) == 2
    legend = [line for line in table if line.startswith("job ")]
    assert legend == ["job 0: model=llama3.1-8b", "job 1: model=llama3.2-3b"]
    assert max(map(len, table)) <= 160
    best = {r["cluster"]: MODELS[int(r["job"])] for r in csv.DictReader(sweep.open()) if r["best"] == "True"}
    lines = [line.strip().split(": ", 1) for line in text.splitlines() if line.startswith("  H")]
    assert len(lines) == 2 and all(f" model={best[cluster]} " in command for cluster, command in lines)
    assert all("plan_clusters" not in command for _, command in lines)
    shown = {r.split()[2]: r.split()[3] for r in rows if r.split()[0].endswith("*")}
    assert {c: MODELS[int(j)] for c, j in shown.items()} == best
    assert "plan_clusters=[" not in text  # the hint never suggests what the command does
    assert f"every row of every job: {sweep})" in "\n".join(unwrapped(text))  # a long path wraps (#723)


def test_the_sweeps_plan_csv_holds_every_row_ranked_over_every_job(sweep: Path) -> None:
    """The sweep's ``plan.csv``: each job's rows (its own ``plan.csv`` has them too), ``rank`` 1..n over
    both jobs, ``cluster_rank`` 1..n in each cluster, ``best`` once per cluster, dropped rows last."""
    from flopsweep.job.plansweep import sweep_output

    sweep_output(sweep, "tokens_per_s_per_device", "table")
    rows = list(csv.DictReader(sweep.open()))
    own = [list(csv.DictReader((sweep.parent / str(j) / "plan.csv").open())) for j in (0, 1)]
    assert len(rows) == len(own[0]) + len(own[1]) and {r["job"] for r in rows} == {"0", "1"}
    ranked = [r for r in rows if r["rank"]]
    assert [int(r["rank"]) for r in ranked] == list(range(1, len(ranked) + 1))
    assert all(r["status"] == "ok" for r in ranked) and all(not r["rank"] for r in rows[len(ranked) :])
    speeds = [float(r["predicted_tokens_per_s_per_gpu"]) for r in ranked]
    assert speeds == sorted(speeds, reverse=True)
    for cluster in ("H100:1x8:ib400", "H200:2x8:ib400"):
        mine = [r for r in ranked if r["cluster"] == cluster]
        assert [int(r["cluster_rank"]) for r in mine] == list(range(1, len(mine) + 1))
        assert [r["best"] for r in mine].count("True") == 1 and mine[0]["best"] == "True"
    assert {r["job_overrides"].split()[-1] for r in rows} == {f"model={m}" for m in MODELS}


def test_a_sweeps_plan_prints_csv_and_json_of_every_row(sweep: Path) -> None:
    """``plan_format=csv``: the sweep file's rows; ``json``: the best of each cluster with its job and
    command, every row, the jobs' overrides."""
    from flopsweep.job.plansweep import SWEEP_COLUMNS, sweep_output

    text, _ = sweep_output(sweep, "usd_per_million_tokens", "csv")
    assert text.splitlines()[0] == ",".join(SWEEP_COLUMNS) and text == sweep.read_text().rstrip("\n")
    assert "\r" not in text
    said = json.loads(sweep_output(sweep, "usd_per_million_tokens", "json")[0])
    assert said["better"] == "lower" and set(said["jobs"]) == {"0", "1"}
    assert [b["cluster"] for b in said["best"]] == ["H100:1x8:ib400", "H200:2x8:ib400"]
    assert all(
        b["command"].startswith("flopsweep ") and f"model={MODELS[b['job']]}" in b["command"]
        for b in said["best"]
    )
    assert len(said["rows"]) == len(sweep.read_text().splitlines()) - 1


def test_a_row_reads_back_from_plan_csv_as_it_was() -> None:
    """:func:`flopsweep.job.plansweep.row_of` of a written row gives the row (its set-up, figures, blanks,
    overrides) that the table and the ranking read."""
    from flopsweep.job.plansweep import row_of
    from flopsweep.job.plantable import plan_csv
    from flopsweep.plan_space import COLUMNS, Row
    from flopsweep.space import Setup

    setup = Setup(backend="fsdp", layout="tp2", checkpointing="full", precision="bf16", micro_batch=4)
    row = Row(cluster="H100:1x8:ib400", setup=setup, world_size=8, layout="dp4 tp2", grad_accum=2)
    row.predicted_tokens_per_s_per_gpu, row.budget_usd, row.overrides = 1234.5, 2.72e16, ["-x=1", "b=2"]
    row.reason, row.rank, row.best = "=SUM(A1)", 3, True
    (cells,) = csv.DictReader(plan_csv([row.as_dict()], COLUMNS).splitlines())
    back = row_of(cells)
    assert back == row


@pytest.mark.parametrize(
    ("value", "money", "shown"),
    [
        (2.72e16, True, "$2.72e16"),  # was $2.72e+07B: read as 27 million
        (3.4e12, True, "$3.4T"),
        (4.5e9, False, "4.5B"),
        (1.01e6, True, "$1.01M"),
        (404e3, False, "404k"),
        (0.0679, False, "0.0679"),
        (5e-5, True, "$5e-5"),
        (None, True, ""),
    ],
)
def test_a_figure_reads_its_magnitude_right(value, money: bool, shown: str) -> None:
    assert si_figure(value, money) == shown


def test_days_and_tokens_stay_in_their_column_however_large() -> None:
    """1e18 tokens at a few tokens/s: days of 19 digits were wider than the table."""
    assert (
        count_figure(2106.4) == "2,106"
        and count_figure(1.157e13) == "11.6T"
        and count_figure(3.4e17) == "3.4e17"
    )
    assert exponent(2.72e16) == "2.72e16" and exponent(float("inf")) == "inf"


def test_a_huge_budget_shows_its_dollars_in_the_plan_table(hydra_compose, tmp_path: Path) -> None:
    """``cost.usd_per_gpu_hour=999999 budget.tokens=1e18``: every figure column within its width, the
    dollars as a power of ten."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = [
        *SMALL[:2],
        *SMALL[2:6],
        "cost.usd_per_gpu_hour=999999",
        "budget.tokens=1e18",
        "model=llama3.2-3b",
    ]
    out = decide_job(hydra_compose(given), JobInfo(job_dir=str(tmp_path), overrides=given))
    first = out["plan_text"].splitlines()[1].split()
    budget = next(c for c in first if c.startswith("$") and "e1" in c)
    mantissa, power = budget[1:].split("e")
    row = next(csv.DictReader((tmp_path / "plan.csv").open()))
    assert float(mantissa) * 10 ** int(power) == pytest.approx(float(row["budget_usd"]), rel=5e-3)
    assert max(map(len, out["plan_text"].split("\n\n")[0].splitlines())) <= 160


def test_a_plan_csv_that_cannot_be_written_is_one_line_and_the_plan_prints(
    hydra_compose, tmp_path: Path
) -> None:
    """A folder where ``plan.csv`` goes (as a read-only folder or a full disk, an ``OSError``): the
    table is whole, its last line names no file, and one line says the path, the OS error and the fix."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job
    from flopsweep.job.planprint import plan_output

    (tmp_path / "plan.csv").mkdir()
    given = [*SMALL, "model=llama3.2-3b"]
    out = decide_job(hydra_compose(given), JobInfo(job_dir=str(tmp_path), overrides=given))
    assert out["unwritten"].startswith(f"flopsweep: plan.csv could not be written: {tmp_path / 'plan.csv'} (")
    # a single plan's file is never written over what is there (a folder here): the fix removes it
    assert f"Fix: remove {tmp_path / 'plan.csv'} if it is yours" in out["unwritten"]
    assert "best of each cluster" in out["plan_text"]
    assert out["plan_text"].endswith("(plan: no worker started, no record written)")
    one = "job,model,status\n,gpt-tiny,ok\n"
    table = plan_output(str(tmp_path / "plan.csv"), "table", "H100", text=one)
    assert "gpt-tiny" in table and str(tmp_path) not in table


def test_a_sweep_file_of_other_columns_is_refused_not_mixed(tmp_path: Path) -> None:
    """A job planning one row beside a sweep file of cluster rows (or the other way) would append rows
    of other columns: the append is refused (``OSError``, the line naming the fix); before Hydra, a
    ``plan_clusters`` sweep with ``null`` beside a list is one line."""
    from flopsweep.job.plansweep import SWEEP_COLUMNS
    from flopsweep.job.plantable import append_plan_row
    from flopsweep.plan_command_line import command_line_problem

    path = tmp_path / "plan.csv"
    append_plan_row(path, {"job": 0, "status": "ok"})
    with pytest.raises(OSError, match="holds another plan's columns.*Fix: give every job plan_clusters"):
        append_plan_row(path, [{"job": 1}], SWEEP_COLUMNS)
    assert len(path.read_text().splitlines()) == 2
    line = command_line_problem(["-m", "plan=true", "plan_clusters=null,[H100:8]"])
    assert line.startswith("Invalid config: plan_clusters='null,[H100:8]': sweeps a plan over clusters")


def test_jobs_that_differ_in_a_set_up_key_are_said_to_repeat() -> None:
    """Under ``plan_clusters`` every set-up sets ``backend``: a sweep over it plans one space twice."""
    from flopsweep.job.plansweep import job_labels, setup_keys_swept

    labels = job_labels(
        {0: ["plan=true", "backend=fsdp", "model=x"], 1: ["plan=true", "backend=ddp", "model=x"]}
    )
    assert labels == {0: "backend=fsdp", 1: "backend=ddp"} and setup_keys_swept(labels) == ["backend"]
    assert setup_keys_swept(job_labels({0: ["model.seq_len=1024"], 1: ["model.seq_len=2048"]})) == []


def test_a_planted_sweep_file_is_never_followed_or_waited_on(sweep: Path, tmp_path: Path) -> None:
    """The sweep's ``plan.csv`` read at its end: a link or a FIFO planted there is not followed or waited
    on (``read_regular``); the kind of plan comes from its header alone."""
    import os

    from flopsweep.job.plansweep import is_sweep_file, read_sweep
    from flopsweep.safe_read import RecordError

    assert is_sweep_file(sweep) and not is_sweep_file(tmp_path / "missing.csv")
    fifo, link = tmp_path / "fifo.csv", tmp_path / "link.csv"
    os.mkfifo(fifo)
    link.symlink_to(sweep)
    assert not is_sweep_file(fifo) and not is_sweep_file(link)
    for planted in (fifo, link):
        with pytest.raises(RecordError):
            read_sweep(planted)


def _plan_jobs(root: Path, hydra_compose, jobs: list[list[str]]) -> Path:
    """``jobs`` planned into ``root/0``, ``root/1``, ... as one sweep's (the sweep's ``plan.csv`` started
    afresh, as the callback starts it); the sweep's ``plan.csv``."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job
    from flopsweep.job.plantable import start_plan_file

    start_plan_file(root)
    for job, given in enumerate(jobs):
        (root / str(job)).mkdir()
        decide_job(hydra_compose(given), JobInfo(job_dir=str(root / str(job)), overrides=given, job_num=job))
    return root / "plan.csv"


BAD_PRICE = "Invalid config: cost.usd_per_gpu_hour=1e12: is beyond the bound of 1000000."


def test_a_sweep_over_clusters_counts_and_names_its_invalid_jobs(tmp_path: Path, hydra_compose) -> None:
    """Session 24's trial: ``cost.usd_per_gpu_hour=2,1e12`` planned one job and said "over the set-ups of 1
    job", the other unsaid. Each refused job is one ``invalid`` row of the sweep's ``plan.csv`` (its line in
    ``reason``, no set-up); the table counts the jobs planned, names each invalid job with its line, and the
    stderr line is the one-row plan's (``N of M jobs are invalid ...; job J: ...``) for csv and json, and
    counts them for the table, which names each (session 25: each refusal said once, not in the table and
    again)."""
    from flopsweep.job.plansweep import SWEEP_COLUMNS, sweep_output

    good = [*SMALL[:-2], "model=llama3.2-3b", "cost.usd_per_gpu_hour=2"]
    bad = [*SMALL[:-2], "model=llama3.2-3b", "cost.usd_per_gpu_hour=1e12"]
    sweep = _plan_jobs(tmp_path, hydra_compose, [good, bad])
    said = f"flopsweep: 1 of 2 jobs are invalid (the status and reason columns); job 1: {BAD_PRICE}"

    text, stderr = sweep_output(sweep, "tokens_per_s_per_device", "table")
    text = "\n".join(unwrapped(text))  # the notes wrapped at 160 columns, read whole (#723)
    assert stderr == [
        "flopsweep: 1 of 2 jobs are invalid (the status and reason columns); each one's reason is "
        "printed with the table"
    ]
    assert (text + "\n".join(stderr)).count(BAD_PRICE) == 1
    assert (
        "over the set-ups of 1 job; " in text and "; 1 of 2 jobs are invalid, none of their set-ups" in text
    )
    (named,) = [line for line in unwrapped(text) if "is invalid" in line]
    assert named.startswith(f"job 1 is invalid: {BAD_PRICE} Fix: set cost.usd_per_gpu_hour to at most")
    (counts,) = [line for line in unwrapped(text) if " set-ups: " in line]
    assert "dropped: " in counts and "invalid" not in counts  # a job, not a set-up dropped
    rows = list(csv.DictReader(sweep.open()))
    (refused,) = [r for r in rows if r["job"] == "1"]
    assert refused["status"] == "invalid" and refused["reason"].startswith(BAD_PRICE)
    assert not refused["rank"] and not refused["cluster"] and not refused["backend"]
    assert rows[-1] == refused and all(r["status"] != "invalid" for r in rows[:-1])  # after the dropped

    as_csv, stderr_csv = sweep_output(sweep, "tokens_per_s_per_device", "csv")
    assert (
        len(stderr_csv) == 1 and stderr_csv[0].startswith(said) and stderr_csv[0].endswith("at most 1000000.")
    )
    assert as_csv.splitlines()[0] == ",".join(SWEEP_COLUMNS)
    assert len(as_csv.splitlines()) == len(rows) + 1
    as_json, stderr_json = sweep_output(sweep, "tokens_per_s_per_device", "json")
    out = json.loads(as_json)
    assert (
        stderr_json == stderr_csv
        and set(out["invalid"]) == {"1"}
        and out["invalid"]["1"].startswith(BAD_PRICE)
    )
    assert set(out["jobs"]) == {"0", "1"} and "invalid" not in out["dropped"]


def test_a_sweep_over_clusters_whose_every_job_is_invalid_says_so(tmp_path: Path, hydra_compose) -> None:
    """Every job refused (session 24's trial: ``0 ok, 0 oom, 0 error, 0 invalid, 0 skipped``, no
    ``plan.csv``): the sweep's ``plan.csv`` holds one ``invalid`` row per job; the table says no job was
    planned and names each; the stderr line counts 2 of 2; more than ten invalid jobs are counted, not
    listed one by one."""
    from flopsweep.job.plansweep import MAX_INVALID_SHOWN, sweep_output

    jobs = [
        ["plan=true", "plan_clusters=[H100:8]", f"model={m}", "cost.usd_per_gpu_hour=1e12"] for m in MODELS
    ]
    sweep = _plan_jobs(tmp_path / "two", hydra_compose, jobs)
    rows = list(csv.DictReader(sweep.open()))
    assert [(r["job"], r["status"]) for r in rows] == [("0", "invalid"), ("1", "invalid")]
    text, stderr = sweep_output(sweep, "model_tflops_per_device", "table")
    text = "\n".join(unwrapped(text))  # the notes wrapped at 160 columns, read whole (#723)
    assert (
        unwrapped(text)[0] == "no job was planned: every job of the sweep is invalid (each one's line below)"
    )
    assert "over the set-ups of 0 jobs; " in text and "; 2 of 2 jobs are invalid" in text
    # the header stood alone with nothing under it
    assert "best of each cluster over every job: none (no set-up fits)" in unwrapped(text)
    assert "best of each cluster over every job, the command that runs it:" not in text
    assert [line.split(":")[0] for line in unwrapped(text) if " is invalid: " in line] == [
        "job 0 is invalid",
        "job 1 is invalid",
    ]
    assert stderr == [
        "flopsweep: 2 of 2 jobs are invalid (the status and reason columns); each one's reason is "
        "printed with the table"
    ]
    _, stderr = sweep_output(sweep, "model_tflops_per_device", "json")
    assert stderr[0].startswith(
        f"flopsweep: 2 of 2 jobs are invalid (the status and reason columns); job 0: {BAD_PRICE}"
    )

    many = _plan_jobs(tmp_path / "many", hydra_compose, [jobs[0]] * (MAX_INVALID_SHOWN + 2))
    text, stderr = sweep_output(many, "model_tflops_per_device", "table")
    text = "\n".join(unwrapped(text))  # the notes wrapped at 160 columns, read whole (#723)
    assert sum(" is invalid: " in line for line in unwrapped(text)) == MAX_INVALID_SHOWN
    assert "... and 2 more invalid jobs: the sweep's plan.csv (status, reason)" in text
    assert stderr[0].startswith(
        f"flopsweep: {MAX_INVALID_SHOWN + 2} of {MAX_INVALID_SHOWN + 2} jobs are invalid"
    )


LEFT_NONE = ["plan=true", "plan_clusters=[H100:8]", "space.backends=[fsdp,single]", "space.layouts=[dp]"]
"""Set-ups of one node of 8: ``single`` refused by the rules, FSDP2 ``dp`` with and without checkpointing."""


def test_a_sweep_names_each_job_that_has_no_set_up_left(tmp_path: Path, hydra_compose) -> None:
    """Session 25's trial: a job of ``-m`` whose every set-up was dropped (``model=llama3.1-70b`` on one node
    of 8 H100s, ``space.checkpointing=[none]``: over memory; ``single`` refused) showed only in the dropped
    counts, as if it had produced nothing; a job whose space places nothing on its cluster (``hsdp`` on one
    node) was not in the sweep's file at all. Each is now one ``no set-up left`` row of the sweep's
    ``plan.csv`` (its line in ``reason``) and one line below the table with its own overrides, the top
    dropped counts and the fix (more GPUs, checked: it fits there), counted beside the invalid jobs, on
    stderr as they are (exit 0); ``plan_format=json`` holds them under ``nothing``. Since #457 the job whose
    space no cluster places is an invalid job (one ``Invalid config`` line)."""
    from flopsweep.job.plansweep import sweep_output
    from flopsweep.job.plantable import NO_SET_UP_LEFT

    ok = [*LEFT_NONE, "model=llama3.2-1b", "space.checkpointing=[none]"]
    heavy = [*LEFT_NONE, "model=llama3.1-70b", "space.checkpointing=[none]"]
    unplaced = [*LEFT_NONE, "model=llama3.2-1b", "space.checkpointing=[none]", "space.layouts=[hsdp]"]
    sweep = _plan_jobs(tmp_path, hydra_compose, [ok, heavy, unplaced])
    rows = list(csv.DictReader(sweep.open()))
    own = [(r["job"], r["status"]) for r in rows if not r["backend"]]
    assert own == [("1", NO_SET_UP_LEFT), ("2", "invalid")]  # #457: a space no cluster places is refused

    text, stderr = sweep_output(sweep, "model_tflops_per_device", "table")
    text = "\n".join(unwrapped(text))  # the notes wrapped at 160 columns, read whole (#723)
    rows = list(csv.DictReader(sweep.open()))  # rewritten: ranked, dropped, then each job's own row
    assert {r["job"] for r in rows if not r["backend"]} == {"1", "2"}
    lines = [line for line in unwrapped(text) if " has no set-up left: " in line]
    lines += [line for line in unwrapped(text) if " is invalid: " in line]
    assert len(lines) == 2
    assert lines[0].startswith(
        "job 1 (model=llama3.1-70b) has no set-up left: all 10 dropped (over memory 5, refused: backend 5), "
        "5 refused by the rules; among the 5 they accept, the commonest reason (5 of 5): over memory (the "
        "least: estimated "
    ), lines[0]
    bigger = lines[0].split("plan_clusters=[")[1].split("]")[0]
    assert bigger.startswith("H100:") and bigger != "H100:1x8:ib400"  # more GPUs, where the least one fits
    assert "job 2" in lines[1] and " is invalid: " in lines[1]
    assert "space.layouts=[hsdp]: no cluster of plan_clusters places any of its layouts" in lines[1]
    assert "hsdp needs several nodes" in lines[1] and "Fix: set space.layouts=[dp," in lines[1]
    assert (
        "over the set-ups of 2 jobs; " in text
        and "; 1 of 3 jobs are invalid, none of their set-ups planned; 1 of 3 jobs have no set-up left, each "
        "named below"
        in text
    )
    (counts,) = [line for line in unwrapped(text) if " set-ups: " in line]
    assert NO_SET_UP_LEFT not in counts and counts.startswith("20 set-ups: ")  # the jobs' rows, not their own
    assert stderr == [
        "flopsweep: 1 of 3 jobs are invalid (the status and reason columns); each one's reason is printed "
        "with the table",
        'flopsweep: 1 of 3 jobs have no set-up left (status "no set-up left"); each one\'s reasons and fix '
        "are printed with the table",
    ]

    as_json, stderr_json = sweep_output(sweep, "model_tflops_per_device", "json")
    out = json.loads(as_json)
    assert set(out["nothing"]) == {"1"} and out["nothing"]["1"].startswith("all 10 dropped (")
    assert set(out["invalid"]) == {"2"} and NO_SET_UP_LEFT not in out["dropped"]
    assert stderr_json[1].startswith(
        'flopsweep: 1 of 3 jobs have no set-up left (status "no set-up left"); job 1 (model=llama3.1-70b): '
        "all 10 dropped ("
    )

    every = [["plan=true", "plan_clusters=[H100:8]", "space.layouts=[hsdp]", f"model={m}"] for m in MODELS]
    text, _ = sweep_output(_plan_jobs(tmp_path / "all", hydra_compose, every), "mfu", "table")
    text = "\n".join(unwrapped(text))  # the notes wrapped at 160 columns, read whole (#723)
    assert (
        unwrapped(text)[0] == "no job was planned: every job of the sweep is invalid (each one's line below)"
    )


def test_a_plan_jobs_progress_line_says_what_it_came_to(tmp_path: Path, hydra_compose, capsys) -> None:
    """Session 25's trial: a plan sweep's ``flopsweep: 1 of 1 job done (job 0), ...`` said nothing of the
    job (a plan writes no record, whose status a run's line shows). The job keeps its outcome as it ends;
    the progress line says it: ``ok, N ranked, M dropped``, ``no set-up left (<top dropped counts>)``,
    ``invalid: KEY=VALUE: why. Fix: ...`` (its whole line, cut at a word to the line's bound); the one-row
    plan's ``ok``, ``ok, does not fit``, ``invalid: KEY=VALUE: ...``."""
    from flopsweep.callbacks import SweepSummary
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job
    from flopsweep.job.planoutcome import OUTCOMES, note_outcome, plan_outcome

    jobs = {
        "ok": [*LEFT_NONE, "model=llama3.2-1b", "space.checkpointing=[none]"],
        "heavy": [*LEFT_NONE, "model=llama3.1-70b", "space.checkpointing=[none]"],
        "price": [*LEFT_NONE, "model=llama3.2-1b", "cost.usd_per_gpu_hour=1e12"],
    }
    said = {}
    for job, (name, given) in enumerate(jobs.items()):
        folder = tmp_path / name
        folder.mkdir()
        record = decide_job(hydra_compose(given), JobInfo(job_dir=str(folder), overrides=given, job_num=job))
        said[name] = plan_outcome(record)
        note_outcome(str(folder), record)
    price = said.pop("price")  # the whole line (docs/reliability-4.md #284): it was the KEY=VALUE alone
    assert price.startswith("invalid: " + BAD_PRICE.removeprefix("Invalid config: ")) and "Fix: " in price
    assert said == {
        "ok": "ok, 4 ranked, 6 dropped",
        "heavy": "no set-up left (over memory 5, refused: backend 5)",
    }

    summary = SweepSummary()
    summary.started, summary.pid, summary.total = time.monotonic(), os.getpid(), 3
    capsys.readouterr()
    for num, name in enumerate(jobs):
        summary.job_done(tmp_path / name, num=num)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("flopsweep: 1 of 3 jobs done (job 0): ok, 4 ranked, 6 dropped, ")
    assert lines[1].startswith(
        "flopsweep: 2 of 3 jobs done (job 1): no set-up left (over memory 5, refused: backend 5), "
    )
    assert lines[2].startswith("flopsweep: 3 of 3 jobs done (job 2): invalid: cost.usd_per_gpu_hour=1e12: ")
    assert OUTCOMES == {}  # each taken once
    summary.job_done(tmp_path / "ok")  # none kept: no status, as a run whose record is missing
    assert capsys.readouterr().out.startswith("flopsweep: 4 jobs done, ")

    assert plan_outcome({"status": "plan", "plan": {"status": "ok", "fits": False}}) == "ok, does not fit"
    assert plan_outcome({"status": "plan", "plan": {"status": "ok", "fits": True}}) == "ok"
    refused = {"status": "invalid", "reason": "Invalid config: parallel.tp=2: tensor parallelism ... Fix: x"}
    assert (
        plan_outcome({"status": "plan", "plan": refused})
        == "invalid: parallel.tp=2: tensor parallelism ... Fix: x"
    )
    assert plan_outcome({"status": "ok"}) is None


def test_a_single_plan_of_no_placed_set_up_is_refused_in_one_line(tmp_path: Path, hydra_compose) -> None:
    """``plan_clusters=[H100:8] space.layouts=[hsdp]`` (no ``-m``): the table's count line said ``0 set-ups
    ... dropped: none; 90 set-ups of the space left out`` above a last line of "all 90 dropped", exit 1. The
    job's own check (a space from a file or an interpolation: the command line's is refused before Hydra)
    now refuses it in one line, no table and no ``plan.csv`` (#457)."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["plan=true", "plan_clusters=[H100:8]", "model=llama3.2-1b", "space.layouts=[hsdp]"]
    out = decide_job(hydra_compose(given), JobInfo(job_dir=str(tmp_path), overrides=given))
    assert out["status"] == "invalid" and "plan_text" not in out
    assert out["error"]["message"] == (
        "Invalid config: space.layouts=[hsdp]: no cluster of plan_clusters places any of its layouts (on "
        "H100:1x8:ib400, hsdp needs several nodes). Fix: set space.layouts=[dp,tp2,tp4,tp8]."
    )
    assert not (tmp_path / "plan.csv").exists()


def test_a_plan_where_nothing_fits_says_none_under_best_and_the_legend_explains_the_set_up(
    hydra_compose, tmp_path: Path
) -> None:
    """Every set-up over memory (a headroom no set-up leaves): the "best of each cluster" header stood
    alone; the set-up column's ``-`` (no activation checkpointing) was explained nowhere."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job
    from flopsweep.job.planrender import SETUP_LEGEND

    given = [*SMALL, "model=llama3.1-8b", "space.min_headroom=0.99"]
    out = decide_job(hydra_compose(given), JobInfo(job_dir=str(tmp_path), overrides=given))
    lines = unwrapped(out["plan_text"])  # its notes wrapped at 160 columns, read whole (#723)
    assert "best of each cluster: none (no set-up fits)" in lines, out["plan_text"]
    assert "best of each cluster, the command that runs it:" not in lines
    assert SETUP_LEGEND in lines and "(- none, sel selective, full)" in SETUP_LEGEND
    fits = decide_job(
        hydra_compose([*SMALL, "model=llama3.2-3b"]), JobInfo(job_dir=str(tmp_path / "b"), overrides=[])
    )
    shown = unwrapped(fits["plan_text"])
    at = shown.index("best of each cluster, the command that runs it:")
    assert shown[at + 1].startswith("  H100") and SETUP_LEGEND in shown
