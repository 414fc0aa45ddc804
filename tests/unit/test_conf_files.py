"""Session 24's trial: the config files a command line selects, checked before Hydra reads them
(:mod:`flopsweep.conf_files`): a YAML alias bomb in a user's sweep file ran 12 minutes at 5.9 GB, and a
sweep file's ``seed: range(0,100000)`` and ``model.seq_len: 1000000000000`` printed nothing for 90 s.

The bombs here are small files (a few hundred bytes) that expand past the bound; the check counts each
node once, so no test builds the expansion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from flopsweep.conf_files import (
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    checked_yaml,
    conf_file_problem,
    expanded_size,
    nesting_depth,
    sweep_file_problem,
    sweep_params,
)
from flopsweep.override_schema import CONF, MAX_YAML_BYTES, SAFE_LOADER


def _bomb(levels: int, width: int = 10) -> str:
    """``levels`` lists of ``width`` aliases of the one before: ``width ** (levels + 1)`` scalars."""
    lines = ["# @package _global_", "a0: &a0 [" + ",".join(["1"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _params(line: str) -> str:
    """A sweep file whose ``hydra.sweeper.params`` is the one ``line`` (``seed: range(0,4)``)."""
    return f"# @package _global_\nhydra:\n  sweeper:\n    params:\n      {line}\n"


def _conf(tmp_path: Path, files: dict[str, str]) -> Path:
    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    (conf / "config.yaml").write_text("defaults:\n  - _self_\nseed: 0\n")
    for name, text in files.items():
        (conf / name).parent.mkdir(parents=True, exist_ok=True)
        (conf / name).write_text(text)
    return conf


def test_expanded_size_counts_every_copy_an_alias_makes():
    # {a: [1, 2], b: [*a, *a]}: the map, 2 keys, a's list and its 2 items, b's list and 2 copies of a's
    # (3 values each)
    root = yaml.compose("a: &a [1, 2]\nb: [*a, *a]\n", Loader=yaml.SafeLoader)
    assert expanded_size(root) == 1 + 2 + 3 + 1 + 2 * 3
    # 6 levels of 10: 10**7 scalars, counted without being built; capped at the bound + 1
    assert expanded_size(yaml.compose(_bomb(6), Loader=yaml.SafeLoader)) == MAX_YAML_NODES + 1
    assert expanded_size(yaml.compose(_bomb(2), Loader=yaml.SafeLoader)) < MAX_YAML_NODES


def test_an_alias_inside_its_own_anchor_is_endless():
    assert expanded_size(yaml.compose("a: &a [1, *a]\n", Loader=yaml.SafeLoader), bound=50) == 51


@pytest.mark.parametrize("levels", [5, 6])
def test_an_alias_bomb_in_a_sweep_file_is_one_line_naming_the_file(tmp_path, levels):
    conf = _conf(tmp_path, {"sweep/mine-bomb.yaml": _bomb(levels)})
    line = conf_file_problem(["-m", "+sweep=mine-bomb", "plan=true"], str(conf))
    assert line is not None and "\n" not in line
    assert line.startswith("Invalid config: conf/sweep/mine-bomb.yaml: its anchors and aliases")
    assert f"more than {MAX_YAML_NODES} values" in line and "Fix: write each value out once" in line


def test_a_file_the_defaults_list_names_is_checked_too(tmp_path):
    # the sweep file is plain; the option it picks (and the option a sweep axis of it picks) is the bomb
    conf = _conf(
        tmp_path,
        {
            "sweep/mine.yaml": "# @package _global_\ndefaults:\n  - override /model: bomb\n",
            "sweep/axis.yaml": _params("model: tiny,bomb"),
            "model/bomb.yaml": _bomb(5),
            "model/tiny.yaml": "n_layer: 2\n",
        },
    )
    for name in ("mine", "axis"):
        line = conf_file_problem(["-m", f"+sweep={name}"], str(conf))
        assert line and line.startswith("Invalid config: conf/model/bomb.yaml: its anchors"), line
    assert conf_file_problem(["model=bomb"], str(conf)).startswith("Invalid config: conf/model/bomb.yaml")
    (conf / "primary.yaml").write_text(_bomb(5))  # --config-name's file (flags.py: conf/ only)
    for argv in (["--config-name", "primary"], ["-cn", "primary.yaml"], ["--config-name=primary"]):
        assert conf_file_problem(argv, str(conf)).startswith("Invalid config: conf/primary.yaml: its anchors")
    assert conf_file_problem(["model=tiny"], str(conf)) is None


def test_a_file_over_the_byte_bound_or_nested_too_deep_is_refused(tmp_path):
    big = "# @package _global_\nnote: '" + "x" * MAX_YAML_BYTES + "'\n"
    deep = "a: " + "[" * 1000 + "]" * 1000 + "\n"
    conf = _conf(tmp_path, {"sweep/big.yaml": big, "sweep/deep.yaml": deep})
    line = conf_file_problem(["+sweep=big"], str(conf))
    assert (
        line.startswith("Invalid config: conf/sweep/big.yaml: is over the bound of")
        and "Fix: split it" in line
    )
    line = conf_file_problem(["+sweep=deep"], str(conf))
    assert line.startswith("Invalid config: conf/sweep/deep.yaml: its values are nested too deep"), line


def test_every_file_of_conf_is_within_the_bounds():
    """The bounds refuse no shipped file: every option and sweep of conf/."""
    root = Path(CONF)
    files = sorted(
        Path(folder, name)
        for folder, _, names in os.walk(root, followlinks=True)  # conf/sweep is a link to sweep/
        for name in names
        if name.endswith(".yaml") and Path(folder).relative_to(root).parts[:1] != ("hydra",)
    )
    assert len(files) > 60
    for path in files:
        root_node = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
        assert root_node is None or expanded_size(root_node) < MAX_YAML_NODES, path
        checked_yaml(str(path))  # raises ConfFileProblem when refused
    # a command line of every group's default, and a shipped sweep with the files its defaults name
    assert conf_file_problem([]) is None and conf_file_problem(["-m", "+sweep=layouts-8gpu-llama8b"]) is None


def test_a_sweep_files_axes_are_listed_as_the_sweeper_writes_them():
    assert sweep_params(["-m", "+sweep=smoke"]) == [
        ("sweep/smoke.yaml", "backend=ddp,fsdp,zero1,zero2,zero3"),
        ("sweep/smoke.yaml", "precision=fp32,bf16"),
    ]


@pytest.mark.parametrize(
    ("params", "argv", "has"),
    [
        ("seed: range(0,100000)", [], "seed=range(0,100000): the sweep would run 100000 jobs"),
        (
            "model.seq_len: 1000000000000",
            [],
            "model.seq_len=1000000000000: is a whole number beyond the bound",
        ),
        ("backend: ddp,fsdpp", [], "fsdpp"),
        ("seed: range(0,0)", [], "seed=range(0,0): lists no value"),
        # the file's 200 jobs times the command line's 60: over the bound together
        ("seed: range(0,200)", ["steps.measure=range(1,61)"], "the sweep would run 12000 jobs"),
    ],
)
def test_a_sweep_files_axes_get_the_command_lines_checks(tmp_path, params, argv, has):
    conf = _conf(
        tmp_path,
        {"sweep/mine.yaml": _params(params)},
    )
    line = sweep_file_problem(["-m", "+sweep=mine", *argv], str(conf))
    assert line is not None and "\n" not in line, line
    assert line.startswith("Invalid config: conf/sweep/mine.yaml (hydra.sweeper.params): ") and has in line, (
        line
    )
    assert "Fix: " in line


def test_a_command_line_key_replaces_the_files_and_a_single_run_sweeps_nothing(tmp_path):
    conf = _conf(
        tmp_path,
        {"sweep/mine.yaml": _params("seed: range(0,100000)")},
    )
    assert sweep_file_problem(["-m", "+sweep=mine", "seed=0,1"], str(conf)) is None
    assert sweep_file_problem(["+sweep=mine"], str(conf)) is None
    assert sweep_file_problem(["-m", "+sweep=smoke"]) is None


def test_run_py_counts_a_shipped_sweep_files_axes_with_the_command_lines():
    from run import refusal

    # smoke.yaml's 5 backends x 2 precisions, times 1001 seeds: 10010 jobs; 1001 alone pass
    line = refusal(["-m", "+sweep=smoke", "seed=range(0,1001)"])
    assert line and line.startswith("Invalid config: sweep/smoke.yaml (hydra.sweeper.params): "), line
    assert "the sweep would run 10010 jobs" in line
    assert refusal(["-m", "seed=range(0,1001)"]) is None


def test_a_sweep_files_axes_are_read_in_the_options_it_picks(tmp_path):
    """``attention.window_blocks`` is blocksparse's: read in the option the file's defaults put in place of
    conf/config.yaml's (sdpa, where the key is unknown and left to Hydra), its value is checked."""
    picks = "# @package _global_\ndefaults:\n  - override /attention: blocksparse\n"
    conf = _conf(
        tmp_path, {"sweep/mine.yaml": picks + _params("attention.window_blocks: 1,x").split("\n", 1)[1]}
    )
    (conf / "attention").mkdir()
    line = sweep_file_problem(["-m", "+sweep=mine"], str(conf))
    assert line and "attention.window_blocks='x': is not a whole number" in line, line
    (conf / "sweep" / "mine.yaml").write_text(
        picks + _params("attention.window_blocks: 1,2").split("\n", 1)[1]
    )
    assert sweep_file_problem(["-m", "+sweep=mine"], str(conf)) is None


