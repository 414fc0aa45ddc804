"""Session 36: flopsweep's start (docs/reliability-5.md #340-#348): ``OMP_NUM_THREADS`` blank or unreadable,
a signal during run.py's imports, a damaged conf/config.yaml (a typo'd default, a key twice), a model file
with no family or another family's keys, ``plan_clusters`` written with ``×``, and unpicked option files that
a pick would refuse. Each line exact; no subprocess (tests/integration/test_start_36.py runs them)."""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import pytest

import flopsweep.signals
import run
from flopsweep import model_identity, override_schema
from flopsweep.cluster_prices import times_sign_problem
from flopsweep.option_file_keys import family_problem, option_file_problem
from flopsweep.override_schema import CONF
from flopsweep.signals import STOP_LINE
from flopsweep.start_checks import (
    BLANK_OMP_LINE,
    blank_omp_threads,
    omp_threads_line,
    option_file_lines,
    root_problem,
    runs_nothing,
)

RUN = ["device=cpu", "model=gpt-tiny", "steps.warmup=1", "steps.measure=1"]


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A copy of the checkout's ``conf/`` (its ``sweep`` link copied as a folder), the listings pointed at
    it; their caches cleared before and after."""
    copy = tmp_path / "conf"
    shutil.copytree(CONF, copy, symlinks=False)
    monkeypatch.setattr(override_schema, "CONF", str(copy))
    monkeypatch.setattr(model_identity, "CONF", str(copy))
    model_identity.options.cache_clear()
    yield copy
    model_identity.options.cache_clear()


# 1. OMP_NUM_THREADS


def test_a_blank_omp_num_threads_is_dropped_with_one_warning_before_libgomp_reads_it() -> None:
    environ = {"OMP_NUM_THREADS": ""}
    assert (
        blank_omp_threads(RUN, environ)
        == BLANK_OMP_LINE
        == (
            "flopsweep: warning: OMP_NUM_THREADS is set but empty; read as unset (each CPU rank takes its "
            "share of the cores). Fix: unset OMP_NUM_THREADS, or set it to a positive integer such as "
            "OMP_NUM_THREADS=1."
        )
    )
    assert environ == {}  # the ranks inherit it unset: worker.cpu_threads gives each its share
    spaces = {"OMP_NUM_THREADS": "  "}
    assert blank_omp_threads(["--help"], spaces) is None and spaces == {}  # dropped, no warning for help
    for kept in ({"OMP_NUM_THREADS": "2"}, {}):
        before = dict(kept)
        assert blank_omp_threads(RUN, kept) is None and kept == before


def test_an_unreadable_omp_num_threads_refuses_runs_not_help() -> None:
    environ = {"OMP_NUM_THREADS": "abc"}
    for printing in (["--help"], ["-h"], ["--hydra-help"], ["--version"], ["--cfg", "job"], ["--info"]):
        assert runs_nothing(printing), printing
        assert omp_threads_line(printing, environ) is None, printing
    assert not runs_nothing(RUN) and not runs_nothing(["-m", *RUN])
    assert omp_threads_line(RUN, environ) == (
        "OMP_NUM_THREADS='abc': is no positive whole number of threads (OpenMP would ignore it and each rank "
        "take torch's default). Fix: unset OMP_NUM_THREADS (each CPU rank takes its share of the cores), or "
        "set it to a positive integer such as OMP_NUM_THREADS=1."
    )


# 2. A signal during run.py's imports


def test_run_py_puts_its_signal_handlers_in_place_before_any_other_import() -> None:
    """run.py's first statements import only flopsweep.console under ``__main__`` (its import sets the
    starting handler, #606), then flopsweep.signals (standard library only; flopsweep.progress, itself
    standard library only at its top, when a job starts) and call stop_before_jobs under ``__main__``: a
    Ctrl-C during the ~0.8 s of imports after it is one line, 130."""
    tree = ast.parse(Path(run.__file__).read_text())
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    console, first, guard = body[1], body[2], body[3]
    assert isinstance(body[0], ast.ImportFrom) and body[0].module == "__future__"
    assert isinstance(console, ast.If) and ast.unparse(console.test) == "__name__ == '__main__'"
    assert ast.unparse(console.body[0]) == "import flopsweep.console"
    entry = ast.parse(
        (Path(flopsweep.signals.__file__).parent / "console.py").read_text()
    )  # not imported: it sets handlers
    assert {a.name for n in ast.walk(entry) if isinstance(n, ast.Import) for a in n.names} == {
        "os",
        "signal",
        "sys",
    }
    assert isinstance(first, ast.ImportFrom) and first.module == "flopsweep.signals"
    assert isinstance(guard, ast.If) and ast.unparse(guard.test) == "__name__ == '__main__'"
    assert ast.unparse(guard.body[0]) == "stop_before_jobs({})"
    signals = ast.parse(Path(flopsweep.signals.__file__).read_text())
    modules = {n.module for n in ast.walk(signals) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(signals) if isinstance(n, ast.Import) for a in n.names}
    stdlib = {"__future__", "atexit", "contextlib", "ctypes", "signal", "collections.abc", "os"}
    assert modules == stdlib | {"flopsweep.progress"}  # progress: imported when a job starts (#1060)
    progress = ast.parse((Path(flopsweep.signals.__file__).parent / "progress.py").read_text())
    assert {n.module for n in progress.body if isinstance(n, ast.ImportFrom)} | {
        a.name for n in progress.body if isinstance(n, ast.Import) for a in n.names
    } == {"__future__", "time"}  # what importing it runs: standard library only, as signals' own
    assert STOP_LINE.format(name="SIGINT") == (
        "flopsweep: stopped by SIGINT before any job started; nothing was recorded\n"
    )


# 3. A damaged conf/config.yaml


def test_a_typod_default_in_the_root_config_is_one_line_naming_the_near_option(conf: Path) -> None:
    root = conf / "config.yaml"
    root.write_text(root.read_text().replace("- model: gpt-tiny ", "- model: gpt-tinyy"))
    assert root_problem(["device=cpu"], str(conf)) == (
        "Invalid config: conf/config.yaml: its defaults list picks model: gpt-tinyy, and there is no "
        "conf/model/gpt-tinyy.yaml: the checkout's root config is damaged. Fix: write model: gpt-tiny there, "
        "or restore it from the checkout: git checkout conf/config.yaml."
    )
    assert root_problem(["device=cpu", "model=llama-tiny"], str(conf)) is None  # Hydra never reads it
    assert root_problem(["device=cpu", "--config-name", "other"], str(conf)) is None
    root.write_text(root.read_text().replace("- model: gpt-tinyy", "- model: zzzzzz"))
    assert root_problem(["device=cpu"], str(conf)).endswith(
        "Fix: restore it from the checkout: git checkout conf/config.yaml."
    )


def test_a_key_twice_in_the_root_config_is_one_line(conf: Path) -> None:
    root = conf / "config.yaml"
    text = root.read_text()
    root.write_text(text + "hydra:\n  job:\n    chdir: false\n")
    line = len(text.splitlines()) + 1
    assert root_problem(RUN, str(conf)) == (
        f"Invalid config: conf/config.yaml: found duplicate key hydra at line {line}: the checkout's root "
        "config is damaged. Fix: give each key once, or restore it from the checkout: git checkout "
        "conf/config.yaml."
    )
    assert run.foreign_option_keys(["attention.window_blocks=0"]) is not None  # the checkout's, unchanged


def test_the_checkouts_root_config_passes() -> None:
    assert root_problem(RUN, CONF) is None and root_problem([], CONF) is None


# 4. A model file with no family, or another family's keys


def _body(option: str) -> str:
    return "".join(
        line for line in (Path(CONF) / "model" / f"{option}.yaml").read_text().splitlines(keepends=True)
        if not line.startswith(("defaults:", "  - "))
    )  # fmt: skip


def test_a_copied_model_file_without_its_defaults_list_names_the_line_to_add(conf: Path) -> None:
    (conf / "model" / "mine.yaml").write_text(_body("llama-tiny"))
    assert option_file_problem(["device=cpu", "model=mine"], str(conf)) == (
        "Invalid config: conf/model/mine.yaml: names no model family in a defaults list, so Hydra reads it "
        "as ModelConfig (n_kv_head, ffn_dim, tie_embeddings are LlamaConfig's). Fix: add \"defaults: "
        '[/schema/model/base_llama@_here_, _self_]" at its top (as conf/model/llama-tiny.yaml).'
    )  # was: n_kv_head: is no key of ModelConfig ... did you mean n_head?
    (conf / "model" / "mine.yaml").write_text(_body("gpt-tiny"))
    assert option_file_problem(["device=cpu", "model=mine"], str(conf)) == (
        "Invalid config: conf/model/mine.yaml: names no model family in a defaults list, so Hydra reads it "
        'as ModelConfig. Fix: add "defaults: [/schema/model/base_gpt2@_here_, _self_]" at its top (as '
        "conf/model/gpt-tiny.yaml)."
    )  # was: model.arch='gpt2': is the family of the model option ... drop the model.arch override


def test_a_model_file_of_another_familys_keys_names_that_family() -> None:
    llama = {"name": "mine", "n_layer": 2, "n_kv_head": 2, "ffn_dim": 384}
    assert family_problem("model", "gpt-tiny", llama) == (
        "n_kv_head: is a key of LlamaConfig (base_llama), not of GPT2Config, the schema its defaults list "
        "names (base_gpt2). Fix: name /schema/model/base_llama@_here_ in its defaults list in place of "
        "base_gpt2 (as conf/model/llama-tiny.yaml), or drop n_kv_head."
    )  # was: did you mean n_head?
    assert family_problem("model", "gpt-tiny", {"n_layre": 2}) is None  # a misspelt key: _schema_line's
    assert family_problem("model", "llama-tiny", llama) is None
    assert family_problem("attention", "sdpa", {"name": "sdpa"}) is None  # no schema needed


# 5. plan_clusters written with the multiplication sign


def test_a_cluster_size_written_with_a_times_sign_says_write_x() -> None:
    assert run.refusal(["device=cpu", "plan=true", "plan_clusters=[H100:8×8]"]) == (
        "Invalid config: plan_clusters=[H100:8×8]: Hydra's override grammar cannot read it ('×' (U+00D7 "
        "MULTIPLICATION SIGN) looks like ASCII 'x'). Fix: did you mean plan_clusters=[H100:8x8]?"
    )  # was: quote each element, 'plan_clusters=["H100:8×8"]'
    assert run.refusal(["device=cpu", "plan=true", 'plan_clusters=["H100:8x8","H200:1×8"]']) == (
        "Invalid config: plan_clusters='H200:1×8': its size is written with '×' (U+00D7 MULTIPLICATION "
        "SIGN), not the letter x. Fix: write x: plan_clusters=[H100:8x8,H200:1x8]."
    )  # was: gives no size (a GPU count or NODESxGPUS_PER_NODE after the GPU)
    assert times_sign_problem(["H100:8x8", "H200:16"]) is None


# 6. Unpicked option files a pick would refuse

UNPICKED_WARNINGS = [
    "flopsweep: warning: conf/model/empty.yaml: is empty, so model=empty sets none of its keys; "
    "model=empty would be refused. Fix: write its keys (as conf/model/llama-tiny.yaml), or remove the "
    "file.",
    "flopsweep: warning: conf/model/linked.yaml: is a symbolic link (to gpt-tiny.yaml); an option is "
    "read only from a file of conf/ itself; model=linked would be refused. Fix: copy the file's text "
    "into conf/model/linked.yaml in place of the link, or remove it.",
    "flopsweep: warning: conf/model/twice.yaml: found duplicate key n_layer at line 3; model=twice would "
    "be refused. Fix: give each key once, or remove the file.",
]
"""The warnings of an empty, a twice-keyed and a linked unpicked model file (the integration tier's too)."""


def test_unpicked_empty_twice_keyed_and_linked_option_files_are_one_warning_each(conf: Path) -> None:
    (conf / "model" / "empty.yaml").write_text("")
    (conf / "model" / "twice.yaml").write_text("name: twice\nn_layer: 2\nn_layer: 3\n")
    os.symlink("gpt-tiny.yaml", conf / "model" / "linked.yaml")
    assert option_file_lines(str(conf)) == UNPICKED_WARNINGS
    assert option_file_problem(["device=cpu", "model=empty"], str(conf)) == (
        "Invalid config: conf/model/empty.yaml: is empty, so model=empty sets none of its keys. Fix: write "
        "its keys (as conf/model/llama-tiny.yaml), or remove the file."
    )  # picked: refused, as before


def test_the_checkouts_option_files_give_no_warning() -> None:
    assert option_file_lines(CONF) == []
