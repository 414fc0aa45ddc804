"""The session-30 new-user trial's small defects (docs/reliability-4.md): a GPU memory no GPU has, a
lowercase GPU name kept lowercase in the plan's rows, ``--best-by`` after a ``--filter`` that leaves no
ok run ("0 shown", exit 0), and a FIFO named as the folder to read (told to re-run with ``resume=true``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import RECORDS, deadline

from analysis.__main__ import main
from flopsweep.clusters import hint_gpu, parse_cluster
from flopsweep.gpu_memory import MIN_GPU_MEMORY_GIB, canonical_gpu_name, typed_gpu_names
from flopsweep.job import JobInfo, run_job
from flopsweep.job.plandecide import ignored_line
from run import refusal


def test_a_gpu_memory_under_one_gib_is_refused_before_hydra() -> None:
    """``plan=true plan_gpu=H100 plan_gpu_memory_gib=0.001`` planned for 1 MiB and called every set-up
    unfit. Under :data:`MIN_GPU_MEMORY_GIB` (1 GiB: no GPU torch runs on has less) it is one line naming
    the key, the value and the fix, which ``run.py`` prints before Hydra (exit 2); 1 GiB itself is taken."""
    line = (
        "Invalid config: plan_gpu_memory_gib=0.001: is under 1 GiB, less than any GPU's memory (the unit "
        "is GiB, not MiB). Fix: set the GPU's memory in GiB, e.g. plan_gpu_memory_gib=80 (an H100's), "
        "or drop it."
    )
    assert MIN_GPU_MEMORY_GIB == 1.0
    assert refusal(["plan=true", "plan_gpu=H100", "plan_gpu_memory_gib=0.001"]) == line
    assert refusal(["-m", "plan=true", "plan_gpu_memory_gib=80,0.5"]).startswith(
        "Invalid config: plan_gpu_memory_gib=0.5: is under 1 GiB"
    )
    assert refusal(["plan=true", "plan_gpu=H100", "plan_gpu_memory_gib=1"]) is None
    for value in ("inf", "nan", "0"):  # not finite, not positive: the line they had
        said = refusal(["plan=true", "plan_gpu=H100", f"plan_gpu_memory_gib={value}"])
        assert said.startswith(
            f"Invalid config: plan_gpu_memory_gib={value}: must be a positive number of GiB"
        )


def test_a_lowercase_gpu_name_is_spelled_as_the_peak_table_in_rows_and_labels(
    hydra_compose, tmp_path
) -> None:
    """``plan_gpu=h100`` gave ``fits_on`` ``h100 (40 GiB)``, the note ``h100 taken as H100-SXM`` and the
    hint ``plan_clusters=[h100:1x8,...]``; ``plan_clusters=[h100:8]`` the cluster ``h100:1x8:ib400``. Each
    name is now the table's (``H100``), wherever a GPU name is read from the user."""
    for name in typed_gpu_names():
        assert canonical_gpu_name(name.lower()) == name and canonical_gpu_name(name) == name
    assert canonical_gpu_name("nvidia a100-sxm4-40gb") == "NVIDIA A100-SXM4-40GB"
    assert canonical_gpu_name("h999") == "h999"  # not the table's: as given, for its refusal
    assert parse_cluster("h100:8").label == "H100:1x8:ib400"
    assert parse_cluster("a100-80gb:2x8@2.5").label == "A100-80GB:2x8:ib200"
    assert hint_gpu("h200") == "H200"
    said = ignored_line(["plan_gpu=h200", "nnodes=2"], [parse_cluster("H100:8")])
    assert said is not None and said.endswith("name it there: plan_clusters=[H200:2x8]")
    cfg = hydra_compose(
        ["plan=true", "plan_gpu=h100", "plan_gpu_memory_gib=40", "model=gpt-tiny", "device=cuda"]
    )
    row = run_job(cfg, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok" and row["fits_on"] == "H100 (40 GiB)", row
    assert "H100 taken as H100-SXM" in row["note"] and "h100" not in row["note"], row["note"]


def test_best_by_after_a_filter_that_leaves_no_ok_run_is_one_line_exit_2(capsys) -> None:
    """``--filter status=oom --best-by model`` printed an empty table and "0 shown", exit 0. As a
    ``--filter`` that matches no run, it is one line (the filter, the statuses it left, the fix), exit 2."""
    paths = [str(RECORDS / name) for name in ("v2-ok", "v2-oom", "v1-invalid")]
    with pytest.raises(SystemExit) as ended:
        main([*paths, "--filter", "status=oom", "--best-by", "model"])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(
        "python -m analysis: error: --best-by model: none of the 1 run that --filter status=oom leaves "
        "(status: oom 1) is an ok run with a model_tflops_per_device to rank; --best-by ranks ok runs only: "
        "drop --best-by to list these runs, or filter for ok runs (--filter status=ok)"
    ), err
    assert main([*paths, "--filter", "status=ok", "--best-by", "model"]) == 0
    assert main([*paths, "--filter", "status=oom"]) == 0  # the oom run listed, without --best-by


def test_a_fifo_or_device_named_as_the_folder_is_said_so_never_opened(tmp_path: Path, capsys) -> None:
    """``python -m analysis FIFO`` skipped it as an unreadable record and told the user to re-run the
    sweep with ``resume=true`` (exit 1). A path named that is neither a folder nor a regular file (a
    FIFO, a link to one, ``/dev/null``) is one line saying what it is, exit 2, by ``stat`` alone: the
    FIFO is never opened (no writer ever comes: an open would block till the deadline)."""
    fifo = tmp_path / "runs"
    os.mkfifo(fifo)
    (tmp_path / "link").symlink_to(fifo)
    named = [
        (fifo, "a FIFO"),
        (tmp_path / "link", "a symbolic link to a FIFO"),
        ("/dev/null", "a character device"),
    ]
    for path, kind in named:
        with deadline(60), pytest.raises(SystemExit) as ended:
            main([str(path)])
        err = capsys.readouterr().err
        assert ended.value.code == 2, err
        assert err.startswith(
            f"python -m analysis: error: {path}: is {kind}, not a folder or a regular file. Fix: name a "
        ), err
        assert "resume" not in err and len(err.splitlines()) == 1
    with deadline(60):  # beside a folder of records: skipped with its reason, as one met in a walk
        assert main([str(RECORDS / "v2-ok"), str(fifo)]) in (0, None)
    assert "1 unreadable record skipped" in capsys.readouterr().err
