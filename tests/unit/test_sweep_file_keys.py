"""Session 25: a sweep file's form, keys and plain values, and ``~KEY``, refused in one line before Hydra
composes (:mod:`flopsweep.sweep_file_keys`, :func:`flopsweep.conf_files.checked_yaml`,
:func:`flopsweep.flags.delete_problem`). Each used to end in Hydra's six-line ``ConfigKeyError`` or
``ValidationError`` block (exit 1), a ``UnicodeDecodeError`` traceback, or, for a value such as
``timeout_s: -5``, in the job. The files are planted in a ``conf/`` of ``tmp_path`` (the fixture of
``test_conf_files``), never in the checkout's."""

from __future__ import annotations

import math

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from flopsweep.conf_files import conf_file_problem
from flopsweep.flags import delete_problem
from flopsweep.sweep_file_keys import shape_problem, values_problem
from flopsweep.sweep_file_read import override_value
from tests.unit.test_conf_files import _conf, _params

HEAD = "# @package _global_\n"
SHOWN = "Invalid config: conf/sweep/mine.yaml: "


def _one_line(line: str | None) -> str:
    assert line is not None and "\n" not in line, line
    assert line.startswith(SHOWN) and "Fix: " in line, line
    return line


@pytest.mark.parametrize(
    ("text", "has"),
    [
        (HEAD + "bogus_key: 3\n", "bogus_key=3: no such key"),
        (HEAD + "steps:\n  measur: 3\n", "steps.measur=3: no such key. Fix: did you mean steps.measure?"),
        (HEAD + "backend:\n  zero_stag: 2\n", "did you mean backend.zero_stage?"),
        (
            HEAD + "base: &b {seed: 1}\nseed: 2\n",
            "base: is no key of the config, and holds the YAML anchor &b",
        ),
        (HEAD + "base: &b {seed: 1}\n<<: *b\n", "Fix: drop base, and write its values under the keys"),
        (HEAD + "backend: [fsdp, ddp]\n", "backend: [fsdp, ddp]: a list of options is a sweep over them"),
        (HEAD + "backend: fsdp\n", "Fix: defaults: [override /backend: fsdp]"),
        (
            "seed: 3\n",
            "has no # @package _global_ line before its keys, so Hydra would read its keys under sweep",
        ),
        ("", "has no # @package _global_ line"),  # an empty file without it: "Key 'sweep' not in 'RunConfig'"
        ("# my sweep\n# @package _global_\nseed: 1\n", "has its # @package line after another line"),
        (
            "# @package model\nn_layer: 2\n",
            "has # @package model, so Hydra would read its keys under model.*",
        ),
        ("# @package\nseed: 1\n", "its header: Expected header format"),
        (HEAD + "- a\n- b\n", "holds a list, not a mapping of keys"),
        (HEAD + "hello\n", "holds the one value hello, not a mapping of keys"),
        (HEAD + "seed: 1\nseed: 2\n", "found duplicate key seed at line 3. Fix: give each key once"),
        (
            HEAD + "s\u0435\u0435d: 3\n",
            "(U+0435 CYRILLIC SMALL LETTER IE) looks like ASCII 'e'. Fix: write seed.",
        ),
        (HEAD + "steps.measure: 3\n", "steps.measure: 3: a YAML key with a dot is one key of that name"),
        (HEAD + "hydra: 3\n", "hydra: 3: is one value, not a mapping of keys"),
        (
            HEAD + "hydra:\n  sweeper:\n    params: [seed]\n",
            "hydra.sweeper.params: [seed]: is a list, not a mapping",
        ),
        (HEAD + "defaults: 3\n", "defaults: 3: is a list of the options the file picks"),
        (HEAD + "1: x\n", "1=x: no such key"),
    ],
)
def test_a_sweep_files_form_and_keys_are_refused_in_one_line(tmp_path, text: str, has: str) -> None:
    conf = _conf(tmp_path, {"sweep/mine.yaml": text})
    (conf / "backend").mkdir()
    (conf / "backend" / "fsdp.yaml").write_text("name: fsdp\n")
    line = _one_line(shape_problem(["-m", "+sweep=mine"], str(conf)))
    assert has in line, line


