"""Session 42's splits by responsibility (no behaviour change, so no reliability row): ``files.py`` (594
lines) into the writer, :mod:`flopsweep.safe_read` (the bounded reader) and :mod:`flopsweep.safe_folders`
(a run's folders); ``override_grammar.py`` (593) into the grammar's refusals and
:mod:`flopsweep.override_multirun` (a sweep without ``-m``, its size, its functions). Each part is below
the module it left, never importing it back, and torch-free."""

from __future__ import annotations

import functools

import pytest
from integration.test_imports import _closure, _graph

GRAPH = functools.cache(lambda: _graph("flopsweep"))
"""The module graph, read once for this file's tests."""


BELOW = {
    "flopsweep.safe_read": {"flopsweep.files", "flopsweep.safe_folders"},
    "flopsweep.safe_folders": {"flopsweep.hydrafiles", "flopsweep.launch", "flopsweep.job.lifecycle"},
    "flopsweep.files": {"flopsweep.safe_folders"},
    "flopsweep.override_multirun": {"flopsweep.override_grammar"},
    "flopsweep.override_parsing": {"flopsweep.override_grammar", "flopsweep.override_multirun"},
}
"""Each part and the modules above it, which it never imports (lazy imports included)."""


def test_each_part_stays_below_the_modules_that_use_it() -> None:
    graph = GRAPH()
    crossed = {part: _closure(graph, part) & above for part, above in BELOW.items()}
    assert set(BELOW) <= set(graph)
    assert crossed == dict.fromkeys(BELOW, set())


def test_the_parts_import_no_torch() -> None:
    graph = GRAPH()
    for part in ("flopsweep.safe_read", "flopsweep.safe_folders", "flopsweep.override_multirun"):
        assert not {m for m in _closure(graph, part) if m.startswith("torch")}, part


def test_the_reader_refuses_a_link_and_reads_a_record(tmp_path) -> None:
    from flopsweep.safe_read import RecordError, read_json

    (tmp_path / "metrics.json").write_text('{"status": "ok"}')
    (tmp_path / "link.json").symlink_to(tmp_path / "metrics.json")
    assert read_json(tmp_path / "metrics.json") == {"status": "ok"}
    with pytest.raises(RecordError, match="symbolic link"):
        read_json(tmp_path / "link.json")


def test_a_job_folder_is_refused_through_a_planted_link(tmp_path) -> None:
    from flopsweep.files import RecordUnwritable
    from flopsweep.safe_folders import job_folder

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "job").symlink_to(tmp_path / "elsewhere")
    assert job_folder(tmp_path / "new" / "0") == tmp_path / "new" / "0"
    with pytest.raises(RecordUnwritable, match="symbolic link"):
        job_folder(tmp_path / "job")


def test_the_multirun_checks_answer_as_before_the_split() -> None:
    from flopsweep.override_multirun import (
        MAX_SWEEP_JOBS,
        needs_multirun,
        split_choices,
        sweep_without_m_problem,
    )

    assert split_choices("a,'b,c',[1,2]") == ["a", "'b,c'", "[1,2]"]
    assert split_choices("[1,2") is None
    assert needs_multirun("seed=0,1") and needs_multirun("repeats=3") and not needs_multirun("seed=0")
    assert sweep_without_m_problem(["tag=a,b"]).startswith("Invalid config: tag=a,b:")
    assert sweep_without_m_problem(["-m", "tag=a,b"]) is None
    assert MAX_SWEEP_JOBS > 1
