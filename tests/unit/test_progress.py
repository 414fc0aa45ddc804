"""Sweep-level progress: i of N jobs done, the job that ended by Hydra's number, the elapsed time and an
estimate from the jobs done."""

from __future__ import annotations

from omegaconf import OmegaConf

from flopsweep.callbacks import progress_line, sweep_size


def test_progress_line_estimates_from_the_mean_job() -> None:
    assert progress_line(3, 12, 151) == "flopsweep: 3 of 12 jobs done, 2:31 elapsed, about 7:33 left"
    assert progress_line(2, None, 3725) == "flopsweep: 2 jobs done, 1:02:05 elapsed"
    with_status = progress_line(3, 12, 151, status="ok", job=2)
    assert with_status == "flopsweep: 3 of 12 jobs done (job 2): ok, 2:31 elapsed, about 7:33 left"
    assert (
        progress_line(2, None, 65, status="skipped", job=1)
        == "flopsweep: 2 jobs done (job 1): skipped, 1:05 elapsed"
    )
    assert progress_line(1, None, 65, job=0) == "flopsweep: 1 job done (job 0), 1:05 elapsed"
    assert (
        progress_line(1, 1, 5, job=0) == "flopsweep: 1 of 1 job done (job 0), 0:05 elapsed, about 0:00 left"
    )


def test_the_progress_line_names_the_job_by_hydras_number_and_counts_apart(capsys) -> None:
    """It said ``job 1/2 done`` for Hydra's job ``#0`` (folder ``0/``, plan.csv's ``job`` 0, ``job 0 is
    invalid``): a count from 1 read as the job's number. Now the count is a count and the job is named
    by ``hydra.job.num``, which need not follow the count (the pool ends jobs in any order)."""
    import os
    import time

    from flopsweep.callbacks import SweepSummary, _job_num

    summary = SweepSummary()
    summary.started, summary.pid, summary.total = time.monotonic(), os.getpid(), 2
    capsys.readouterr()
    summary.job_done(None, num=1)  # the second job ended first
    summary.job_done(None, num=0)
    summary.job_done(None)  # no number known (a Slurm job without a result): left out
    lines = [line.split(", 0:")[0] for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        "flopsweep: 1 of 2 jobs done (job 1)",
        "flopsweep: 2 of 2 jobs done (job 0)",
        "flopsweep: 3 jobs done",
    ]
    assert _job_num(OmegaConf.create({"hydra": {"job": {"num": 7}}})) == 7
    assert _job_num(OmegaConf.create({"hydra": {"job": {}}})) is None


def test_job_status_is_the_records_as_the_summary_counts_it(tmp_path) -> None:
    """The status a progress line shows: the record's, ``skipped`` for an ok record the sweep kept,
    None for a job directory without a record."""
    import json

    from flopsweep.callbacks import job_status, ok_run_ids

    for name, status in (("kept", "ok"), ("new", "oom")):
        (tmp_path / name).mkdir()
        record = {"status": status, "run": {"id": f"run-{name}"}}
        (tmp_path / name / "metrics.json").write_text(json.dumps(record))
    kept = ok_run_ids(tmp_path)
    assert job_status(tmp_path / "kept", kept) == "skipped" and job_status(tmp_path / "kept") == "ok"
    assert job_status(tmp_path / "new", kept) == "oom"
    assert job_status(tmp_path) is None  # no record
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.json").write_text("{")
    assert job_status(tmp_path / "bad") == "unreadable"


def test_sweep_size_multiplies_command_line_and_sweep_file_axes() -> None:
    config = OmegaConf.create(
        {
            "hydra": {
                "sweeper": {"params": {"backend": "ddp,fsdp,zero3", "precision": "fp32,bf16"}},
                "overrides": {"task": ["seed=1,2", "device=cpu", "backend=ddp,fsdp"]},
            }
        }
    )
    assert sweep_size(config) == 2 * 2 * 2  # the command line's backend wins over the file's
    assert sweep_size(OmegaConf.create({})) is None
    config.repeats = 3  # repeats=3: three rounds of every job
    assert sweep_size(config) == 2 * 2 * 2 * 3


def test_log_lines_escape_control_characters() -> None:
    """A newline in a tag cannot forge a log line; the record keeps the exact value elsewhere."""
    from flopsweep.text import printable

    assert printable("tag=a\n[INFO] forged\x1b[31m") == "tag=a\\n[INFO] forged\\x1b[31m"
    assert printable("model=gpt-tiny tag=ünïcode ok") == "model=gpt-tiny tag=ünïcode ok"
