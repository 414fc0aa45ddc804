"""Session 38: values of ``hydra.job_logging`` that Python's logging rejects (docs/reliability-8.md #436),
and a log file name that reaches the run's folder by another spelling (#437-#438). Each is one line before
Hydra (exit 2), and each line's fix is itself accepted."""

from __future__ import annotations

import codecs
import logging
from pathlib import Path

import pytest
import yaml

from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.job_log_keys import FILE_FORMATTERS, LEVEL_NAMES
from flopsweep.override_schema import CONF
from run import refusal

RUN = ["device=cpu", "steps.measure=1", "steps.warmup=1"]
FILE = "hydra.job_logging.handlers.file"
LEVELS = "(info is not one of CRITICAL, ERROR, WARNING, INFO, DEBUG, NOTSET)"


def _fix(line: str) -> list[str]:
    """The overrides a refusal's ``Fix: set X`` names."""
    return line.split("Fix: set ", 1)[1].rstrip(".").split()


@pytest.mark.parametrize(
    ("override", "said"),
    [
        (
            "hydra.job_logging.root.level=info",
            "Invalid config: hydra.job_logging.root.level=info: logging's level names are upper case "
            f"{LEVELS}. Fix: set hydra.job_logging.root.level=INFO.",
        ),
        (  # before: its fix was +...level=info, which then ended in logging's traceback
            f"{FILE}.level=info",
            f"Invalid config: {FILE}.level=info: logging's level names are upper case {LEVELS}. "
            f"Fix: set +{FILE}.level=INFO.",
        ),
        (
            f"+{FILE}.level=info",
            f"Invalid config: {FILE}.level=info: logging's level names are upper case {LEVELS}. "
            f"Fix: set +{FILE}.level=INFO.",
        ),
        (
            f"+{FILE}.encoding=nope",
            f"Invalid config: {FILE}.encoding=nope: not an encoding Python knows (codecs.lookup), so logging "
            f"could not open the log. Fix: set +{FILE}.encoding=utf-8.",
        ),
        (
            f"{FILE}.encoding=nope",
            f"Invalid config: {FILE}.encoding=nope: not an encoding Python knows (codecs.lookup), so logging "
            f"could not open the log. Fix: set +{FILE}.encoding=utf-8.",
        ),
        (
            f"{FILE}.formatter=nofmt",
            f"Invalid config: {FILE}.formatter=nofmt: no formatter nofmt under hydra.job_logging.formatters "
            f"(defined: simple). Fix: set {FILE}.formatter=simple.",
        ),
    ],
)
def test_a_job_logging_value_logging_rejects_is_one_line_and_its_fix_is_accepted(override, said) -> None:
    """#436: each was exit 1 with logging's traceback (``ValueError: Unknown level: 'info'``,
    ``LookupError: unknown encoding: nope``, ``Unable to configure handler 'file'``)."""
    assert refusal([*RUN, override]) == said
    fixed = _fix(said)
    assert refusal([*RUN, *fixed]) is None
    value = fixed[0].partition("=")[2]
    if fixed[0].endswith(f"level={value}"):
        assert logging.getLevelName(value) == logging.INFO  # logging's own table takes it
    elif "encoding" in fixed[0]:
        assert codecs.lookup(value).name == "utf-8"


def test_levels_formatters_and_numbers_logging_takes_pass() -> None:
    """#436: what logging takes stays accepted: its upper-case names, a whole number, a formatter the
    overrides define, a logger's level; the formatters named are the file's."""
    for ok in (
        ["hydra.job_logging.root.level=10"],
        ["hydra.job_logging.root.level=WARN"],
        ["+hydra.job_logging.loggers.x.level=DEBUG"],
        ["+hydra.job_logging.formatters.mine.format=x", f"{FILE}.formatter=mine"],
    ):
        assert refusal([*RUN, *ok]) is None, ok
    line = refusal([*RUN, "+hydra.job_logging.loggers.x.level=debug"])
    assert line is not None and line.endswith("Fix: set +hydra.job_logging.loggers.x.level=DEBUG.")
    assert "WARN" in LEVEL_NAMES and "info" not in LEVEL_NAMES
    with open(Path(CONF) / "hydra" / "job_logging" / "flopsweep.yaml", encoding="utf-8") as f:
        assert tuple(yaml.safe_load(f)["formatters"]) == FILE_FORMATTERS