@pytest.mark.parametrize(
    "text",
    [
        HEAD,  # empty: nothing merged
        HEAD + "<<: {seed: 1}\n",  # a merge key of a plain mapping: Hydra merges it too
        HEAD + "steps: &s {warmup: 1}\n",  # an anchor on a key of the config
        HEAD
        + "defaults:\n  - override /backend: fsdp\nbackend:\n  cpu_offload: true\n"
        + _params("seed: 0,1"),
    ],
)
def test_a_sweep_file_hydra_composes_passes(tmp_path, text: str) -> None:
    conf = _conf(tmp_path, {"sweep/mine.yaml": text.replace(HEAD + HEAD, HEAD)})
    (conf / "backend").mkdir()
    assert shape_problem(["-m", "+sweep=mine"], str(conf)) is None


@pytest.mark.parametrize(
    ("text", "has"),
    [
        (b"\x80\xf2junk\x00\x01", "is not UTF-8 text (byte 0x80 at offset 0)"),
        ("# @package _global_\nseed: 1\n".encode("utf-16"), "is not UTF-8 text (byte 0xff at offset 0)"),
        (b"# @package _global_\nseed: 1\x01\n", "holds a control character YAML does not allow (U+0001"),
        (b"# @package _global_\nseed: [1\nx: y\n", "is not YAML (expected ',' or ']', but got ':' at line 3"),
    ],
)
def test_a_file_that_is_not_yaml_text_is_one_line(tmp_path, text: bytes, has: str) -> None:
    """A binary file crashed a check that read it (``UnicodeDecodeError``, a traceback); now the bounded
    read's own line, before any check reads it."""
    conf = _conf(tmp_path, {})
    (conf / "sweep" / "mine.yaml").write_bytes(text)
    line = _one_line(conf_file_problem(["-m", "+sweep=mine"], str(conf)))
    assert has in line and "\\x" not in line, line


def _checks():
    from run import FILE_VALUE_CHECKS

    return FILE_VALUE_CHECKS


@pytest.mark.parametrize(
    ("text", "has"),
    [
        (
            "timeout_s: -5\n",
            "timeout_s=-5: must be a finite number of seconds > 0. Fix: set e.g. timeout_s: 1800 in conf/",
        ),
        ("repeats: 0\n", "repeats=0: must be one whole number from 1 to 100"),
        ("seed: 1e3\n", "seed=1000.0: is a whole number written as a float. Fix: write it without a point"),
        ("optim:\n  lr: -1\n", "optim.lr=-1: is out of range for AdamW"),
        ("steps: 3\n", "steps=3: steps is a section of keys, not a value"),
        ("objective: fast\n", "objective='fast': is not a metric"),
        ("tag: ${oc.env:FLOPSWEEP_UNSET_25}\n", "environment variable FLOPSWEEP_UNSET_25 is not set"),
        ("plan: true\nrepeats: 3\n", "repeats=3: a plan runs nothing"),
        (
            "backend:\n  zero_stage: 2\n",
            "backend.zero_stage: belongs to backend=deepspeed, not to backend=single",
        ),
    ],
)
def test_a_sweep_files_plain_values_get_the_command_lines_checks(tmp_path, text: str, has: str) -> None:
    conf = _conf(tmp_path, {"sweep/mine.yaml": HEAD + text})
    (conf / "backend").mkdir()
    line = _one_line(values_problem(["-m", "+sweep=mine"], _checks(), str(conf)))
    assert has in line, line
    assert "command-line override" not in line


