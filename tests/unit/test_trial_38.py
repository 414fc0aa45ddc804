"""Session 38's new-user trial with hostile inputs: the defects it found, each refused in one line whose fix
is itself accepted. Reliability rows 451 on (docs/reliability-8.md):

- 485: a ``model=hf`` ``config.json`` without a shape field (or with it misspelt) built transformers'
  default (32 blocks for a 2-block Qwen3 file) under the file's name;
- 486: a ``plan_clusters`` entry that is no name (``null``, a list or a mapping inside the list) was read
  as its Python text (``'None' is no device of the peak table``, ``"['H100" is no device``);
- 487: ``model.config=`` left blank (``model.config=$UNSET``) read the working directory's ``config.json``;
- 488: ``--columns all,model`` was an unknown column 'all' ("did you mean 'cuda_alloc_retries'"), and
  ``--columns MODEL`` offered ``model_tflops_per_device`` before ``model``;
- 489: a tuning whose axes and ``space.*`` lists give one set-up ran it 3 times and named it the winner;
- 490: a key-value head count the file leaves out was told as the file's own (``has num_key_value_heads=32``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopsweep.config import ConfigError
from flopsweep.job.plandecide import named_clusters
from flopsweep.plan_command_line import command_line_problem
from tests.unit.test_hf_safety import NEO

SHIPPED = Path(__file__).resolve().parents[2] / "flopsweep" / "models" / "hf_configs"
QWEN = json.loads((SHIPPED / "qwen3-tiny.json").read_text())


def _check(tmp_path: Path, name: str, data: dict) -> str | None:
    """The line ``model=hf`` refuses ``data`` (written as ``tmp_path/name.json``) with, else None."""
    pytest.importorskip("transformers")
    from flopsweep.models.hf import HFConfig, check_file

    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    try:
        check_file(HFConfig(config=str(path)))
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    ("field", "default"),
    [
        ("num_hidden_layers", 32),
        ("hidden_size", 4096),
        ("num_attention_heads", 32),
        ("vocab_size", 151936),
        ("intermediate_size", 22016),  # a fixed class default, not derived from hidden_size
    ],
)
def test_a_config_json_without_a_shape_field_is_refused_naming_it(tmp_path: Path, field: str, default: int):
    """Left out, the field was transformers' default (``Qwen3Config``'s), a model the file does not
    describe, run and recorded under the file's name; the fix (the field written back) passes."""
    data = {k: v for k, v in QWEN.items() if k != field}
    line = _check(tmp_path, "missing", data)
    path = tmp_path / "missing.json"
    assert line == (
        f"Invalid config: model.config='{path}': gives no {field}: transformers would build Qwen3Config's "
        f"default, {default}, a model the file does not describe, under the file's name. Fix: write the "
        f'model\'s {field} in the file, e.g. "{field}": {default}.'
    )
    assert _check(tmp_path, "fixed", {**data, field: QWEN[field]}) is None  # the fix, with the file's value
    nulled = _check(tmp_path, "nulled", {**data, field: None})
    assert nulled is not None and f"gives no {field} as null: " in nulled


def test_a_misspelt_shape_field_names_the_key_to_rename(tmp_path: Path):
    """``num_hiden_layers``: transformers kept it as an unknown attribute and built 32 blocks; the fix names
    the key and the value to write, and the file renamed so passes."""
    data = {("num_hiden_layers" if k == "num_hidden_layers" else k): v for k, v in QWEN.items()}
    line = _check(tmp_path, "typo", data)
    assert line is not None and line.endswith(
        'Fix: rename num_hiden_layers to num_hidden_layers in the file: "num_hidden_layers": 2.'
    )
    assert "\n" not in line
    renamed = {("num_hidden_layers" if k == "num_hiden_layers" else k): v for k, v in data.items()}
    assert _check(tmp_path, "renamed", renamed) is None


def test_a_shape_field_under_its_class_alias_is_given(tmp_path: Path):
    """GPT-Neo names its blocks ``num_layers`` and heads ``num_heads`` (its class's ``attribute_map``):
    given under those names, nothing is missing; its ``intermediate_size`` left out is derived (4 x
    hidden: the class default is None), not refused."""
    neo = NEO  # GPT-Neo in its own field names
    assert _check(tmp_path, "neo", neo) is None
    line = _check(tmp_path, "neo-no-layers", {k: v for k, v in neo.items() if k != "num_layers"})
    assert line is not None and "gives no num_hidden_layers (nor num_layers): " in line


@pytest.mark.parametrize(
    ("typed", "shown", "said", "fix"),
    [
        ("[H100:8,null]", "[H100:8,null]", "holds null, which names no cluster", "plan_clusters=[H100:8]"),
        ("[null]", "[null]", "holds null, which names no cluster", "e.g. plan_clusters=[H100:8]"),
        (
            "[H100:8,[H200:8]]",
            "[H100:8,[H200:8]]",
            "holds a list inside the list",
            "plan_clusters=[H100:8,H200:8]",
        ),
        ("[H100:8,{a:1}]", "[H100:8,{...}]", "holds a mapping inside the list", "plan_clusters=[H100:8]"),
    ],
)
def test_a_plan_clusters_entry_that_is_no_name_is_one_line(typed: str, shown: str, said: str, fix: str):
    """Before Hydra: one line, its fix a list of names that passes; the job's own check
    (:func:`named_clusters`, a sweep file's list) says the same."""
    line = command_line_problem(["plan=true", f"plan_clusters={typed}"])
    assert line == (
        f"Invalid config: plan_clusters='{shown}': {said}. Fix: name each cluster once as a text: {fix}."
    )
    accepted = fix.removeprefix("e.g. ")
    assert command_line_problem(["plan=true", accepted]) is None