@pytest.mark.parametrize(
    "filename",
    [
        "${hydra.runtime.output_dir}/./mine.log",
        "${hydra.runtime.output_dir}//mine.log",
        "${hydra.runtime.output_dir}/a/../mine.log",
        "{ex}/a/../mine.log",
        "{ex}//mine.log",
    ],
)
def test_a_link_at_a_log_name_spelt_another_way_is_refused_and_kept(tmp_path: Path, filename: str) -> None:
    """#437: ``ln -s victim ex/mine.log`` with ``filename=${hydra.runtime.output_dir}/./mine.log`` (or
    ``//``, ``a/../``) was exit 0, the link replaced by the log (the check took ``./mine.log`` for a
    sub-folder and let it pass; ``logging.FileHandler`` opens the path normalised). Now #396's line, for
    the callback's name too (:func:`flopsweep.job_log.job_log_name`)."""
    from omegaconf import OmegaConf

    from flopsweep.job_log import job_log_name

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    ex = tmp_path / "ex"
    ex.mkdir()
    (ex / "mine.log").symlink_to(victim)
    typed = filename.replace("{ex}", str(ex))
    line = refusal([*RUN, f"hydra.run.dir={ex}", f"{FILE}.filename={typed}"])
    assert line == (
        f"hydra.run.dir={ex}: {ex}/mine.log is a symbolic link, not the job's log; a job never writes "
        f"through its log's path nor replaces what is there. Fix: remove {ex}/mine.log if it is yours, or "
        f"{another(ex)}"
    )
    if "{ex}" not in filename:
        handlers = {"handlers": {"file": {"filename": filename}}}
        config = OmegaConf.create({"hydra": {"job": {"name": "run"}, "job_logging": handlers}})
        assert job_log_name(config) == "mine.log"
    assert (ex / "mine.log").is_symlink() and victim.read_text() == "precious"


def test_a_log_name_that_climbs_out_is_still_refused() -> None:
    """#437: normalised, ``a/../../x.log`` still leaves the job's folder: #376's line."""
    line = refusal([*RUN, f"{FILE}.filename=${{hydra.runtime.output_dir}}/a/../../x.log"])
    assert line is not None and "would be written outside the run's folder" in line


def test_a_log_named_through_the_run_dir_is_in_the_runs_folder(tmp_path: Path) -> None:
    """#438: ``filename=${hydra.run.dir}/mine.log`` was refused as "outside the run's folder" though a single
    run's ``output_dir`` is ``hydra.run.dir`` (Hydra writes it there); now accepted, and its link checked.
    In a multirun it is still outside the job's folder; ``${hydra.sweep.dir}/${hydra.sweep.subdir}/x`` is
    in it."""
    from omegaconf import OmegaConf

    from flopsweep.job_log import job_log_name

    ex = tmp_path / "ex"
    for spelt in ("${hydra.run.dir}/mine.log", "${hydra:run.dir}/mine.log"):
        assert refusal([*RUN, f"hydra.run.dir={ex}", f"{FILE}.filename={spelt}"]) is None
    ex.mkdir()
    (ex / "mine.log").symlink_to(tmp_path / "victim")
    line = refusal([*RUN, f"hydra.run.dir={ex}", f"{FILE}.filename=${{hydra.run.dir}}/mine.log"])
    assert line is not None and line.startswith(f"hydra.run.dir={ex}: {ex}/mine.log is a symbolic link")
    sweep = ["-m", "seed=0,1", *RUN]
    line = refusal([*sweep, f"{FILE}.filename=${{hydra.run.dir}}/mine.log"])
    assert line is not None and "outside the job's folder under hydra.sweep.dir" in line
    assert refusal([*sweep, f"{FILE}.filename=${{hydra.sweep.dir}}/${{hydra.sweep.subdir}}/mine.log"]) is None
    for mode, name in (("RUN", "mine.log"), ("MULTIRUN", "run.log")):
        handlers = {"handlers": {"file": {"filename": "${hydra.run.dir}/mine.log"}}}
        hydra = {"mode": mode, "job": {"name": "run"}, "job_logging": handlers}
        assert job_log_name(OmegaConf.create({"hydra": hydra})) == name


