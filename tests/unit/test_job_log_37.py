"""Session 37's trial of the job's log (docs/reliability-7.md #396-#398): a link at a log file name given by
``hydra.job_logging.handlers.file.filename`` was replaced without a word (only ``<hydra.job.name>.log`` was
checked), and a key of ``hydra.job_logging`` that Python's logging does not take was a traceback or Hydra's
five lines. Each is now one line before Hydra (exit 2), and the callback's check sees the same name."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from flopsweep.folders import run_folder_problem, sweep_folder_problem
from flopsweep.free_folder import another  # the folder a fix names (#725)
from flopsweep.hydrafiles import JobLogHandler
from flopsweep.job_log import job_log_name, log_link_problem, log_name_in_folder
from flopsweep.job_log_keys import job_logging_key_problem
from run import refusal

RUN = ["device=cpu", "steps.measure=1", "steps.warmup=1"]
FILE = "hydra.job_logging.handlers.file"
MINE = FILE + ".filename=${hydra.runtime.output_dir}/mine.log"


def _planted(folder: Path, name: str, victim: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).symlink_to(victim)
    return folder / name


def test_a_link_at_a_custom_log_file_name_is_refused_before_hydra_and_kept(tmp_path: Path) -> None:
    """#396: ``ln -s victim ex/mine.log; flopsweep ... hydra.run.dir=ex
    'hydra.job_logging.handlers.file.filename=${hydra.runtime.output_dir}/mine.log'`` was exit 0, the link
    replaced by the log. Now #361's line, naming ``mine.log``; ``run.log`` there is no longer the log."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    ex = tmp_path / "ex"
    link = _planted(ex, "mine.log", victim)
    line = (
        f"hydra.run.dir={ex}: {link} is a symbolic link, not the job's log; a job never writes through its "
        f"log's path nor replaces what is there. Fix: remove {link} if it is yours, or {another(ex)}"
    )
    assert refusal([*RUN, f"hydra.run.dir={ex}", MINE]) == line
    assert refusal([*RUN, f"hydra.run.dir={ex}", f"{FILE}.filename={link}"]) == line  # a literal path in it
    named = f"{FILE}.filename=${{hydra.runtime.output_dir}}/${{hydra.job.name}}.log"
    assert log_link_problem([*RUN, f"hydra.run.dir={ex}", named, "hydra.job.name=mine"]) == line
    assert log_link_problem([*RUN, f"hydra.run.dir={ex}"]) is None  # run.log: not there
    (ex / "run.log").symlink_to(victim)
    assert (
        log_link_problem(
            [*RUN, f"hydra.run.dir={ex}", f"{FILE}.filename=${{hydra.runtime.output_dir}}/o.log"]
        )
        is None
    )
    assert os.path.islink(link) and victim.read_text() == "precious"