def test_a_key_the_command_line_or_an_axis_gives_replaces_the_files(tmp_path) -> None:
    conf = _conf(tmp_path, {"sweep/mine.yaml": HEAD + "timeout_s: -5\nsteps:\n  measure: 0.5\n"})
    argv = ["-m", "+sweep=mine"]
    assert values_problem([*argv, "timeout_s=60"], _checks(), str(conf)).endswith(
        "steps.measure=0.5: is not a whole number. Fix: set steps.measure to a whole number, e.g. "
        "steps: {measure: 5} (its default) in conf/sweep/mine.yaml."  # session 41 (#883): the file's form
    )
    assert values_problem([*argv, "timeout_s=60", "steps=null"], _checks(), str(conf)) is None
    axes = HEAD + "timeout_s: -5\n" + _params("timeout_s: 60,120").removeprefix(HEAD)
    (conf / "sweep" / "mine.yaml").write_text(axes)
    assert values_problem(argv, _checks(), str(conf)) is None


def test_run_py_refuses_a_file_value_as_the_same_value_on_the_command_line() -> None:
    """Before Hydra, the same line with and without the file (``timeout_s`` was the job's alone)."""
    from run import refusal

    assert refusal(["timeout_s=-5"]) == (
        "Invalid config: timeout_s=-5: must be a finite number of seconds > 0. Fix: set e.g. timeout_s=1800."
    )
    assert refusal(["timeout_s=0.5"]) is None


def test_every_shipped_sweep_file_passes() -> None:
    import os

    from flopsweep.override_schema import CONF
    from run import refusal

    names = sorted(
        f.removesuffix(".yaml") for f in os.listdir(os.path.join(CONF, "sweep")) if f.endswith(".yaml")
    )
    assert len(names) > 20
    for name in names:
        argv = ["-m", f"+sweep={name}"]
        assert shape_problem(argv) is None and values_problem(argv, _checks()) is None, name
    assert refusal(["-m", "+sweep=frontier-fsdp"]) is None


@pytest.mark.parametrize(
    "value",
    [
        "auto",
        "3",
        "it's",
        'say "x"',
        "a\\",
        "${oc.env:HOME}",
        None,
        True,
        0,
        -5,
        1.5,
        1e20,
        math.inf,
        [1, "a"],
        {"a": 1},
    ],
)
def test_an_override_value_reads_back_as_the_files_value(value: object) -> None:
    parsed = OverridesParser.create().parse_override(f"k={override_value(value)}").value()
    assert parsed == value, (override_value(value), parsed)


def test_nan_is_written_as_the_grammar_reads_it() -> None:
    parsed = OverridesParser.create().parse_override(f"k={override_value(math.nan)}").value()
    assert math.isnan(parsed)


@pytest.mark.parametrize(
    ("override", "has"),
    [
        ("~fault.rank", "~fault.rank: flopsweep's schema keeps every key, so ~ cannot delete one"),
        (
            "~fault.rank=1",
            "Fix: give the value you want, e.g. fault.rank=0 (its default), or drop ~fault.rank=1.",
        ),
        ("~seed", "e.g. seed=0 (its default)"),  # Hydra ran it: the default, as if nothing was asked
        ("~steps", "e.g. steps.warmup=2 (its default)"),  # a section: one of its keys
        ("~model.n_layer", "e.g. model.n_layer=VALUE"),  # an option's key: its default is the option's
        ("~model", "every job needs a model option (conf/config.yaml picks model=gpt-tiny)"),
        ("~modle", "~modle: no such key. Fix: did you mean model?"),
    ],
)
def test_deleting_a_key_is_refused_in_one_line(override: str, has: str) -> None:
    from run import refusal

    line = refusal([override])
    assert line is not None and "\n" not in line and line.startswith(f"Invalid config: {override}: "), line
    assert has in line and line == delete_problem([override]), line


@pytest.mark.parametrize("override", ["~sweep", "~hydra.callbacks.summary", "seed=1", "+sweep=smoke"])
def test_a_delete_left_to_other_checks_or_hydra_is_none(override: str) -> None:
    assert delete_problem([override]) is None