def test_every_shipped_sweep_files_axes_pass():
    names = sorted(
        f.removesuffix(".yaml") for f in os.listdir(os.path.join(CONF, "sweep")) if f.endswith(".yaml")
    )
    assert len(names) > 20
    for name in names:
        assert sweep_file_problem(["-m", f"+sweep={name}"]) is None, name


def test_a_file_of_a_linked_folder_is_named_by_the_path_the_user_knows(tmp_path: Path) -> None:
    """conf/sweep is a link to the checkout's sweep/, where users write their files: a refusal named
    conf/sweep/mine.yaml, a path they never made. A folder of conf/ itself keeps conf/."""
    from flopsweep.conf_files import shown_path

    (tmp_path / "sweep").mkdir()
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "sweep").symlink_to("../sweep")
    conf = str(tmp_path / "conf")
    assert shown_path(str(tmp_path / "conf" / "sweep" / "mine.yaml"), conf) == "sweep/mine.yaml"
    assert shown_path(str(tmp_path / "conf" / "model" / "x.yaml"), conf) == "conf/model/x.yaml"
    outside = tmp_path / "deep" / "elsewhere"
    outside.mkdir(parents=True)
    (tmp_path / "conf" / "far").symlink_to(outside)  # not beside conf/: named under conf/
    assert shown_path(str(tmp_path / "conf" / "far" / "a.yaml"), conf) == "conf/far/a.yaml"


