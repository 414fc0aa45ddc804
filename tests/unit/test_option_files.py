"""Session 35's trial: the option files of ``conf/`` (``conf/model/NAME.yaml``, a user's own), the root
config and a sweep file's picks, checked before Hydra (#317-#320 of docs/reliability-5.md).

Every broken file is built in ``tmp_path`` (a ``conf/`` of its own); the listings that read the
checkout's ``conf/`` are pointed at it with ``monkeypatch``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flopsweep import model_identity, override_schema
from flopsweep.conf_files import root_config_problem, unreadable_option_lines
from flopsweep.option_file_keys import option_file_problem, sweep_picks_problem
from flopsweep.options import GROUP_BASES
from flopsweep.override_schema import CONF, option_files

LLAMA = "defaults:\n  - /schema/model/base_llama@_here_\n  - _self_\n\nname: mine\nn_layer: 2\nn_embd: 128\n"

ROOT = (
    "defaults:\n  - base_config\n  - model: mine\n  - attention: sdpa\n  - backend: single\n"
    "  - precision: bf16\n  - batch: fixed\n  - activation_checkpointing: none\n  - _self_\n"
)


def _conf(tmp_path: Path, files: dict[str, str]) -> Path:
    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    (conf / "config.yaml").write_text(ROOT)
    for name, text in files.items():
        (conf / name).parent.mkdir(parents=True, exist_ok=True)
        (conf / name).write_text(text)
    return conf


@pytest.fixture
def pointed(monkeypatch: pytest.MonkeyPatch):
    """Point the listings of ``conf/`` at another folder; their caches cleared before and after."""

    def point(conf: Path) -> None:
        monkeypatch.setattr(override_schema, "CONF", str(conf))
        monkeypatch.setattr(model_identity, "CONF", str(conf))
        model_identity.options.cache_clear()

    yield point
    model_identity.options.cache_clear()


@pytest.mark.parametrize(
    ("text", "warned"),
    [
        (
            "name: bad\nn_layer: [1,\n",
            "flopsweep: warning: conf/model/bad1.yaml: is not YAML (expected the node content, but found "
            "'<stream end>' at line 3, column 1); left out of the model options. Fix: correct the YAML "
            "there, or remove the file.",
        ),
        ("", None),  # empty: listed with no name; refused only when picked (option_file_problem)
        ("name: bad\nname: again\n", None),  # a key twice: PyYAML keeps the last; refused when picked
    ],
)
def test_a_broken_option_file_stops_no_run_of_another_option(tmp_path, pointed, text, warned) -> None:
    """#317: one unreadable conf/model/*.yaml stopped every run and plan (any model) with a YAML traceback
    naming no file, from the listing of model identities (model_identity.options)."""
    conf = _conf(tmp_path, {"model/mine.yaml": LLAMA, "model/bad1.yaml": text})
    pointed(conf)
    assert model_identity.options()["mine"] == ("mine", "llama")
    assert model_identity.options()["bad1"][0] in ("", "again")
    assert model_identity.command_line_problem(["model=mine", "device=cpu"]) is None
    assert model_identity.command_line_problem(["device=cpu"]) is None  # config.yaml's default
    assert override_schema.options_of_kinds("model", ["llama"]) == ["mine"]
    assert unreadable_option_lines(str(conf)) == ([warned] if warned else [])


def test_a_link_among_the_options_stops_no_listing(tmp_path, pointed) -> None:
    conf = _conf(tmp_path, {"model/mine.yaml": LLAMA})
    os.symlink("/etc/passwd", conf / "model" / "bad7.yaml")
    pointed(conf)
    assert model_identity.options()["mine"] == ("mine", "llama")
    assert model_identity.command_line_problem(["device=cpu"]) is None


def test_the_checkouts_option_files_all_read() -> None:
    assert unreadable_option_lines(CONF) == []


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            LLAMA + "n_layer: 4\n",
            "Invalid config: conf/model/mine.yaml: found duplicate key n_layer at line 8. Fix: give each key "
            "once.",
        ),
        (
            "",
            "Invalid config: conf/model/mine.yaml: is empty, so model=mine sets none of its keys. Fix: "
            "write its keys (as conf/model/llama-tiny.yaml), or remove the file.",
        ),
        (
            "- a\n",
            "Invalid config: conf/model/mine.yaml: holds a list, not a mapping of keys. Fix: write "
            "KEY: VALUE lines (as conf/model/llama-tiny.yaml).",
        ),
        (
            LLAMA.replace("n_layer", "n_layre"),
            "Invalid config: conf/model/mine.yaml: n_layre: is no key of LlamaConfig, the schema of "
            "model=mine. Fix: did you mean n_layer?",
        ),
        (
            LLAMA.replace("n_layer: 2", "n_layer: two"),
            "Invalid config: conf/model/mine.yaml: n_layer: Value 'two' of type 'str' could not be "
            "converted to Integer (LlamaConfig, the schema of model=mine). Fix: write a value of "
            "LlamaConfig.n_layer's type.",
        ),
    ],
)
def test_a_picked_option_file_is_checked_like_a_sweep_file(tmp_path, pointed, text, line) -> None:
    """#318: Hydra's traceback (a key twice), its six-line ConfigKeyError (a typo, a type), or a line
    about model.name the user never wrote (an empty file)."""
    conf = _conf(tmp_path, {"model/mine.yaml": text})
    pointed(conf)
    assert option_file_problem(["model=mine", "device=cpu"], str(conf)) == line


def test_a_picked_option_file_that_is_a_link_is_refused_unread(tmp_path, pointed) -> None:
    """#318: Hydra printed /etc/passwd as a key, twice."""
    conf = _conf(tmp_path, {"model/mine.yaml": LLAMA})
    os.symlink("/etc/passwd", conf / "model" / "bad7.yaml")
    pointed(conf)
    assert option_file_problem(["model=bad7"], str(conf)) == (
        "Invalid config: conf/model/bad7.yaml: is a symbolic link (to /etc/passwd); an option is read "
        "only from a file of conf/ itself. Fix: copy the file's text into conf/model/bad7.yaml in place "
        "of the link, or remove it."
    )


