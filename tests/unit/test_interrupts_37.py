"""Session 37's trial of Ctrl-C in a plan sweep (docs/reliability-7.md #390-#395): a SIGINT that landed in
pandas' read of ``plan.csv`` came out as ``ParserError`` (the job failed, the sweep ran on, exit 1), one that
landed in Hydra's composition of the next job as OmegaConf's ``'NoneType' object has no attribute
'_invalidate_flags_cache'`` (exit 1), and one before the first job left the sweep's ``multirun.yaml``. Each
signal here is a real one, raised at a point the code reaches (a profile hook on the function it calls), never
after a delay."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from flopsweep import signals, unstarted
from flopsweep.job.planprint import plan_table
from flopsweep.job.plantable import PLAN_COLUMNS, append_plan_row, complete_records, plan_csv, rank_plan_file

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def sigint_at(filename_end: str, name: str, *, keep: bool = False) -> Iterator[list[str]]:
    """SIGINT raised (``signal.raise_signal``: the handler in place runs now) the first time a Python function
    ``name`` of a file whose path ends in ``filename_end`` is called; Python's own SIGINT handler
    (``KeyboardInterrupt``) in place meanwhile, or, with ``keep``, the handler that is. Yields the list that
    says whether it fired."""
    fired: list[str] = []

    def hook(frame, event, arg) -> None:  # noqa: ANN001 - sys.setprofile's signature
        code = frame.f_code
        if not fired and event == "call" and code.co_name == name and code.co_filename.endswith(filename_end):
            fired.append(f"{code.co_filename}:{code.co_name}")
            signal.raise_signal(signal.SIGINT)

    before = (
        signal.getsignal(signal.SIGINT) if keep else signal.signal(signal.SIGINT, signal.default_int_handler)
    )
    sys.setprofile(hook)
    try:
        yield fired
    finally:
        sys.setprofile(None)
        signal.signal(signal.SIGINT, before)


def _row(job: int, **cells: object) -> dict[str, object]:
    row = dict.fromkeys(PLAN_COLUMNS, "")
    row.update(job=job, model="llama3.1-8b", overrides=f"seed={job}", status="ok", fits=True, **cells)
    row.update(
        predicted_tokens_per_s_per_device=1000.0 + job, prediction_source="datasheet: a source, quoted"
    )
    return row


def test_a_ctrl_c_in_the_plan_tables_parse_is_a_keyboard_interrupt_after_it() -> None:
    """The job's own table (``plan_table`` of its row's CSV, every plan job of a sweep): a SIGINT raised in
    pandas' read of the text (its Python ``read``, called from the C tokenizer) was ``ParserError: Error
    tokenizing data. C error: Calling read(nbytes) on source failed``; now the parse ends and the interrupt
    follows as ``KeyboardInterrupt``, as Ctrl-C anywhere else in the job."""
    text = plan_csv([_row(0)])
    with pytest.raises(KeyboardInterrupt), sigint_at("pandas/io/common.py", "read") as fired:
        plan_table("plan.csv", text=text)
    assert fired and fired[0].endswith("pandas/io/common.py:read")
    assert "llama3.1-8b" in plan_table("plan.csv", text=text)  # and without a signal, the table


def test_a_ctrl_c_in_the_sweeps_ranking_read_is_a_keyboard_interrupt(tmp_path: Path) -> None:
    """The sweep's end (``rank_plan_file``, the file by path) and an interrupted sweep's table read the same
    way: the interrupt is ``KeyboardInterrupt``, and the file keeps its rows."""
    path = tmp_path / "plan.csv"
    for job in range(3):
        append_plan_row(path, _row(job))
    with pytest.raises(KeyboardInterrupt), sigint_at("pandas/io/common.py", "read"):
        rank_plan_file(str(path), "tokens_per_s_per_device")
    assert len(complete_records(path.read_text(encoding="utf-8"))[0]) == 4


@pytest.mark.parametrize("cut", [1, 30, 60, -3, -1])
def test_a_plan_csv_cut_in_its_last_row_shows_the_complete_rows_and_says_so(tmp_path: Path, cut: int) -> None:
    """A ``plan.csv`` whose last row was cut short (a job killed while it appended, a full disk): pandas
    stopped on it (``ParserError: Expected 26 fields`` or an unclosed quote) and the sweep's table was lost.
    Now its complete rows are read, ranked and shown, and one line says how many were left out."""
    said_cut = (
        f"1 row of {tmp_path / 'plan.csv'} was cut short (a job stopped while it wrote its row, or the disk"
    )
    path = tmp_path / "plan.csv"
    for job in range(3):
        append_plan_row(path, _row(job))
    whole = path.read_bytes()
    last = whole.rstrip(b"\r\n").rfind(b"\n") + 1  # where the last row begins
    path.write_bytes(whole[: last + cut] if cut > 0 else whole[:cut])
    records, dropped = complete_records(path.read_bytes().decode())  # as read: no newline translated
    assert (len(records), dropped) == (3, 1)  # the header and jobs 0 and 1
    said = rank_plan_file(str(path), "tokens_per_s_per_device")
    assert said == [f"{said_cut} filled) and left out"]
    table = plan_table(str(path))
    assert "seed=0" in table and "seed=1" in table and "seed=2" not in table
    assert len(complete_records(path.read_bytes().decode())[0]) == 3  # rewritten: complete rows only


def test_complete_records_keeps_a_whole_file_and_drops_a_row_of_other_width() -> None:
    """A whole file is read whole (quoted cells with commas and newlines too); a row of another count of
    fields (a cut row that the next job's row followed) is left out and counted."""
    text = plan_csv([_row(0, note="a, b\nc"), _row(1)])
    assert complete_records(text) == (complete_records(text)[0], 0) and len(complete_records(text)[0]) == 3
    merged = text + "1,llama3.1-8b,seed=1\r\n" + plan_csv([_row(2)]).split("\r\n", 1)[1]
    records, dropped = complete_records(merged)
    assert [r[0] for r in records[1:]] == ["0", "1", "2"] and dropped == 1
    assert complete_records("") == ([], 0)


@pytest.fixture
def job_handlers() -> Iterator[None]:
    """``run.py``'s signal state for the test (:func:`flopsweep.signals.stop_before_jobs` with Python's
    SIGINT handler for the jobs), the process's own handlers restored after it."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signals.stop_before_jobs(
        {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.default_int_handler}
    )
    try:
        yield
    finally:
        signals.stop_before_jobs({})
        for s, handler in before.items():
            signal.signal(s, handler)


def test_a_signal_between_jobs_is_held_until_the_next_job_starts(job_handlers: None) -> None:
    """After a job run in the sweep's process, a SIGINT is held (no exception where it lands) and raised when
    the next job starts (:func:`flopsweep.signals.jobs_starting`), or when the sweep ends
    (:func:`~flopsweep.signals.jobs_done`); a second SIGINT is raised at once;
    :func:`~flopsweep.signals.raise_held` raises a held one and otherwise keeps holding."""
    signals.jobs_starting()
    signals.between_jobs()
    signals.raise_held()  # nothing held: still holding
    signal.raise_signal(signal.SIGINT)  # held: no exception here
    with pytest.raises(KeyboardInterrupt):
        signals.jobs_starting()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signals.between_jobs()
    signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)  # the second: now
    signals.between_jobs()
    signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        signals.jobs_done()
    signals.jobs_done()  # nothing held: nothing raised


def test_a_signal_in_hydras_composition_of_the_next_job_is_held_and_the_config_is_whole(
    job_handlers: None,
) -> None:
    """Hydra composes the next job's config between two jobs (``load_sweep_config``); a SIGINT landing inside
    OmegaConf there left a half-built node (Hydra printed "'NoneType' object has no attribute
    '_invalidate_flags_cache'", exit 1, the interrupt lost). Held between jobs, the composition completes
    and the interrupt comes when the job would start."""
    from hydra import compose, initialize_config_dir

    from flopsweep.store import register_configs

    register_configs()
    signals.jobs_starting()
    signals.between_jobs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        with sigint_at("omegaconf/dictconfig.py", "_set_value", keep=True) as fired:
            cfg = compose(config_name="config", overrides=["seed=3", "backend=fsdp"])
    assert fired and cfg.seed == 3 and cfg.backend.name == "fsdp"
    with pytest.raises(KeyboardInterrupt):
        signals.jobs_starting()


class _Lock:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_sweep_stopped_before_its_first_job_leaves_no_multirun_yaml(tmp_path: Path) -> None:
    """A sweep interrupted before any job started (while Hydra composed its jobs): its ``multirun.yaml`` and
    the folders it made are removed with the job folder that did not start (``resume=true`` of another sweep
    there was refused: "belongs to another sweep"); the folder that was there before stays."""
    sweep = tmp_path / "multirun" / "day" / "S"
    unstarted.sweep_starting(sweep)
    (sweep / "0").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    (sweep / "0" / "run.log").write_text("")
    lock = _Lock()
    unstarted.expect(sweep, lock)
    unstarted.job_folder_made(sweep / "0")
    assert unstarted.remove_unstarted() == sweep / "0"
    assert lock.closed and not (tmp_path / "multirun").exists() and tmp_path.is_dir()


def test_a_sweeps_own_multirun_yaml_and_a_started_sweep_are_kept(tmp_path: Path) -> None:
    """A ``multirun.yaml`` that was there before (``resume=true``, the same sweep again) stays, and so does
    the folder; once a job started, the sweep's files stay whatever a later job leaves."""
    sweep = tmp_path / "S"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    unstarted.sweep_starting(sweep)
    unstarted.expect(sweep)
    unstarted.remove_unstarted()
    assert (sweep / "multirun.yaml").is_file()
    other = tmp_path / "T"
    unstarted.sweep_starting(other)
    other.mkdir()
    (other / "multirun.yaml").write_text("hydra: {}\n")
    unstarted.expect(other)
    unstarted.job_folder_made(other / "0")
    unstarted.job_started()
    unstarted.job_folder_made(other / "1")
    unstarted.remove_unstarted()
    assert (other / "multirun.yaml").is_file()


def test_a_link_at_multirun_yaml_is_never_followed_or_removed(tmp_path: Path) -> None:
    """Only a regular file is removed: a link planted at ``multirun.yaml`` stays, and so does its target."""
    victim = tmp_path / "victim.yaml"
    victim.write_text("mine\n")
    sweep = tmp_path / "S"
    unstarted.sweep_starting(sweep)
    sweep.mkdir()
    os.symlink(victim, sweep / "multirun.yaml")
    unstarted.expect(sweep)
    unstarted.remove_unstarted()
    assert os.path.islink(sweep / "multirun.yaml") and victim.read_text() == "mine\n"


def test_resume_into_a_folder_whose_sweep_ran_no_job_is_let_through(tmp_path: Path) -> None:
    """A ``multirun.yaml`` left by a sweep killed before its first job (no cleanup ran: ``kill -9``) named
    another sweep: ``resume=true`` of this one was refused, "belongs to another sweep ... resume=true would
    overwrite it", though no job of it was there. Now it is replaced, as without ``resume``; a folder with
    a job folder stays refused."""
    import yaml

    from flopsweep.folders import other_sweep_problem

    def hydra(task: list[str]) -> dict:
        return {"job": {"config_name": "config"}, "overrides": {"task": task}, "sweeper": {"params": None}}

    sweep = tmp_path / "S"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra(["+sweep=layouts-8gpu-llama8b"])}))
    ours = hydra(["seed=0,1", "device=cpu"])
    assert other_sweep_problem(sweep, ours, resume=True) is None
    (sweep / "0").mkdir()
    line = other_sweep_problem(sweep, ours, resume=True)
    assert line is not None and "belongs to another sweep" in line


