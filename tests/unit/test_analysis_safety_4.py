"""Issue 40, the analysis side: outputs that would replace a record (class 4), reads bounded one by
one but not in total (class 5), deep folder trees (class 10) and records that lie consistently
(class 11).

Everything runs for real and in process: the CLI's ``main``, real hard links, symbolic links and a
3,000-level folder chain (made and removed through directory descriptors: its paths are longer than
the system's ``PATH_MAX``), real byte budgets. No test asserts a speed.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
from pathlib import Path

import pytest
from helpers import analysis_cli as cli
from helpers import fixture_record as ok_record  # the committed ok record, to edit
from helpers import put

from analysis import load
from analysis.load import discover, rankable
from analysis.output import OutputError, write_atomic
from flopsweep import budget as fb
from flopsweep import predict as pr
from flopsweep import tree
from flopsweep.config import ConfigError
from flopsweep.forecast import calibration_records
from flopsweep.plausible import calibration_problems, record_problems
from flopsweep.predict_record import predict_record

ROOT = Path(__file__).resolve().parents[2]
RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "records"
RESULTS = ROOT / "benchmarks" / "results"


def not_a_notebook_name(option: str, target: Path, err: str) -> bool:
    """Whether ``--notebook TARGET`` was refused first for its name (not ``.ipynb``: argparse's one
    line, before any record guard); asserted when so."""
    if option != "--notebook" or Path(target).suffix.lower() == ".ipynb":
        return False
    assert "argument --notebook" in err and "a notebook's name ends in .ipynb" in err, err
    return True


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links as their targets' names), to compare before and after."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = os.readlink(path).encode()
        elif path.is_file():
            found[str(path)] = path.read_bytes()
    return found


# --- class 4: no output replaces a record -----------------------------------------------------------


def _target(tmp: Path, how: str) -> Path:
    """An output path that would replace a record that is not among the records read (``tmp/A``):
    the record ``tmp/B/metrics.json`` under another spelling, or another record under any name."""
    b = tmp / "B"
    record = put(b, ok_record())
    if how == "named":
        return record
    if how == "named_new":  # no record there yet: the name alone is a record's
        (b / "empty").mkdir()
        return b / "empty" / "metrics.json"
    if how == "set_aside":  # resume=true's metrics.<status>-<id>.json
        return put(b, ok_record(), "metrics.ok-run-1.json")
    if how == "upper_case":
        return b / "METRICS.JSON"
    if how == "dotdot":
        return tmp / "A" / ".." / "B" / "." / "metrics.json"
    if how == "dir_link":
        (tmp / "L").symlink_to(b)
        return tmp / "L" / "metrics.json"
    if how == "hard_link":
        os.link(record, b / "report.md")
        return b / "report.md"
    if how == "renamed":
        return put(b, ok_record(), "old-run.json")
    if how == "file_link":
        (b / "report.md").symlink_to(record)
        return b / "report.md"
    if how == "link_to_renamed":
        renamed = put(b, ok_record(), "old-run.json")
        (tmp / "report.html").symlink_to(renamed)
        return tmp / "report.html"
    if how == "error_record":  # not ok, still a record
        failed = json.loads((RECORDS / "v2-error" / "metrics.json").read_text())
        return put(b, failed, "failed.json")
    raise AssertionError(how)


TARGETS = [
    "named",
    "named_new",
    "set_aside",
    "upper_case",
    "dotdot",
    "dir_link",
    "hard_link",
    "renamed",
    "file_link",
    "link_to_renamed",
    "error_record",
]


@pytest.mark.parametrize("option", ["--output", "--notebook"])
@pytest.mark.parametrize("how", TARGETS)
def test_no_output_replaces_a_record_that_is_not_read(tmp_path, capsys, how, option):
    put(tmp_path / "A" / "run", ok_record())
    target = _target(tmp_path, how)
    before = snapshot(tmp_path)
    code, out, err = cli(capsys, tmp_path / "A", option, target)
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and "usage:" not in err and "starting a kernel" not in err, err
    if not not_a_notebook_name(option, target, err):
        assert f"{option} " in err and "no output of the analysis replaces a record" in err, err
    assert snapshot(tmp_path) == before


def _run_file(tmp: Path, how: str) -> Path:
    """A file a sweep wrote in ``tmp/S`` (job ``0``), under the name ``how`` says, or a path to it."""
    sweep, job = tmp / "S", tmp / "S" / "0"
    put(job, ok_record())
    put(sweep, "hydra: {}\n", "multirun.yaml")
    for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        put(job / ".hydra", f"{name}: mine\n", name)
    put(job, "[log] a line\n", "run.log")
    put(job / ".flopsweep", "measure", "rank0_phase.txt")
    put(sweep, "job,model\n", "plan.csv")
    put(job / "profile", "{}", "rank0.trace.json")
    put(sweep / ".submitit" / "4242", "pickle", "4242_submitted.pkl")
    put(tmp, "", ".S.flopsweep-lock")
    if how in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        return job / ".hydra" / how
    if how == "new name in .hydra":
        return job / ".hydra" / "report.md"
    if how == "scratch":
        return job / ".flopsweep" / "rank0_phase.txt"
    if how == "MULTIRUN.YAML":
        return sweep / how
    if how in ("multirun.yaml", "plan.csv"):
        return sweep / how
    if how == "job log":
        return job / "run.log"
    if how == "profile trace":
        return job / "profile" / "rank0.trace.json"
    if how == "submitit pickle":
        return sweep / ".submitit" / "4242" / "4242_submitted.pkl"
    if how == "lock file":
        return tmp / ".S.flopsweep-lock"
    if how == "link to config.yaml":
        (tmp / "report.md").symlink_to(job / ".hydra" / "config.yaml")
        return tmp / "report.md"
    if how == "linked run folder":
        (tmp / "L").symlink_to(job)
        return tmp / "L" / ".hydra" / "hydra.yaml"
    raise AssertionError(how)


RUN_FILES = [
    "config.yaml",
    "hydra.yaml",
    "overrides.yaml",
    "new name in .hydra",
    "scratch",
    "multirun.yaml",
    "MULTIRUN.YAML",
    "plan.csv",
    "job log",
    "profile trace",
    "submitit pickle",
    "lock file",
    "link to config.yaml",
    "linked run folder",
]


@pytest.mark.parametrize("option", ["--output", "--notebook"])
@pytest.mark.parametrize("how", RUN_FILES)
def test_no_output_replaces_a_file_a_run_wrote(tmp_path, capsys, how, option):
    """``--output RUN/.hydra/config.yaml`` (a run's composed config), ``multirun.yaml``, a job's log,
    ``plan.csv``, a scratch file, also through links: refused in one line, exit 2, nothing written;
    the records read are the sweep's own."""
    target = _run_file(tmp_path, how)
    before = snapshot(tmp_path)
    code, out, err = cli(capsys, tmp_path / "S", option, target)
    assert code == 2 and out == "", err
    assert err.count("\n") == 1, err
    if not not_a_notebook_name(option, target, err):
        assert f"{option} " in err and "a run's own file" in err, err
    assert snapshot(tmp_path) == before


def test_plots_into_a_runs_hydra_folder_are_refused_naming_a_folder(tmp_path, capsys):
    """``--plot RUN/.hydra`` names a folder: refused in one line whose fix asks for another folder
    (not "another file (e.g. report.md)"), nothing written."""
    target = _run_file(tmp_path, "new name in .hydra").parent
    before = snapshot(tmp_path)
    code, out, err = cli(capsys, tmp_path / "S", "--plot", target)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "--plot " in err and "name another folder (e.g. plots)" in err and "report.md" not in err, err
    assert snapshot(tmp_path) == before


NESTED = {
    "sub of .hydra": ("0", ".hydra", "sub"),
    "sub of .flopsweep": ("0", ".flopsweep", "sub"),
    "sub of a submitit job": (".submitit", "4242", "sub"),
    "deep under .submitit": (".submitit", "new", "a", "b"),
}


@pytest.mark.parametrize("option", ["--output", "--notebook", "--plot"])
@pytest.mark.parametrize("where", sorted(NESTED))
def test_no_output_goes_anywhere_under_a_runs_own_folders(tmp_path, capsys, where, option):
    """A folder at any depth under a run's ``.hydra``, ``.flopsweep`` or ``.submitit`` is the run's:
    refused in one line whose fix fits the option (a folder for ``--plot``, a notebook name for
    ``--notebook``), nothing written."""
    _run_file(tmp_path, "config.yaml")
    folder = tmp_path.joinpath("S", *NESTED[where])
    target = folder if option == "--plot" else folder / ("r.ipynb" if option == "--notebook" else "r.md")
    before = snapshot(tmp_path)
    code, out, err = cli(capsys, tmp_path / "S", option, target)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{option} " in err and "a run's own file" in err, err
    fix = err.split("a run's own file: ", 1)[1]
    example = {"--plot": "name another folder (e.g. plots)", "--notebook": "(e.g. report.ipynb)"}
    assert example.get(option, "(e.g. report.md)") in fix and "outside every run's .hydra" in fix, err
    assert snapshot(tmp_path) == before


def test_a_plot_linked_to_a_record_being_read_asks_for_another_folder(tmp_path, capsys):
    """``--plot P`` where ``P/tflops_vs_micro_batch.png`` links to a record being read: the fix
    names a folder, as every ``--plot`` refusal does."""
    record = put(tmp_path / "S" / "0", ok_record())
    (tmp_path / "P").mkdir()
    (tmp_path / "P" / "tflops_vs_micro_batch.png").symlink_to(record)
    code, _, err = cli(capsys, tmp_path / "S", "--plot", tmp_path / "P")
    assert code == 2 and "being read" in err and "name another folder (e.g. plots)" in err, err


def test_a_log_or_csv_outside_run_folders_is_written(tmp_path, capsys):
    """The rule names a run's files, not every ``.log``: a table to ``out/table.log`` or
    ``out/plan.csv`` in a folder of no run is written."""
    put(tmp_path / "A" / "run", ok_record())
    for name in ("table.log", "plan.csv"):
        target = tmp_path / "out" / name
        target.parent.mkdir(exist_ok=True)
        code, _, err = cli(capsys, tmp_path / "A", "--format", "csv", "--output", target)
        assert code == 0 and "run-ok" in target.read_text(), err


def test_plot_files_that_are_records_are_refused_before_anything_is_written(tmp_path, capsys):
    """A record renamed as one of the PNGs, or a link there to a record: refused before any plot."""
    put(tmp_path / "A" / "run", ok_record())
    plots = tmp_path / "plots"
    put(plots, ok_record(), "tflops_vs_micro_batch.png")
    for planted in ("a record renamed", "a link to a record"):
        if planted == "a link to a record":
            (plots / "tflops_vs_micro_batch.png").unlink()
            (plots / "scaling.png").symlink_to(put(tmp_path / "B", ok_record()))
        before = snapshot(tmp_path)
        code, _, err = cli(capsys, tmp_path / "A", "--plot", plots)
        assert code == 2 and "--plot " in err and "replaces a record" in err, (planted, err)
        assert snapshot(tmp_path) == before, planted  # no PNG written, the planted file kept


def test_outputs_beside_records_and_over_other_files_are_written(tmp_path, capsys):
    """The rule refuses records, not folders: a report in a run's folder is written, and a JSON
    file that is not a record (no status and run/config/metrics) is replaced, with ``--force`` (without it
    any file there is refused: docs/reliability-5.md #314)."""
    record = put(tmp_path / "A" / "run", ok_record())
    before = record.read_bytes()
    beside = tmp_path / "A" / "run" / "report.md"
    code, _, err = cli(capsys, tmp_path / "A", "--format", "markdown", "--output", beside)
    assert code == 0 and beside.read_text().startswith("|"), err
    other = put(tmp_path / "out", {"hello": 1, "status": "not a record"}, "table.json")
    code, _, err = cli(capsys, tmp_path / "A", "--format", "json", "--output", other, "--force")
    assert code == 0 and json.loads(other.read_text())[0]["run_id"] == "run-ok", err
    assert record.read_bytes() == before


def test_the_writers_check_again_just_before_the_rename(tmp_path):
    """A record put at the output path after the first check (while the table or the kernel ran)
    is not replaced either: write_atomic and the notebook's writer refuse it, nothing left behind."""
    record = put(tmp_path / "B", ok_record(), "report.md")
    before = record.read_bytes()
    with pytest.raises(OutputError, match="holds a flopsweep record"):
        write_atomic(record, b"a table\n")
    assert record.read_bytes() == before and os.listdir(tmp_path / "B") == ["report.md"]
    nbformat = pytest.importorskip("nbformat")
    from analysis.notebook import write

    with pytest.raises(OutputError, match="holds a flopsweep record"):
        write(nbformat.v4.new_notebook(), record)
    assert record.read_bytes() == before and os.listdir(tmp_path / "B") == ["report.md"]


# --- class 5: the total read is bounded -------------------------------------------------------------


def _padded(run_id: str, pad_bytes: int) -> dict:
    """An ok record with ``pad_bytes`` of text in a key no reader uses (a record grown by hand)."""
    rec = ok_record()
    rec["run"]["id"] = run_id
    rec["notes"] = "x" * pad_bytes
    return rec


def test_hard_links_to_one_record_are_read_once(tmp_path, capsys):
    """150 hard links to one record, each its own job folder's metrics.json: one row, one read."""
    first = put(tmp_path / "runs" / "000", _padded("linked", 1 << 20))
    for i in range(1, 150):
        (tmp_path / "runs" / f"{i:03d}").mkdir()
        os.link(first, tmp_path / "runs" / f"{i:03d}" / "metrics.json")
    found, skipped = discover([tmp_path / "runs"])
    assert found == [first] and skipped == {}
    budget = fb.ReadBudget(total=64 << 20)
    df = load(tmp_path / "runs", budget=budget)
    assert df["run_id"].tolist() == ["linked"] and df.attrs["unreadable"] == {}
    assert budget.total - budget.left < 2 << 20  # one file read, and one row kept
    views = calibration_records(str(tmp_path / "runs"), budget=fb.ReadBudget(total=64 << 20))
    assert [name for name, _ in views] == [str(first)]
    code, out, err = cli(capsys, tmp_path / "runs", "--format", "csv")
    assert code == 0 and out.count("linked") == 1, err


def test_records_past_the_budget_are_skipped_with_the_reason(tmp_path, monkeypatch, capsys):
    """Eight 4 MiB records under a 16 MiB budget (FLOPSWEEP_READ_BUDGET): the first ones are read,
    each of the rest is skipped naming the budget and how to raise it; the same in the analysis, in
    its CLI and in predict.calibration."""
    for i in range(8):
        put(tmp_path / "runs" / str(i), _padded(f"big-{i}", 4 << 20))
    monkeypatch.setenv(fb.BUDGET_ENV, str(16 << 20))
    df = load(tmp_path / "runs")
    assert 1 <= len(df) <= 4, df["run_id"].tolist()
    skipped = df.attrs["unreadable"]
    assert len(skipped) == 8 - len(df)
    assert all("would pass the 16.0 MiB" in why and fb.BUDGET_ENV in why for why in skipped.values())
    code, _, err = cli(capsys, tmp_path / "runs", "--format", "csv")
    assert code == 0 and f"{len(skipped)} unreadable records skipped" in err, err
    views = calibration_records(str(tmp_path / "runs"))
    assert 1 <= len(views) <= 4
    assert all("notes" not in view for _, view in views)  # only what a prediction reads is kept


def test_a_bad_budget_is_one_line_naming_the_variable(tmp_path, monkeypatch, capsys):
    put(tmp_path / "runs" / "0", ok_record())
    for bad in ("lots", "-1", "1000"):
        monkeypatch.setenv(fb.BUDGET_ENV, bad)
        code, _, err = cli(capsys, tmp_path / "runs")
        assert code == 2 and err.count("\n") == 1 and fb.BUDGET_ENV in err and repr(bad) in err, err
        with pytest.raises(ConfigError, match=fb.BUDGET_ENV):
            calibration_records(str(tmp_path / "runs"))


def test_the_default_budget_is_a_share_of_free_memory_under_a_ceiling(monkeypatch):
    from flopsweep import hostmem

    monkeypatch.delenv(fb.BUDGET_ENV, raising=False)
    free = hostmem.available_bytes()
    assert fb.budget_bytes() == fb.default_budget() == max(fb.MIN_BUDGET, min(fb.MAX_BUDGET, free // 4))
    monkeypatch.setattr(hostmem, "available_bytes", lambda: 200 << 20)  # a small cgroup
    assert fb.default_budget() == 50 << 20
    monkeypatch.setattr(hostmem, "available_bytes", lambda: 1 << 20)
    assert fb.default_budget() == fb.MIN_BUDGET  # one record of the largest size can be read
    monkeypatch.setattr(hostmem, "available_bytes", lambda: 1 << 40)
    assert fb.default_budget() == fb.MAX_BUDGET
    monkeypatch.setenv(fb.BUDGET_ENV, str(fb.MIN_BUDGET))
    assert fb.budget_bytes() == fb.MIN_BUDGET


def test_the_calibration_view_keeps_what_a_prediction_reads_and_predicts_the_same():
    """Over committed records: each ok record's prediction from the others' views equals the one
    from the whole records; a view holds no step list and no key the prediction does not read."""
    paths = sorted((RESULTS / "h200").glob("energy/**/metrics.json")) + sorted(
        (RESULTS / "h200x2").glob("**/metrics.json")
    )
    records = [(str(p), json.loads(p.read_text())) for p in paths]
    assert len(records) >= 10
    views = [(n, pr.calibration_view(r)) for n, r in records]
    for (name, record), (_, view) in zip(records, views, strict=True):
        assert "values" not in (view["metrics"].get("iteration_time_s") or {})
        assert set(view) == {"schema_version", "status", "run", "config", "model", "system", "metrics"}
        if record["status"] == "ok":
            assert predict_record(name, view, views) == predict_record(name, record, records), name


def test_deep_size_counts_what_is_kept():
    big = {"values": [float(i) for i in range(10_000)]}
    assert fb.deep_size(big) > 10_000 * sys.getsizeof(1.0)
    nested: list = []
    for _ in range(5_000):  # deeper than the interpreter's recursion limit
        nested = [nested]
    assert fb.deep_size(nested) >= 5_000 * sys.getsizeof([])
    budget = fb.ReadBudget(total=fb.MIN_BUDGET)
    with pytest.raises(fb.BudgetSpent, match="not kept"):
        budget.keep(["x" * (fb.MIN_BUDGET + 1)])
    assert budget.left == budget.total


# --- class 10: deep folder trees --------------------------------------------------------------------

DEPTH = 3_000


def _chain(base: Path, depth: int) -> None:
    """``base/d/d/.../d`` ``depth`` levels deep, with a record at the bottom, made through directory
    descriptors (the path is longer than PATH_MAX); two descriptors open at a time."""
    flags = os.O_RDONLY | os.O_DIRECTORY
    fd = os.open(base, flags)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", flags, dir_fd=fd)
            os.close(fd)
            fd = sub
        out = os.open("metrics.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
        os.write(out, json.dumps(ok_record()).encode())
        os.close(out)
    finally:
        os.close(fd)


def _remove_chain(base: Path) -> None:
    """Remove what :func:`_chain` made under ``base``, deepest first, without recursion."""
    flags = os.O_RDONLY | os.O_DIRECTORY
    fd, depth = os.open(base, flags), 0
    while "d" in os.listdir(fd):
        sub = os.open("d", flags, dir_fd=fd)
        os.close(fd)
        fd, depth = sub, depth + 1
    for name in os.listdir(fd):
        os.unlink(name, dir_fd=fd)
    while depth:
        up = os.open("..", flags, dir_fd=fd)
        os.close(fd)
        fd, depth = up, depth - 1
        os.rmdir("d", dir_fd=fd)
    os.close(fd)


def _beside_the_chain(sweep: Path) -> list[Path]:
    """The paths under ``sweep`` outside its chain (``deep/``), and ``deep/``'s own entries."""
    out = [sweep / "deep" / name for name in os.listdir(sweep / "deep")]
    out += [p for top in sweep.iterdir() if top.name != "deep" for p in [top, *top.rglob("*")]]
    return sorted(out)


@pytest.fixture(scope="module")
def deep_sweep(tmp_path_factory):
    """A sweep folder with one ok record (``0/``) and a 3,000-level folder chain (``deep/``), made once
    for the module's tests, which only read it (made for each test, its removals took 5-15 s on a
    loaded machine: 3,000 ``rmdir`` calls each); its files are the same after them."""
    sweep = tmp_path_factory.mktemp("deep") / "sweep"
    put(sweep / "0", ok_record())
    (sweep / "deep").mkdir()
    try:
        _chain(sweep / "deep", DEPTH)
        made = _beside_the_chain(sweep)
        yield sweep
        assert _beside_the_chain(sweep) == made
    finally:
        _remove_chain(sweep / "deep")


def test_a_3000_level_chain_is_walked_to_its_bound_and_the_record_beside_it_is_read(deep_sweep, capsys):
    df = load(deep_sweep)
    assert df["run_id"].tolist() == ["run-ok"]
    ((where, why),) = df.attrs["unreadable"].items()
    assert where == str(deep_sweep.joinpath("deep", *["d"] * (tree.MAX_DEPTH - 1)))
    assert f"nested more than {tree.MAX_DEPTH} levels below {deep_sweep}" in why
    code, out, err = cli(capsys, deep_sweep, "--format", "csv")
    assert code == 0 and "run-ok" in out and "RecursionError" not in err
    found, skipped = discover([f"{deep_sweep}/**/metrics.json"])
    assert found == [deep_sweep / "0" / "metrics.json"] and len(skipped) == 1


def test_a_3000_level_chain_in_a_calibration_folder_and_in_the_sweep_summary(deep_sweep):
    from flopsweep.callbacks import count_statuses, ok_run_ids

    views = calibration_records(str(deep_sweep))
    assert [Path(name).parent.name for name, _ in views] == ["0"]
    assert count_statuses(deep_sweep) == {"ok": 1}
    assert list(ok_run_ids(deep_sweep).values()) == ["run-ok"]


def test_the_walk_bound_is_a_parameter_and_links_are_not_entered(tmp_path):
    put(tmp_path / "a" / "b" / "c", ok_record())
    (tmp_path / "loop").symlink_to(tmp_path)
    skipped: dict[str, str] = {}
    assert tree.find(tmp_path, "metrics.json", skipped) == [tmp_path / "a" / "b" / "c" / "metrics.json"]
    assert skipped == {}
    assert tree.find(tmp_path, "metrics.json", skipped, max_depth=2) == []
    assert list(skipped) == [str(tmp_path / "a" / "b")]
    assert tree.find(tmp_path / "missing", "metrics.json") == []


# --- class 11: records that lie consistently ----------------------------------------------------------


def consistent(
    base: dict,
    *,
    world: int = 2,
    step: float | None = None,
    peak: float | None = None,
    degrees: dict | None = None,
    n_steps: int | None = None,
    nproc: int | None = None,
) -> dict:
    """``base`` (an ok v2 record) with every derived figure recomputed from the given raw ones, as
    a careful liar would: the world size, the degrees, the step time, the GPU's peak, the count of
    measured steps."""
    r = copy.deepcopy(base)
    m, cfg = r["metrics"], r["config"]
    degrees = degrees or {"dp_replicate": 1, "dp_shard": world, "tp": 1, "pp": 1, "cp": 1}
    r["system"].update(world_size=world, nproc_per_node=world if nproc is None else nproc, parallel=degrees)
    model_per_token = m["model_flops_per_iteration"] / m["tokens_per_step"]
    hardware_per_token = m["hardware_flops_per_iteration"] / m["tokens_per_step"]
    dp = degrees["dp_replicate"] * degrees["dp_shard"]
    m["global_batch_size"] = cfg["batch"]["micro_batch_size"] * cfg["batch"]["grad_accum"] * dp
    m["tokens_per_step"] = m["global_batch_size"] * cfg["model"]["seq_len"]
    m["model_flops_per_iteration"] = model_per_token * m["tokens_per_step"]
    m["hardware_flops_per_iteration"] = hardware_per_token * m["tokens_per_step"]
    step = m["iteration_time_s"]["mean"] if step is None else step
    n = n_steps or len(m["iteration_time_s"]["values"])
    m["iteration_time_s"] = dict(
        mean=step, median=step, min=step, max=step, std=0.0, cv=0.0, values=[step] * n
    )
    m["tokens_per_s"] = m["tokens_per_step"] / step
    m["tokens_per_s_per_device"] = m["tokens_per_s"] / world
    m["model_tflops_per_device"] = m["tflops_per_device"] = (
        m["model_flops_per_iteration"] / step / world / 1e12
    )
    m["hardware_tflops_per_device"] = m["hardware_flops_per_iteration"] / step / world / 1e12
    m["peak_tflops"] = peak or m["peak_tflops"]
    m["mfu"] = m["model_tflops_per_device"] / m["peak_tflops"]
    m["hfu"] = m["hardware_tflops_per_device"] / m["peak_tflops"]
    if m.get("peak_tflops_fp8"):
        m["mfu_fp8"] = m["model_tflops_per_device"] / m["peak_tflops_fp8"]
    m["matmul_fraction"] = m["model_tflops_per_device"] / m["measured_matmul_tflops"]
    return r


def deg(dp_replicate: int = 1, dp_shard: int = 1, tp: int = 1, pp: int = 1, cp: int = 1) -> dict:
    return {"dp_replicate": dp_replicate, "dp_shard": dp_shard, "tp": tp, "pp": pp, "cp": cp}


def _liar(how: str) -> dict:
    base = ok_record()
    if how == "degrees_under_world":
        return consistent(
            base, world=4, degrees={"dp_replicate": 1, "dp_shard": 2, "tp": 1, "pp": 1, "cp": 1}
        )
    if how == "degrees_over_world":
        return consistent(
            base, world=4, degrees={"dp_replicate": 2, "dp_shard": 4, "tp": 2, "pp": 1, "cp": 1}
        )
    if how == "degree_zero":
        return consistent(
            base, world=2, degrees={"dp_replicate": 1, "dp_shard": 2, "tp": 0, "pp": 1, "cp": 1}
        )
    if how == "nproc_x_nnodes":
        return consistent(base, world=4, nproc=2)
    if how == "step_tiny":
        return consistent(base, step=1e-9)
    if how == "step_1e300":
        return consistent(base, step=1e300)
    if how == "steps_past_the_wall_clock":
        return consistent(base, step=20.0)  # five steps of 20 s in a 60 s run
    if how == "mfu_above_one":
        honest = consistent(base)
        return consistent(base, peak=honest["metrics"]["model_tflops_per_device"] / 1.5)
    if how == "steps_count":
        return consistent(base, n_steps=9)  # config.steps.measure is 5
    rec = consistent(base)
    m = rec["metrics"]
    if how in ("world_zero", "world_negative", "world_fraction"):
        rec["system"]["world_size"] = {"world_zero": 0, "world_negative": -2, "world_fraction": 1.5}[how]
    elif how == "step_zero":
        m["iteration_time_s"] = dict.fromkeys(("mean", "median", "min", "max", "std", "cv"), 0.0)
        m["iteration_time_s"]["values"] = [0.0] * 5
    elif how == "step_infinite":
        m["iteration_time_s"]["mean"] = math.inf
    elif how == "tokens_per_step":
        for key in ("tokens_per_step", "tokens_per_s", "tokens_per_s_per_device"):
            m[key] *= 2
    elif how == "tflops":
        m["model_tflops_per_device"] *= 2
        m["tflops_per_device"] *= 2
        m["mfu"] *= 2
        m["matmul_fraction"] *= 2
    else:
        raise AssertionError(how)
    return rec


MESH = "system.parallel dp_replicate x dp_shard x tp x pp x cp"
LIES = {
    "degrees_under_world": f"{MESH} = 2 != system.world_size 4",
    "degrees_over_world": f"{MESH} = 16 != system.world_size 4",
    "degree_zero": "system.parallel.tp 0 is not a positive whole number",
    "nproc_x_nnodes": "system.world_size 4 != nproc_per_node 2 x nnodes 1",
    "world_zero": "system.world_size 0 is not a positive whole number",
    "world_negative": "system.world_size -2 is not a positive whole number",
    "world_fraction": "system.world_size 1.5 is not a positive whole number",
    "step_zero": "iteration_time_s.mean 0 s is under 0.00001 s",
    "step_tiny": "iteration_time_s.mean 1e-9 s is under 0.00001 s",  # figure: no leading zero (#724); #844
    "step_infinite": "iteration_time_s.mean is not finite",
    "step_1e300": "iteration_time_s.mean 1e300 s is over a week",  # figure: no + (#724)
    "steps_past_the_wall_clock": "the measured steps take 100 s, more than the run's 60 s",
    "mfu_above_one": "mfu 1.5 is above 1",
    "steps_count": "iteration_time_s has 9 values, config.steps.measure 5",
    "tokens_per_step": "tokens_per_step",
    "tflops": "model_tflops_per_device",
}


def test_the_consistent_helper_makes_an_honest_record():
    for world in (1, 2, 4):
        assert calibration_problems(consistent(ok_record(), world=world)) == [], world


@pytest.mark.parametrize("how", sorted(LIES))
def test_a_consistent_liar_is_flagged_left_out_of_rankings_and_never_calibrates(tmp_path, how):
    liar = _liar(how)
    problems = calibration_problems(liar)
    assert any(LIES[how] in p for p in problems), problems
    if how != "tflops":  # the TFLOPs recomputation is its own flag (tflops?), not check?
        assert any(LIES[how] in p for p in record_problems(liar))
    liar["run"]["id"] = "liar"
    honest = consistent(ok_record())
    text = json.dumps(liar).replace("Infinity", "1e999")  # strict JSON: 1e999 reads as infinity
    put(tmp_path / "a-liar", text)
    put(tmp_path / "b-honest", honest)
    df = load(tmp_path).set_index("run_id")
    assert rankable(df).to_dict() == {"liar": False, "run-ok": True}
    views = calibration_records(str(tmp_path))
    assert [Path(name).parent.name for name, _ in views] == ["b-honest"]
    with pytest.raises(ConfigError, match="fails its checks") as err:
        calibration_records(str(tmp_path / "a-liar" / "metrics.json"))
    assert "\n" not in str(err.value) and "predict.calibration" in str(err.value)
    (tmp_path / "b-honest" / "metrics.json").unlink()
    with pytest.raises(ConfigError, match="holds no metrics.json that may calibrate"):
        calibration_records(str(tmp_path))


def test_analysis_predict_calibrates_from_the_honest_record_not_the_liar(tmp_path):
    """A two-rank run, an honest one-rank calibration and a one-rank liar that would be picked first
    (its name sorts first): ``--predict`` calibrates from the honest one."""
    liar = consistent(ok_record(), world=1, step=20.0)  # five steps of 20 s in a 60 s run
    assert calibration_problems(liar) and liar["metrics"]["iteration_time_s"]["mean"] > 1
    liar["run"]["id"] = "liar"
    put(tmp_path / "a-liar", liar)
    one = consistent(ok_record(), world=1)
    one["run"]["id"] = "one"
    put(tmp_path / "b-honest", one)
    two = consistent(ok_record(), world=2)
    two["run"]["id"] = "two"
    probe = [{"collective": c, "bytes": 1 << 28, "busbw_gbps": 300.0} for c in pr.COLLECTIVES]
    two["system"]["interconnect"] = probe  # the run's own bandwidths: only the compute is calibrated
    put(tmp_path / "c-target", two)
    df = load(tmp_path, predict=True).set_index("run_id")
    source = df.loc["two", "predicted_source"]
    assert "calibrated: " in source and "b-honest" in source and "a-liar" not in source, source


# --- class 12: a moved sweep, resumed, pools with its earlier rounds -----------------------------------


def test_a_moved_sweep_resumed_pools_with_its_earlier_rounds(tmp_path):
    """Rounds 0 and 1 ran in S (their repeat_group is S's hash), the sweep was moved to T and
    resumed, round 2 ran there (T's hash): one pooled row of 3 rounds. Another sweep U of the same
    set-up keeps its own row, and a copy of a round elsewhere still counts once."""
    from helpers import rescaled

    for n, (rate, group) in enumerate(
        [(1000.0, "f00-from-s"), (1100.0, "f00-from-s"), (1200.0, "0ab-from-t")]
    ):
        rec = rescaled(ok_record(), world=2, tokens_per_device=rate)
        rec["run"].update(id=f"t-{n}", repeat=n, repeats=3, repeat_group=group)
        put(tmp_path / "T" / str(n), rec)
        if n == 0:
            put(tmp_path / "copy", rec)
    for n in range(2):
        rec = rescaled(ok_record(), world=2, tokens_per_device=900.0 + n)
        rec["run"].update(id=f"u-{n}", repeat=n, repeats=2, repeat_group="u-group")
        put(tmp_path / "U" / str(n), rec)
    df = load(tmp_path).set_index(
        "run_id"
    )  # a pooled row's run_id lists its rounds' (analysis.spread.JOINED)
    assert df["repeats"].to_dict() == {"t-0, t-1, t-2": 3, "u-0, u-1": 2}
    rate = 3 / (1 / 1000 + 1 / 1100 + 1 / 1200)  # the three rounds' mean step's (analysis.spread)
    assert df.loc["t-0, t-1, t-2", "tokens_per_s_per_device"] == pytest.approx(rate)
    assert df.loc["t-0, t-1, t-2", "repeat_group"] == "0ab-from-t"


@pytest.mark.parametrize("planted", ["link to the null device", "fifo", "link to a fifo", "directory"])
@pytest.mark.parametrize("option", ["--output", "--notebook"])
def test_an_output_never_replaces_what_is_not_a_regular_file(tmp_path, capsys, planted, option):
    """``--output /dev/null`` once renamed its new file over the device (and ``/dev/stdout`` over its
    link to a pipe): an output path that holds a FIFO, a device or a directory, or a link to one,
    is refused in one line, exit 2, and left as it was. (Planted here as a link to the
    null device, never the device itself: a regression must not clobber the machine's.)"""
    put(tmp_path / "A" / "run", ok_record())
    target = tmp_path / "out" / ("report.ipynb" if option == "--notebook" else "report.md")
    target.parent.mkdir()
    if planted == "link to the null device":
        target.symlink_to(os.devnull)
    elif planted == "fifo":
        os.mkfifo(target)
    elif planted == "link to a fifo":
        os.mkfifo(tmp_path / "pipe")
        target.symlink_to(tmp_path / "pipe")
    else:
        target.mkdir()
    before = os.lstat(target)
    code, out, err = cli(capsys, tmp_path / "A", option, target)
    assert code == 2 and out == "" and err.count("\n") == 1 and "not a regular file" in err, err
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


# --- round five: what a fresh user still met ---------------------------------------------------------


def test_a_too_deep_folder_is_a_folder_skipped_not_an_unreadable_record(deep_sweep, capsys, caplog):
    """The 3,000-level chain beside a record: the footer says a folder nested past the walk's limit
    was skipped (never "unreadable record"), the warning names a folder and flopsweep's limit."""
    code, out, err = cli(capsys, deep_sweep)
    assert code == 0
    footer = f"1 run (1 ok); 1 folder nested deeper than the {tree.MAX_DEPTH}-level limit skipped"
    assert footer in (out + err).splitlines(), out + err
    assert "unreadable record" not in out + err + caplog.text
    assert "skipping the folder " in caplog.text and "flopsweep's limit of a walk" in caplog.text


def test_output_dash_writes_to_stdout_and_no_file_named_dash(tmp_path, capsys, monkeypatch):
    put(tmp_path / "runs" / "0", ok_record())
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, tmp_path / "runs", "--output", "-", "--format", "csv")
    assert code == 0, err
    assert out.startswith('"model",') and "wrote" not in err
    assert not (tmp_path / "-").exists()


def test_a_baseline_no_run_matches_lists_the_values_present(tmp_path, capsys):
    rec = ok_record()
    put(tmp_path / "runs" / "0", rec)
    backend = rec["config"]["backend"]["name"]
    code, out, err = cli(capsys, tmp_path / "runs", "--baseline", "backend=zero3")
    line = err.strip().splitlines()[-1]
    assert code != 0 and "no ok run matches the baseline backend=zero3" in line, err
    assert f"the ok runs have backend={backend}: give one of those values" in line


def test_hard_links_in_a_calibration_folder_are_one_warning(tmp_path, caplog):
    """300 hard links to one record in a calibration folder: one record read, and one warning saying
    how many names were skipped (not 300)."""
    first = put(tmp_path / "runs" / "000", ok_record())
    for i in range(1, 301):
        (tmp_path / "runs" / f"{i:03d}").mkdir()
        os.link(first, tmp_path / "runs" / f"{i:03d}" / "metrics.json")
    with caplog.at_level("WARNING"):
        views = calibration_records(str(tmp_path / "runs"))
    assert [name for name, _ in views] == [str(first)]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        "predict.calibration: 300 names (hard links) to records found already skipped "
        "(each file is read once)"
    ]