def test_the_jobs_check_refuses_a_null_entry_as_the_command_line_does():
    with pytest.raises(ConfigError) as caught:
        named_clusters(["H100:8", None, ["H200:8"]])
    assert str(caught.value) == (
        "Invalid config: plan_clusters='[H100:8,null,[H200:8]]': holds null, which names no cluster. "
        "Fix: name each cluster once as a text: plan_clusters=[H100:8,H200:8]."
    )
    assert [c.label for c in named_clusters(["H100:8", "H200:8"])] == ["H100:1x8:ib400", "H200:1x8:ib400"]


@pytest.mark.parametrize("blank", ["", " "])
def test_a_blank_model_config_is_refused_not_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blank: str
):
    """``model.config=$UNSET`` is ``''``, which ``Path`` reads as the working directory: its
    ``config.json`` (here Mistral's tiny one) was planned and run under its own name, exit 0."""
    pytest.importorskip("transformers")
    from flopsweep.models.hf import HFConfig, check_file

    (tmp_path / "config.json").write_text((SHIPPED / "mistral-tiny.json").read_text())
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        check_file(HFConfig(config=blank))
    assert str(caught.value) == (
        f"Invalid config: model.config='{blank}': is blank (a shell variable left unset?): it names no file "
        "(empty, it read the working directory's config.json). Fix: give a config.json path or its folder, "
        "or a shipped name, e.g. model.config=qwen3-tiny."
    )
    source, _ = check_file(HFConfig(config="qwen3-tiny"))  # the fix
    assert source.label == "qwen3-tiny"


def test_columns_all_beside_other_names_says_it_stands_alone(capsys: pytest.CaptureFixture[str]):
    """``--columns all,model`` was "unknown column 'all' ...; did you mean 'cuda_alloc_retries'": one
    argparse line now, exit 2, whose two fixes parse."""
    from analysis.cli import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit) as caught:
        parser.parse_args(["runs", "--columns", "all,model"])
    assert caught.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (
        "python -m analysis: error: argument --columns: 'all,model': all shows every column and stands "
        "alone; give --columns all, or the columns alone: --columns model; see python -m analysis --help"
    )
    assert parser.parse_args(["runs", "--columns", "all"]).columns == "all"
    assert parser.parse_args(["runs", "--columns", "model"]).columns == "model"


def test_a_column_in_other_case_is_the_first_did_you_mean():
    """``--columns MODEL`` offered ``model_tflops_per_device`` before ``model``."""
    from analysis.query import near_columns

    columns = ["model", "model_tflops_per_device", "model_search", "tokens_per_s"]
    assert near_columns("MODEL", columns)[0] == "model"
    assert near_columns("Tokens_Per_S", columns)[0] == "tokens_per_s"
    assert near_columns("tflop", columns)[0] == "model_tflops_per_device"  # unchanged without a case match


def test_a_tuning_of_one_set_up_is_refused_with_a_fix_that_passes():
    """``-m hydra/sweeper=tune 'space.micro_batches=[1]' 'space.backends=[single]'
    'space.checkpointing=[none]'`` on one rank ran its one set-up 3 times and named it the winner
    (exit 0), as session 35's tuning without axes did; now the sweeper's one line, exit 2, before any
    job. Two set-ups pass; the fix each form names passes the command line's checks."""
    from flopsweep.tune import Candidate, one_setup_problem
    from hydra_plugins.flopsweep_tune.tuning import candidates
    from run import refusal

    axes = candidates([["device=cpu", "backend=ddp"]], {"backend"}, None, (1, 1))
    assert one_setup_problem(axes) == (
        "Invalid config: hydra/sweeper=tune: one set-up (backend=ddp), nothing to tune (the sweep axes and "
        "space.* lists give no other). Fix: list more values, e.g. backend=ddp,fsdp, or run it plainly "
        "(repeats=3 for an interval)."
    )
    two = candidates(
        [["device=cpu", "backend=ddp"], ["device=cpu", "backend=fsdp"]], {"backend"}, None, (1, 1)
    )
    assert one_setup_problem(two) is None
    spaced = [Candidate(0, ("batch.micro_batch_size=1",), "batch.micro_batch_size=1", setup="mb1")]
    line = one_setup_problem(spaced)
    assert line is not None and "Fix: list more values, e.g. space.micro_batches=[1,2,4], or run" in line
    tune = ["-m", "hydra/sweeper=tune", "device=cpu", "model=gpt-tiny"]
    assert refusal([*tune, "backend=ddp,fsdp"]) is None
    space = ["space.backends=[single]", "space.checkpointing=[none]"]
    assert refusal([*tune, *space, "space.micro_batches=[1,2,4]"]) is None


def test_a_kv_head_count_the_file_leaves_out_is_said_as_the_class_default(tmp_path: Path):
    """Qwen3's class default of 32 key-value heads for a 4-head file was told as the file's own
    (``has num_key_value_heads=32``); the fix written into the file passes."""
    data = {k: v for k, v in QWEN.items() if k != "num_key_value_heads"}
    line = _check(tmp_path, "no-kv", data)
    assert line is not None and line.endswith(
        "gives no num_key_value_heads, and its config class's default, 32, does not divide "
        "num_attention_heads=4. Fix: give num_key_value_heads a divisor of num_attention_heads in the file, "
        'e.g. "num_key_value_heads": 4.'
    )
    assert _check(tmp_path, "kv", {**data, "num_key_value_heads": 4}) is None
    given = _check(tmp_path, "kv3", {**data, "num_key_value_heads": 3})
    assert (
        given is not None
        and "has num_key_value_heads=3, which does not divide num_attention_heads=4" in given
    )
