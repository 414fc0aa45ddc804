"""Session 38's re-trial (docs/reliability-8.md #465-#468): fixes of this session typed back by a fresh user
and refused again, or variants of their rows the fix did not cover: ``plan_clusters=[H100:1x8,[H100:8]]``
(#452's spliced fix named one cluster twice), ``plan_clusters=[H100:1x8,true]`` (a boolean read as its
Python text, ``'True' is no device``), ``--output f.md/`` with ``f.md`` a file (#442's fix named a file
inside a file), ``--columns ALL`` (#454's "did you mean 'cuda_alloc_retries'"), a ``config.json`` shape key in
other case (#451's fix was the class default, ``"num_hidden_layers": 32``). Each fix printed is fed back
and passes. A plan sweep whose ``hydra.sweep.subdir`` has a folder (#440's
``${hydra.runtime.choices.model}/${seed}``) wrote one ``plan.csv`` a model and printed no table (#470). A
sweep file's ``repeats: 2`` was no round to #439's subdir check (#471). A sweep file's
``hydra.job_logging`` key got a fix with a ``+`` that Hydra refused (#472)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main
from flopsweep.config import ConfigError
from flopsweep.job.plandecide import named_clusters
from flopsweep.plan_command_line import command_line_problem


@pytest.mark.parametrize(
    ("typed", "fix"),
    [
        ("[H100:1x8,[H100:8]]", "plan_clusters=[H100:1x8]"),
        ("[H100:1x8,[H100-80GB:8,H200:8],null]", "plan_clusters=[H100:1x8,H200:8]"),
        ("[H100:8,[H200:8]]", "plan_clusters=[H100:8,H200:8]"),
    ],
)
def test_a_nested_plan_clusters_fix_never_names_one_cluster_twice(typed: str, fix: str) -> None:
    """#465: was ``Fix: ... plan_clusters=[H100:1x8,H100:8]``, refused as ``names H100:1x8:ib400 twice``."""
    line = command_line_problem(["plan=true", f"plan_clusters={typed}"])
    assert line is not None and line.endswith(f"Fix: name each cluster once as a text: {fix}.")
    assert command_line_problem(["plan=true", fix]) is None
    with pytest.raises(ConfigError) as caught:  # the job's own check (a sweep file's list) says the same
        named_clusters(["H100:1x8", ["H100:8"]])
    assert str(caught.value).endswith("Fix: name each cluster once as a text: plan_clusters=[H100:1x8].")


@pytest.mark.parametrize(("typed", "word"), [("[H100:1x8,true]", "true"), ("[false]", "false")])
def test_a_boolean_plan_clusters_entry_names_no_cluster(typed: str, word: str) -> None:
    """#466: was ``plan_clusters='True': 'True' is no device of the peak table`` (Python's text of true)."""
    line = command_line_problem(["plan=true", f"plan_clusters={typed}"])
    assert line is not None and line.startswith(
        f"Invalid config: plan_clusters='{typed}': holds {word}, which names no cluster. Fix: name each "
        "cluster once as a text: "
    )
    fix = line.rpartition("as a text: ")[2].removesuffix(".").removeprefix("e.g. ")
    assert command_line_problem(["plan=true", fix]) is None


