"""Issue 14's classes that had no test of their own: resume among hostile files (5), a legal
micro batch above 256 (10), an environment value in a tag (16), the load average of each job (17).
The reliability page (docs/reliability.md) maps every class to its test."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from helpers import validate

from flopsweep.callbacks import count_statuses, ok_run_ids
from flopsweep.config import RunConfig
from flopsweep.job import ok_record, set_aside
from flopsweep.safe_read import MAX_RECORD_BYTES

OK = {"schema_version": 2, "status": "ok", "run": {"id": "a"}, "config": {}}


HOSTILE: dict[str, str | bytes] = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "digits": json.dumps(OK)[:-1] + ', "x": ' + "9" * 5000 + "}",
    "nan": json.dumps(OK)[:-1] + ', "x": NaN}',
    "oversized": " " * (MAX_RECORD_BYTES + 1),
    "list": "[1, 2]",
    "binary": b"\xff\xfe\x00{",
    "path-in-status": json.dumps({**OK, "status": "../../evil"}),
    "path-in-run-id": json.dumps({**OK, "status": "oom", "run": {"id": "../x y"}}),
    "wrong-types": json.dumps({"status": {"ok": 1}, "run": [], "config": 5}),
}


def test_resume_meets_hostile_files_in_job_directories(tmp_path: Path) -> None:
    """Class 5: a resumed sweep never skips on, crashes on, or names a file after such a record:
    each one counts as unreadable and is set aside under a name of its own."""
    cfg = validate(RunConfig(device="cpu"))
    for name, content in HOSTILE.items():
        (tmp_path / name).mkdir()
        path = tmp_path / name / "metrics.json"
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        assert ok_record(path, cfg) is None, name
    assert count_statuses(tmp_path) == Counter(unreadable=len(HOSTILE) - 1, oom=1)  # its status is real
    assert ok_run_ids(tmp_path) == {}
    for name in HOSTILE:
        aside = set_aside(tmp_path / name / "metrics.json")
        assert aside.parent == tmp_path / name, name
        assert re.fullmatch(r"metrics\.unreadable-[0-9a-f]{12}\.json", aside.name), (name, aside)


def test_a_micro_batch_above_256_is_legal_under_batch_fixed(hydra_compose) -> None:
    """Class 10: 256 is ``batch.max_micro_batch_size`` of ``batch=auto``, no limit of ``batch=fixed``."""
    cfg = validate(hydra_compose(["batch.micro_batch_size=300", "device=cpu"]))
    assert (cfg.batch.name, cfg.batch.micro_batch_size) == ("fixed", 300)


def test_a_tag_from_the_environment_resolves_with_a_warning(hydra_compose, monkeypatch) -> None:
    """Class 16: the value goes into the record as asked, and the user is told once."""
    from run import env_in_tag_warning

    monkeypatch.setenv("FLOPSWEEP_TEST_TAG", "from-the-env")
    override = "tag=${oc.env:FLOPSWEEP_TEST_TAG}"
    assert hydra_compose([override, "device=cpu"]).tag == "from-the-env"
    warning = env_in_tag_warning([override])
    assert warning.startswith(f"flopsweep: warning: {override} copies an environment value")
    assert env_in_tag_warning(["tag=plain"]) is None


def test_the_reliability_page_names_an_existing_test_for_every_class() -> None:
    """The reliability pages list their classes from 1 (at least 40 rows), each with tests that exist:
    docs/reliability.md, then docs/reliability-2.md and docs/reliability-3.md from where the one before
    stops, without a gap."""
    from helpers import ROOT

    pages = ("reliability.md", "reliability-2.md", "reliability-3.md")
    table = "\n".join((ROOT / "docs" / page).read_text() for page in pages)
    alias = {
        "t_f": "test_failures.py",
        "t_u": "test_unwritable.py",
        "t_r": "test_reliability.py",
        "nu21": "test_new_user_21.py",
        "pcl": "test_plan_command_line.py",
    }
    rows = {
        int(m.group(1)): m.group(0)
        for m in re.finditer(r"^- \*\*(\d+)\.\*\*.*?(?=^- \*\*|\Z)", table, re.MULTILINE | re.DOTALL)
    }
    assert sorted(rows) == list(range(1, len(rows) + 1)) and len(rows) >= 40
    for number, line in rows.items():
        named = re.findall(r"`(?:tests/)?(?:unit/|integration/)?([\w.]+)::(test_\w+|Test\w+)`", line)
        assert named, number
        for file, test in named:
            # a file split by tier is two files of one name, tests/unit/ and tests/integration/
            source = "".join(
                p.read_text() for p in sorted((ROOT / "tests").glob(f"*/{alias.get(file, file)}"))
            )
            assert f"def {test}(" in source or f"class {test}(" in source, (number, test)