def test_an_interrupted_sweep_of_one_job_says_row(tmp_path: Path) -> None:
    """#394: one job's row kept said ``kept 1 rows``; a row cut short is not counted among those kept."""
    from omegaconf import OmegaConf

    from flopsweep.job.plansweep import SWEEP_PLAN, interrupted_plan_lines

    plan = tmp_path / "plan.csv"
    append_plan_row(plan, _row(0))
    with plan.open("a") as fh:
        fh.write("1,llama3.1-8b,seed=1,o")  # job 1's row, cut short
    SWEEP_PLAN.update(plan=plan, config=OmegaConf.create({"plan_format": "table"}))
    try:
        lines = interrupted_plan_lines()
    finally:
        SWEEP_PLAN.update(plan=None, config=None)
    assert lines[-1] == f"flopsweep: kept 1 row of planned set-ups in {plan} (the jobs that finished)"
    assert "seed=0" in lines[0] and "seed=1" not in lines[0]
    assert lines[-2].startswith(f"flopsweep: 1 row of {plan} was cut short")


def test_a_sweep_whose_jobs_ran_in_other_processes_keeps_its_multirun_yaml(tmp_path: Path) -> None:
    """The pool's and Slurm's jobs start in other processes, so the sweep's own never marks a job started: a
    Ctrl-C there once jobs ran must not take the ``multirun.yaml`` of the folders they left."""
    sweep = tmp_path / "S"
    unstarted.sweep_starting(sweep)
    (sweep / "0").mkdir(parents=True)  # a job the pool ran
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    unstarted.expect(sweep)
    unstarted.remove_unstarted()
    assert (sweep / "multirun.yaml").is_file() and (sweep / "0").is_dir()