@pytest.mark.parametrize("given", ["f.md/", "f.md/.", "./f.md/"])
def test_an_output_folder_that_is_a_file_gets_a_fix_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, given: str
) -> None:
    """#467: ``--output f.md/`` with ``f.md`` a file: was ``Fix: --output f.md/report.md``, refused as
    ``its folder f.md is a regular file``; now the report beside it, the file kept."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.md").write_text("mine\n")
    runs = tmp_path / "runs"
    put(runs / "0", fixture_record())
    with pytest.raises(SystemExit) as stop:
        main([str(runs), "--output", given])
    assert stop.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    fix = last.split("Fix: --output ", 1)[1].split(";", 1)[0]
    assert Path(fix).name == "report.md" and Path(fix).parent in (Path("."), Path(""))
    assert main([str(runs), "--output", fix]) == 0
    assert (tmp_path / "report.md").is_file() and (tmp_path / "f.md").read_text() == "mine\n"


@pytest.mark.parametrize("given", ["ALL", "All"])
def test_columns_all_in_other_case_says_lower_case(tmp_path: Path, capsys, given: str) -> None:
    """#468: ``--columns ALL`` was ``unknown column 'ALL' ... did you mean 'cuda_alloc_retries'``."""
    runs = tmp_path / "runs"
    put(runs / "0", fixture_record())
    with pytest.raises(SystemExit) as stop:
        main([str(runs), "--columns", given])
    assert stop.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"python -m analysis: error: argument --columns: '{given}': all (every column) ")
    assert last.endswith(
        "is written in lower case, as each column; give --columns all; see python -m analysis --help"
    )
    assert main([str(runs), "--columns", "all", "--output", str(tmp_path / "t.md")]) == 0
    with pytest.raises(SystemExit):  # beside another name: #454's line, its other case dropped
        main([str(runs), "--columns", "ALL,model"])
    assert (
        "stands alone; give --columns all, or the columns alone: --columns model" in capsys.readouterr().err
    )


@pytest.mark.parametrize("typed", ["Num_Hidden_Layers", "NUM_HIDEN_LAYERS"])
def test_a_shape_key_in_other_case_names_the_key_to_rename(tmp_path: Path, typed: str) -> None:
    """#469: was ``Fix: write the model's num_hidden_layers in the file, e.g. "num_hidden_layers": 32.``,
    which passes as the 32-block model the 2-block file does not describe."""
    pytest.importorskip("transformers")
    from flopsweep.models.hf import HFConfig, check_file

    shipped = Path(__file__).resolve().parents[2] / "flopsweep" / "models" / "hf_configs" / "qwen3-tiny.json"
    data = json.loads(shipped.read_text())
    data[typed] = data.pop("num_hidden_layers")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as caught:
        check_file(HFConfig(config=str(path)))
    assert str(caught.value).endswith(
        f'Fix: rename {typed} to num_hidden_layers in the file: "num_hidden_layers": 2.'
    )
    data["num_hidden_layers"] = data.pop(typed)
    path.write_text(json.dumps(data))
    check_file(HFConfig(config=str(path)))  # the fix passes


@pytest.mark.parametrize("clusters", [[], ["plan_clusters=[H100:8]"]])
def test_a_plan_job_below_a_sub_folder_appends_to_the_sweeps_plan_csv(
    hydra_compose, tmp_path: Path, clusters: list[str]
) -> None:
    """#470: ``-m plan=true model=gpt-tiny,llama-tiny seed=0,1``, its subdir
    ``${hydra.runtime.choices.model}/${seed}``, appended each job's row to ``S/<model>/plan.csv`` (the job
    folder's parent): the sweep's table, read from ``S/plan.csv``, never printed; the summary: ``0 ok``."""
    from flopsweep.job import JobInfo, plan_job

    sweep = tmp_path / "S"
    job_dir = sweep / "gpt-tiny" / "0"
    job_dir.mkdir(parents=True)
    info = JobInfo(job_dir=job_dir, overrides=["model=gpt-tiny"], job_num=0, sweep_dir=str(sweep))
    out = plan_job(hydra_compose(["plan=true", "model=gpt-tiny", *clusters]), info)
    assert out.get("status") != "invalid", out
    rows = (sweep / "plan.csv").read_text().splitlines()
    assert len(rows) >= 2 and rows[1].startswith("0,")  # the header, then job 0's row(s)
    assert not (sweep / "gpt-tiny" / "plan.csv").exists()


def _mine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    """A copy of ``conf/`` whose ``sweep/mine.yaml`` is ``text`` (a ``_global_`` package); its path."""
    from flopsweep import override_schema
    from flopsweep.override_schema import CONF

    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf, symlinks=False)
    monkeypatch.setattr(override_schema, "CONF", str(conf))
    (conf / "sweep" / "mine.yaml").write_text("# @package _global_\n" + text)
    return str(conf)