@pytest.mark.parametrize("key", ["root.level", "handlers.file.formatter"])
def test_a_plus_on_a_key_the_log_file_sets_is_one_line_and_its_fix_accepted(key: str) -> None:
    """#444: ``+hydra.job_logging.root.level=INFO`` was Hydra's five lines (``Could not append to config. An
    item is already at 'hydra.job_logging.root.level'``), exit 1; #436's fixes carry a ``+`` only where the
    file lacks the key; ``++`` (adds or sets) passes."""
    value = {"root.level": "INFO", "handlers.file.formatter": "simple"}[key]
    line = refusal([*RUN, f"+hydra.job_logging.{key}={value}"])
    assert line == (
        f"Invalid config: +hydra.job_logging.{key}={value}: conf/hydra/job_logging/flopsweep.yaml sets it "
        f"already, and + adds only a new key. Fix: set it without the +: hydra.job_logging.{key}={value}."
    )
    assert refusal([*RUN, line.rsplit(": ", 1)[1].rstrip(".")]) is None
    assert refusal([*RUN, f"++hydra.job_logging.{key}={value}"]) is None
    with open(Path(CONF) / "hydra" / "job_logging" / "flopsweep.yaml", encoding="utf-8") as f:
        data = yaml.safe_load(f)
    for part in key.split("."):
        data = data[part]
    assert data is not None  # the file sets it: FILE_KEYS holds it


def test_the_keys_the_log_file_sets_are_the_files() -> None:
    """#444: :data:`flopsweep.job_log_keys.FILE_KEYS` is every key and section of the file."""
    from flopsweep.job_log_keys import FILE_KEYS

    def keys(data: dict, prefix: str = "") -> set[str]:
        out = set()
        for k, v in data.items():
            out |= {prefix + k, *(keys(v, f"{prefix}{k}.") if isinstance(v, dict) else ())}
        return out

    with open(Path(CONF) / "hydra" / "job_logging" / "flopsweep.yaml", encoding="utf-8") as f:
        assert keys(yaml.safe_load(f)) == set(FILE_KEYS)


def test_a_log_in_a_sub_folder_nothing_makes_is_refused(tmp_path: Path) -> None:
    """#445: ``filename=${hydra.runtime.output_dir}/sub/mine.log`` was exit 0 with ``flopsweep: warning:
    [Errno 2] No such file or directory: '.../sub/mine.log'; the job's log goes to the console only``:
    logging makes no folder. Now one line before Hydra, exit 2, its fix accepted; a single run's sub-folder
    that is there already passes."""
    ex = tmp_path / "ex"
    for spelt in ("${hydra.runtime.output_dir}/sub/mine.log", f"{ex}/sub/mine.log"):
        line = refusal([*RUN, f"hydra.run.dir={ex}", f"{FILE}.filename={spelt}"])
        assert line == (
            f"Invalid config: {FILE}.filename={spelt}: the job's log would be in sub/ below the job's "
            "folder, which nothing makes (logging opens the file, it makes no folder), so it would go to the "
            "console only. Fix: name a file in the job's folder itself: "
            f"{FILE}.filename=${{hydra.runtime.output_dir}}/mine.log."
        )
        assert refusal([*RUN, f"hydra.run.dir={ex}", line.rsplit(": ", 1)[1].rstrip(".")]) is None
    line = refusal(["-m", "seed=0,1", *RUN, f"{FILE}.filename=${{hydra.runtime.output_dir}}/logs/x.log"])
    assert line is not None and "would be in logs/ below the job's folder" in line
    (ex / "sub").mkdir(parents=True)
    assert (
        refusal([*RUN, f"hydra.run.dir={ex}", f"{FILE}.filename=${{hydra.runtime.output_dir}}/sub/x.log"])
        is None
    )
