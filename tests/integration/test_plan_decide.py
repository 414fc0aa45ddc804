"""``python run.py plan=true plan_clusters=[...]`` as a user runs it (issue 42): one ranked table of at
most 160 columns, ``plan.csv`` with rank, dollars and days, ``plan_format=json`` on stdout, a bad
cluster name refused in one line, and no torch imported for a space without DeepSpeed."""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from flopsweep.job.planfit import unwrapped

ARGS = [
    "plan=true",
    "model=llama3.1-8b",
    "cost.usd_per_gpu_hour=2.5",
    "budget.tokens=15e12",
    "plan_clusters=[H100:8,H200:16]",
    "space.backends=[fsdp,ddp]",
    "space.layouts=[dp,hsdp,tp2]",
    "space.micro_batches=[2,4]",
]

_MAIN = """
import atexit, runpy, sys
atexit.register(lambda: print("torch imported:", "torch" in sys.modules, file=sys.stderr))
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


def _with(args, extra) -> list[str]:
    """``args`` with ``extra`` in place of the keys it gives: a key given twice is refused before Hydra."""
    given = {e.partition("=")[0] for e in extra}
    return [a for a in args if a.partition("=")[0] not in given] + list(extra)


def _run(tmp_path: Path, *extra: str):
    import subprocess

    return subprocess.run(
        [sys.executable, "-c", _MAIN, *_with(ARGS, extra), f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_plan_that_decides_end_to_end(tmp_path: Path) -> None:
    proc = _run(tmp_path / "table", "objective=usd_per_million_tokens")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch imported: False" in proc.stderr
    table = proc.stdout.split("\n\n")[0].splitlines()
    assert max(map(len, table)) <= 160 and table[0].split()[:4] == ["#", "all", "cluster", "set-up"]
    assert sum("*" in line.split()[0] for line in table[1:]) == 2  # the best of each cluster
    assert "H200:2x8:ib400: flopsweep " in proc.stdout and "plan: H200:2x8:ib400 done (2/2" in proc.stderr
    rows = list(csv.DictReader((tmp_path / "table" / "plan.csv").open()))
    first = rows[0]
    assert first["rank"] == "1" and float(first["budget_usd"]) > 0
    best = [r for r in rows if r["best"] == "True"]
    assert sorted(r["cluster"] for r in best) == ["H100:1x8:ib400", "H200:2x8:ib400"]  # one per cluster
    top = next(r for r in best if r["cluster"] == first["cluster"])
    # the first row is its cluster's best unless it is at the memory edge and a row off it is within 5%
    assert top is first or (first["memory_edge"] == "True" and top["memory_edge"] == "False"), (first, top)
    assert float(first["budget_days"]) == pytest.approx(
        15e12 / float(first["predicted_tokens_per_s"]) / 86400
    )

    as_json = _run(tmp_path / "json", "plan_format=json")
    assert as_json.returncode == 0, as_json.stderr[-3000:]
    out = json.loads(as_json.stdout)
    assert out["rows"][0]["rank"] == 1 and {b["cluster"] for b in out["best"]} == {
        "H100:1x8:ib400",
        "H200:2x8:ib400",
    }

    bad = _run(tmp_path / "bad", "plan_clusters=[H100:8,B300:8]")
    assert bad.returncode == 2 and not bad.stdout
    (line,) = [x for x in bad.stderr.splitlines() if x.startswith("flopsweep:")]
    assert line.startswith("flopsweep: Invalid config: plan_clusters='B300:8': ")


@pytest.mark.slow
def test_a_sweep_of_plans_over_clusters_prints_one_ranking_of_every_job(tmp_path: Path) -> None:
    """``-m plan=true model=A,B plan_clusters=[H100:8]`` (session 24's trial: progress lines and a hint to
    add ``plan_clusters``, the sweep's ``plan.csv`` a header alone, the jobs' ``run.log`` empty): one table
    of both models' set-ups ranked together, the cluster's best marked once with the command that runs it,
    no hint; the sweep's ``plan.csv`` holds every row of both jobs; each job's ``run.log`` its own table.
    Two jobs of a price out of range (``cost.usd_per_gpu_hour=2,1e12``; the trial's table said "over the
    set-ups of 1 job", the other job unsaid; given through an interpolation here, which only the job resolves:
    the typed ``1e12`` is refused before Hydra): counted and named, each with its line, in the table, in the
    sweep's ``plan.csv`` (``invalid`` rows), counted on stderr; each job's line once (session 25: it was
    also said as the job ended, and again on stderr); exit 0. A 70B job whose every set-up is over memory
    (session 25: it showed only in the dropped counts): one ``no set-up left`` row and one line with its fix,
    counted on stderr; each job's progress line says what it came to."""
    from helpers import run_py

    sweep = tmp_path / "S"
    proc = run_py(
        "-m",
        "plan=true",
        "model=llama3.1-8b,llama3.2-3b,llama3.1-70b",
        "plan_clusters=[H100:8]",
        "cost.usd_per_gpu_hour=2,${oc.env:FLOPSWEEP_TEST_PRICE}",
        "budget.tokens=1e12",
        "objective=usd_per_million_tokens",
        "space.backends=[fsdp]",
        "space.layouts=[dp,tp2]",
        "space.checkpointing=[none]",
        f"hydra.sweep.dir={sweep}",
        timeout=300,
        env={"FLOPSWEEP_TEST_PRICE": "1e12"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc.stdout = "\n".join(unwrapped(proc.stdout)) + "\n"  # the notes wrapped at 160 columns, whole (#723)
    table = proc.stdout[proc.stdout.index("   #   all  cluster") :].split("\n\n")[0].splitlines()
    assert table[0].split()[:5] == ["#", "all", "cluster", "job", "set-up"]
    rows = [line.split() for line in table[1:] if not line.startswith("job ")]
    assert len(rows) == 5 and [r[0] for r in rows] == ["1*", "2", "3", "4", "5"]
    assert {r[3] for r in rows} <= {"0", "2"} and table[-2:] == [  # jobs 1 and 3: the price refused
        "job 0: model=llama3.1-8b",
        "job 2: model=llama3.2-3b",
    ]
    written = list(csv.DictReader((sweep / "plan.csv").open()))
    own = [len((sweep / str(j) / "plan.csv").read_text().splitlines()) - 1 for j in (0, 2, 4)]
    assert len(written) == sum(own) + 4 and {r["job"] for r in written} == {"0", "1", "2", "3", "4", "5"}
    refused = "Invalid config: cost.usd_per_gpu_hour=1e12: is beyond the bound of 1000000."
    invalid = [(r["job"], r["status"], r["reason"].split(" Fix:")[0]) for r in written if not r["backend"]]
    assert [x for x in invalid if x[1] == "invalid"] == [(j, "invalid", refused) for j in ("1", "3", "5")]
    assert [x[:2] for x in invalid if x[1] != "invalid"] == [("4", "no set-up left")]
    assert "over the set-ups of 3 jobs; " in proc.stdout and "; 3 of 6 jobs are invalid, none" in proc.stdout
    assert "; 1 of 6 jobs have no set-up left, each named below" in proc.stdout
    assert [x.split(" Fix:")[0] for x in proc.stdout.splitlines() if " is invalid: " in x] == [
        f"job {j} is invalid: {refused}" for j in (1, 3, 5)
    ]
    (left,) = [x for x in proc.stdout.splitlines() if " has no set-up left: " in x]
    assert left.startswith("job 4 (model=llama3.1-70b) has no set-up left: all ") and " over memory " in left
    assert "Fix: name more GPUs in plan_clusters: " in left
    assert proc.stderr.strip().splitlines()[-2:] == [
        "flopsweep: 3 of 6 jobs are invalid (the status and reason columns); each one's reason is "
        "printed with the table",
        'flopsweep: 1 of 6 jobs have no set-up left (status "no set-up left"); each one\'s reasons and fix '
        "are printed with the table",
    ]
    assert (proc.stdout + proc.stderr).count(refused) == 3  # once per invalid job (had been three times)
    # each job's outcome: an invalid one's whole reason before "; " and the times (session 33: was its
    # KEY=VALUE alone), another's word before ", "
    lines = [
        x
        for x in (proc.stdout + proc.stderr).splitlines()
        if re.match(r"flopsweep: \d+ of \d+ jobs? done", x)
    ]
    outcomes = [x.split(": ", 2)[2] for x in lines]
    done = [o.split("; ")[0] if o.startswith("invalid") else o.split(", ")[0] for o in outcomes]
    priced = (
        "invalid: cost.usd_per_gpu_hour=1e12: is beyond the bound of 1000000. "
        "Fix: set cost.usd_per_gpu_hour to at most 1000000."
    )
    assert done == [
        *["ok", priced] * 2,
        "no set-up left (over memory 10)",
        priced,
    ], done
    ranked = [r for r in written if r["rank"]]
    assert [int(r["rank"]) for r in ranked] == list(range(1, len(ranked) + 1))
    dollars = [float(r["predicted_usd_per_million_tokens"]) for r in ranked]
    assert dollars == sorted(dollars) and [r["best"] for r in ranked].count("True") == 1
    model = ("llama3.1-8b", "llama3.2-3b")[int(ranked[0]["job"]) // 2]
    assert f"  H100:1x8:ib400: flopsweep model={model} " in proc.stdout
    assert "ranks set-ups on clusters" not in proc.stdout  # no hint to add what the command has
    for job in (0, 2):
        log = (sweep / str(job) / "run.log").read_text()
        assert "   #   all  cluster           set-up" in log and "best of each cluster" in log


def _read_only_shell(folder: Path) -> list[str] | None:
    """``sh -c`` run with ``folder`` bind-mounted read-only in a mount namespace of its own (``unshare -m``,
    as root), so that even root cannot write there; None where this machine does not allow it."""
    import shutil
    import subprocess

    if shutil.which("unshare") is None:
        return None
    mount = f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} && cd {folder} && "
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", mount + "! touch x 2>/dev/null"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return None if probe.returncode else ["unshare", "-m", "sh", "-c", mount + '"$@"', "sh"]


@pytest.mark.slow
def test_a_plan_in_a_read_only_folder_prints_its_table_and_says_plan_csv_was_not_written(
    tmp_path: Path,
) -> None:
    """A read-only working directory (session 24's trial: the plan printed nothing, refused for its lock):
    the plan runs in a private folder, prints its whole table, says in one line that ``plan.csv`` could not
    be written (its path, the OS error, the fix), exits 0 and leaves that folder behind it removed."""
    import subprocess

    shell = _read_only_shell(tmp_path)
    if shell is None:
        pytest.skip("no read-only bind mount here (unshare -m as root)")
    args = [
        "plan=true",
        "model=llama3.2-3b",
        "plan_clusters=[H100:8]",
        "space.backends=[fsdp]",
        "space.layouts=[dp]",
    ]
    proc = subprocess.run(
        [*shell, sys.executable, str(ROOT / "run.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path.parent)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "  H100:1x8:ib400: flopsweep model=llama3.2-3b " in proc.stdout
    assert proc.stdout.rstrip().endswith("(plan: no worker started, no record written)")
    line = proc.stderr.strip().splitlines()[-1]
    assert (
        line.startswith("flopsweep: plan.csv could not be written: outputs/")
        and "/plan.csv (Read-only file system)" in line
    )
    assert line.endswith(
        "Fix: run from a folder you can write to, or set hydra.run.dir=DIR (hydra.sweep.dir=DIR under -m) "
        "to one"
    )
    assert not list(tmp_path.parent.glob("flopsweep-plan-*")) and not list(tmp_path.iterdir())