@pytest.mark.parametrize(
    ("text", "given", "said"),
    [
        (  # was: job 0 ran in .../0, job 1 stopped on .../0/metrics.json already exists, exit 1
            "repeats: 2\n",
            ["hydra.sweep.subdir=${seed}"],
            "Invalid config: hydra.sweep.subdir=${seed}: is the same for every job",
        ),
        (
            "repeats: 2\nhydra:\n  sweep:\n    subdir: ${seed}\n",
            [],
            "Invalid config: conf/sweep/mine.yaml: hydra.sweep.subdir: ${seed}: is the same for every job",
        ),
        (
            "repeats: 2\nhydra:\n  sweeper:\n    params:\n      seed: 0,1\n",
            ["hydra.sweep.subdir=${seed}"],
            "Invalid config: hydra.sweep.subdir=${seed}: two jobs of the sweep would write into one folder "
            "(0 under hydra.sweep.dir): seed=0 repeat=0 and seed=0 repeat=1",
        ),
    ],
)
def test_a_sweep_files_repeats_are_rounds_to_the_subdir_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, given: list[str], said: str
) -> None:
    """#471: a sweep file's ``repeats: 2`` with ``subdir: ${seed}`` passed #381's and #439's checks."""
    from flopsweep.sweep_subdir import fixed_subdir_problem

    conf = _mine(tmp_path, monkeypatch, text)
    argv = ["-m", "+sweep=mine", "device=cpu", *given]
    line = fixed_subdir_problem(argv, conf)
    assert line is not None and line.startswith(said)
    fixed = [g.replace("${seed}", "${seed}_${hydra.job.num}") for g in given]
    if not given:
        (Path(conf) / "sweep" / "mine.yaml").write_text(
            "# @package _global_\n" + text.replace("${seed}", "${seed}_${hydra.job.num}")
        )
    assert fixed_subdir_problem(["-m", "+sweep=mine", "device=cpu", *fixed], conf) is None
    assert fixed_subdir_problem([*argv, "repeats=1"], conf) is None  # the command line's one round wins
    by_round = fixed_subdir_problem(["-m", "+sweep=mine", "device=cpu", "hydra.sweep.subdir=${repeat}"], conf)
    assert (by_round is None) == ("seed: 0,1" not in text)  # the rounds' own folders, unless seed varies too


def test_a_sweep_files_job_logging_key_is_typed_without_a_plus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#472: a sweep file's ``handlers.file.level: info`` said ``Fix: set +hydra.job_logging.handlers.file.
    level=INFO``: Hydra's five lines ``Could not append to config``, exit 1; without the ``+``, #399's."""
    from flopsweep.job_log_keys import job_logging_key_problem
    from flopsweep.sweep_file_hydra import output_dir_problem

    key = "hydra.job_logging.handlers.file.level"
    conf = _mine(
        tmp_path, monkeypatch, "hydra:\n  job_logging:\n    handlers:\n      file:\n        level: info\n"
    )
    argv = ["-m", "+sweep=mine", "device=cpu"]
    line = output_dir_problem(argv, conf)
    assert line is not None and line.endswith(
        f"(info is not one of CRITICAL, ERROR, WARNING, INFO, DEBUG, NOTSET). Fix: set {key}=INFO."
    )
    fixed = [*argv, f"{key}=INFO"]
    assert job_logging_key_problem(fixed, conf) is None  # the fix typed back
    assert output_dir_problem(fixed, conf) is None  # the command line's value replaces the file's
    plus = job_logging_key_problem([*argv, f"+{key}=DEBUG"], conf)
    assert plus == (
        f"Invalid config: +{key}=DEBUG: the sweep file sets it already, and + adds only a new key. Fix: set "
        f"it without the +: {key}=DEBUG."
    )
    bare = ["-m", "device=cpu"]  # no sweep file: #399's +, #444's none
    assert "Fix: add it with a +: +" in (job_logging_key_problem([*bare, f"{key}=INFO"], conf) or "")
    assert job_logging_key_problem([*bare, f"+{key}=INFO"], conf) is None