@pytest.mark.parametrize(
    ("text", "depth"),
    [("a: 1", 1), ("a: [[1]]", 3), ("a: &a [1]\nb: [*a]", 3), ("1", 0), ("a: &a [*a]", MAX_YAML_DEPTH + 1)],
)
def test_nesting_depth_counts_mappings_and_lists_an_alias_as_its_copy(text: str, depth: int) -> None:
    assert nesting_depth(yaml.compose(text, Loader=yaml.SafeLoader)) == depth


def test_the_depth_bound_takes_its_last_level_and_refuses_the_next(tmp_path: Path) -> None:
    at, over = (
        "a: " + "[" * (n - 1) + "1" + "]" * (n - 1) + "\n" for n in (MAX_YAML_DEPTH, MAX_YAML_DEPTH + 1)
    )
    conf = _conf(tmp_path, {"sweep/at.yaml": "# @package _global_\n" + at, "sweep/over.yaml": over})
    assert conf_file_problem(["+sweep=at"], str(conf)) is None
    line = conf_file_problem(["+sweep=over"], str(conf))
    assert line == (
        "Invalid config: conf/sweep/over.yaml: its values are nested too deep to read "
        f"(over {MAX_YAML_DEPTH} levels). Fix: flatten the nesting (a config file needs a few levels)."
    )


def test_the_fast_loader_reads_every_shipped_file_as_the_python_one_does() -> None:
    """SAFE_LOADER (libyaml where PyYAML has it) gives the same values for every file of conf/."""
    files = sorted(
        Path(folder, name)
        for folder, _, names in os.walk(CONF, followlinks=True)  # conf/sweep is a link to sweep/
        for name in names
        if name.endswith(".yaml")
    )
    assert len(files) > 60
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=SAFE_LOADER) == yaml.safe_load(text), path