def test_every_shipped_option_file_passes() -> None:
    picked = [f"{group}={option}" for group in GROUP_BASES for option in option_files(group)]
    assert len(picked) > 40
    assert [p for p in picked if option_file_problem([p])] == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("# flopsweep root config.\n# cut here\n", "has no defaults list"),
        ("defaults:\n  - _self_\n", "has no base_config in its defaults list"),
    ],
)
def test_a_damaged_root_config_is_named_not_the_override(tmp_path, text, said) -> None:
    """#319: blamed on model=llama-tiny ("a group added with +"), whose fix then raised Missing key
    defaults."""
    conf = _conf(
        tmp_path, {"config.yaml": text, "model/mine.yaml": LLAMA, "backend/single.yaml": "name: single\n"}
    )
    assert root_config_problem(["device=cpu", "model=llama-tiny"], str(conf)) == (
        f"Invalid config: conf/config.yaml: {said} (model, backend unpicked): the checkout's root config is "
        "damaged. Fix: restore it from the checkout: git checkout conf/config.yaml (or reinstall flopsweep)."
    )
    assert root_config_problem(["--config-name", "other"], str(conf)) is None


def test_the_checkouts_root_config_passes(tmp_path) -> None:
    assert root_config_problem([], CONF) is None
    assert root_config_problem([], str(_conf(tmp_path, {}))) is None
    bare = _conf(tmp_path / "bare", {"config.yaml": "defaults:\n  - _self_\n"})  # no option groups: a test's
    assert root_config_problem([], str(bare)) is None


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "defaults:\n  - override /model: llama-tny\n",
            "Invalid config: conf/sweep/mine.yaml (defaults: override /model: llama-tny): model=llama-tny: "
            "llama-tny is no option of model",
        ),
        (
            "hydra:\n  launcher:\n    bogus: 1\n",
            "Invalid config: conf/sweep/mine.yaml (hydra:): hydra.launcher.bogus=1: hydra/launcher=basic "
            "has no key bogus.",
        ),
    ],
)
def test_a_sweep_files_picks_and_hydra_keys_get_the_command_lines_line(tmp_path, text, line) -> None:
    """#320: Hydra's multi-line errors (exit 1) where the command line's model=llama-tny and
    hydra.launcher.bogus=1 are one line each."""
    conf = _conf(tmp_path, {"sweep/mine.yaml": "# @package _global_\n" + text})
    problem = sweep_picks_problem(["-m", "+sweep=mine"], str(conf))
    assert problem is not None and problem.startswith(line)
    assert "\n" not in problem


def test_every_shipped_sweep_files_picks_and_hydra_keys_pass() -> None:
    names = [f.removesuffix(".yaml") for f in os.listdir(os.path.join(CONF, "sweep")) if f.endswith(".yaml")]
    assert len(names) > 20
    assert [n for n in names if sweep_picks_problem(["-m", f"+sweep={n}"])] == []


def test_run_py_refuses_before_hydra_in_this_order(tmp_path, pointed, monkeypatch) -> None:
    """The checks are in :func:`run.refusal`'s chain: the damaged root config before the override it was
    blamed on, the empty option file before model.name's line."""
    import run

    conf = _conf(tmp_path, {"model/mine.yaml": ""})
    pointed(conf)
    monkeypatch.setattr(
        run, "RUN_CONF", str(conf)
    )  # conf/config.yaml's defaults pick groups it lacks: unchecked
    line = run.refusal(["model=mine", "device=cpu"])
    assert line is not None and line.startswith("Invalid config: conf/model/mine.yaml: is empty")
    (conf / "config.yaml").write_text("defaults:\n  - _self_\n")
    line = run.refusal(["model=llama-tiny", "device=cpu"])
    assert line is not None and line.startswith("Invalid config: conf/config.yaml: has no base_config")


def test_an_option_file_built_on_another_option_is_checked_against_that_ones_schema(
    tmp_path, pointed
) -> None:
    """A re-trial's regression: ``defaults: [/backend/fsdp@_here_]`` (or ``fsdp``) takes FSDP2's schema, not
    the group's base, so its own keys pass and a misspelt one is named against FSDPConfig."""
    fsdp = (Path(CONF) / "backend" / "fsdp.yaml").read_text()
    for base in ("/backend/fsdp@_here_", "fsdp"):
        mine = f"defaults:\n  - {base}\n  - _self_\nname: fsdp\nreshard_after_forward: false\n"
        conf = _conf(
            tmp_path / base.strip("/@").replace("/", "-"),
            {"backend/fsdp.yaml": fsdp, "backend/mine.yaml": mine},
        )
        pointed(conf)
        assert option_file_problem(["backend=mine", "device=cpu"], str(conf)) is None
        (conf / "backend" / "mine.yaml").write_text(
            mine.replace("reshard_after_forward", "reshard_after_forwrd")
        )
        assert option_file_problem(["backend=mine", "device=cpu"], str(conf)) == (
            "Invalid config: conf/backend/mine.yaml: reshard_after_forwrd: is no key of FSDPConfig, the "
            "schema of backend=mine. Fix: did you mean reshard_after_forward?"
        )