def test_a_link_at_a_custom_log_in_a_sweeps_job_folder_and_the_callbacks_name(tmp_path: Path) -> None:
    """#396: ``S/0/mine.log`` a link, then ``-m seed=0,1 hydra.sweep.dir=S resume=true`` with that log name:
    refused before Hydra; the callback's check (a folder from a sweep file or an interpolation) reads the
    composed config's file name (:func:`flopsweep.job_log.job_log_name`)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    sweep = tmp_path / "S"
    link = _planted(sweep / "0", "mine.log", victim)
    line = log_link_problem(["-m", "seed=0,1", f"hydra.sweep.dir={sweep}", "resume=true", MINE])
    assert line is not None and line.startswith(f"hydra.sweep.dir={sweep}: {link} is a symbolic link")
    config = OmegaConf.create(
        {
            "hydra": {
                "job": {"name": "run"},
                "job_logging": {"handlers": {"file": {"filename": "${hydra.runtime.output_dir}/mine.log"}}},
            }
        }
    )
    assert job_log_name(config) == "mine.log"
    assert sweep_folder_problem(sweep, {}, resume=True, log=job_log_name(config)) == line
    assert run_folder_problem(sweep / "0", job_log_name(config)) is not None
    plain = OmegaConf.create({"hydra": {"job": {"name": "x"}, "job_logging": {}}})
    assert job_log_name(plain) == "x.log"  # no file handler (hydra/job_logging=disabled): the job's name


@pytest.mark.parametrize(
    ("filename", "name"),
    [
        ("${hydra.runtime.output_dir}/mine.log", "mine.log"),
        ("${hydra:runtime.output_dir}/${hydra.job.name}-x.log", "job-x.log"),
        ("${hydra.runtime.output_dir}/${hydra.job.num}.log", None),  # each job's own: not told before
        ("${hydra.runtime.output_dir}/sub/x.log", None),  # below a sub-folder
        ("${hydra.runtime.output_dir}/../x.log", None),  # outside: log_file_problem refuses it
        ("/tmp/elsewhere.log", None),
    ],
)
def test_the_log_file_name_in_the_job_folder(filename: str, name: str | None) -> None:
    assert log_name_in_folder(filename, "job") == name


def test_the_handler_says_when_it_replaces_what_is_at_its_path(tmp_path: Path, capsys) -> None:
    """#397: where no check could tell the log's name (a handler given as a mapping, a name from
    ``${hydra.job.num}``), :class:`flopsweep.hydrafiles.JobLogHandler` still replaces a link, never writing
    through it, and now says so in one line on stderr."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = _planted(tmp_path / "job", "3.log", victim)
    handler = JobLogHandler(str(link))
    handler.emit(logging.makeLogRecord({"msg": "a log line"}))
    handler.close()
    err = capsys.readouterr().err
    assert err == (
        f"flopsweep: warning: {link} is a symbolic link, not the job's log: replaced by the log, never "
        "written through (a link's target is left as it was)\n"
    )
    assert victim.read_text() == "precious" and not os.path.islink(link)
    handler = JobLogHandler(str(link))  # a regular file now: appended to, nothing said
    handler.emit(logging.makeLogRecord({"msg": "again"}))
    handler.close()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("override", "said"),
    [
        (
            f"{FILE}.baseFilename=x",
            f"Invalid config: {FILE}.baseFilename=x: the job log's file handler (a logging.FileHandler) "
            "takes no key baseFilename (its keys: class, level, formatter, filters, filename, mode, "
            f"encoding, delay, errors). Fix: did you mean {FILE}.filename=x?",
        ),
        (
            f"+{FILE}.baseFilename=x",  # was: logging's TypeError traceback, 'Unable to configure handler'
            f"Invalid config: {FILE}.baseFilename=x: the job log's file handler (a logging.FileHandler) "
            "takes no key baseFilename (its keys: class, level, formatter, filters, filename, mode, "
            f"encoding, delay, errors). Fix: did you mean {FILE}.filename=x?",
        ),
        (
            "hydra.job_logging.handler.file.filename=x",
            "Invalid config: hydra.job_logging.handler.file.filename=x: not a key of Python's logging "
            "configuration (logging.config.dictConfig). Fix: did you mean "
            "hydra.job_logging.handlers.file.filename=x?",
        ),
        (
            f"{FILE}.level=LOUD",
            f"Invalid config: {FILE}.level=LOUD: not a level of Python's logging (one of CRITICAL, ERROR, "
            f"WARNING, INFO, DEBUG, NOTSET). Fix: set +{FILE}.level=INFO.",
        ),
        (
            f"{FILE}.mode=w",
            f"Invalid config: {FILE}.mode=w: the file handler of conf/hydra/job_logging/flopsweep.yaml sets "
            f"no mode to override. Fix: add it with a +: +{FILE}.mode=w.",
        ),
        (
            "hydra.job_logging.handlers.console.filename=x",
            "Invalid config: hydra.job_logging.handlers.console.filename=x: the console handler takes no key "
            "filename (its keys: class, level, formatter, filters, stream). Fix: drop the override (the keys "
            "there: class, level, formatter, filters, stream).",
        ),
        ("hydra.job_logging.root.level=verbose", None),  # checked below: its line names INFO
        (f"+{FILE}.mode=w", ""),
        (f"+{FILE}.level=DEBUG", ""),
        ("hydra.job_logging.root.level=WARNING", ""),
    ],
)
def test_a_job_logging_key_logging_does_not_take_is_one_line(override: str, said: str | None) -> None:
    """#398: ``hydra.job_logging.handlers.file.baseFilename=x`` (Hydra's five lines), with ``+`` (logging's
    traceback), a misspelt section, a level logging does not name, a key the file lacks typed without ``+``:
    one line with the nearest key; what logging takes passes, and ``refusal`` says the same line."""
    line = job_logging_key_problem([*RUN, override])
    if said is None:
        assert line is not None and line.endswith("Fix: set hydra.job_logging.root.level=INFO.")
        return
    assert line == (said or None)
    assert refusal([*RUN, override]) == (said or None)


def test_a_sweep_files_job_logging_key_logging_does_not_take_is_one_line(tmp_path: Path) -> None:
    """#399: the same key in a sweep file's ``hydra:`` block (``hydra: {job_logging: {handlers: {file:
    {baseFilename: x}}}}``) was logging's traceback; now the line, the file named; its own keys pass."""
    from flopsweep.sweep_file_hydra import output_dir_problem

    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    (conf / "config.yaml").write_text("defaults:\n  - base_config\n  - _self_\n")
    mine = conf / "sweep" / "mine.yaml"
    mine.write_text(
        "# @package _global_\nhydra:\n  job_logging:\n    handlers:\n      file:\n        baseFilename: x\n"
    )
    line = output_dir_problem(["-m", "+sweep=mine", "seed=0,1"], str(conf))
    assert line is not None and line.startswith(
        f"Invalid config: conf/sweep/mine.yaml: {FILE}.baseFilename='x': the job log's file handler"
    )
    assert line.endswith(
        f"Fix: did you mean {FILE}.filename='x'?"
    )  # the file's value, as an override writes it
    mine.write_text(
        "# @package _global_\nhydra:\n  job_logging:\n    handlers:\n      file:\n        mode: w\n"
    )
    assert (
        output_dir_problem(["-m", "+sweep=mine", "seed=0,1"], str(conf)) is None
    )  # a file adds what it sets
