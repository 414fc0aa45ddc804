"""Sweep-level progress: job i/N with the elapsed time and an estimate from the jobs done."""

from __future__ import annotations

from omegaconf import OmegaConf

from flopsweep.callbacks import progress_line, sweep_size


def test_progress_line_estimates_from_the_mean_job() -> None:
    assert progress_line(3, 12, 151) == "flopsweep: job 3/12 done, 2:31 elapsed, about 7:33 left"
    assert progress_line(2, None, 3725) == "flopsweep: job 2 done, 1:02:05 elapsed"
    with_status = progress_line(3, 12, 151, status="ok")
    assert with_status == "flopsweep: job 3/12 done: ok, 2:31 elapsed, about 7:33 left"
    assert progress_line(2, None, 65, status="skipped") == "flopsweep: job 2 done: skipped, 1:05 elapsed"


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
