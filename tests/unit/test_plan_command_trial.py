"""The new-user trial of session 31: the best set-up's command of a plan keeps the user's own overrides
(``batch=fixed`` over a sweep file's ``override /batch: auto``), composed again it is the ranked set-up; an
interpolation of a key the config does not have is one line before Hydra (exit 2), as ``${oc.env:UNSET}`` is
(run.py itself: tests/integration/test_plan_command_trial.py). Real plans on this CPU machine, on a copy of
conf/ in a temporary folder (the checkout's conf/ is never written)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf, open_dict

from flopsweep.checkpointing import normalize_overrides
from flopsweep.store import register_configs
from run import refusal

SWEEP = """# @package _global_
# A user's plan: gpt-1.3b at the micro batch batch=auto finds.
defaults:
  - override /batch: auto

device: cuda
"""


def _compose(conf: Path, overrides: list[str]):
    """The RunConfig run.py's Hydra composes of ``conf`` (a copy of conf/) for ``overrides``, and its
    groups' choices (``backend: zero1``)."""
    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "test", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        cfg = compose(
            config_name="config", overrides=normalize_overrides(list(overrides)), return_hydra_config=True
        )
    choices = dict(cfg.hydra.runtime.choices)
    with open_dict(cfg):
        del cfg["hydra"]
    return OmegaConf.to_object(cfg), choices


def test_the_best_set_ups_command_keeps_the_users_batch_pick(tmp_path: Path) -> None:
    """Was: ``flopsweep model=gpt-1.3b +sweep=mine plan=false backend=zero1 ... batch.micro_batch_size=8``
    without ``batch=fixed``: it ran the sweep file's ``batch=auto`` (micro batch 18), not the ranked one."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    conf = tmp_path / "conf"
    shutil.copytree(Path(__file__).resolve().parents[2] / "conf", conf)
    (conf / "sweep" / "mine.yaml").write_text(SWEEP)
    args = [
        "plan=true",
        "plan_clusters=[H100:8]",
        "model=gpt-1.3b",
        "+sweep=mine",
        "batch=fixed",
        "plan_format=json",
    ]
    out = decide_job(_compose(conf, args)[0], JobInfo(job_dir=tmp_path, overrides=args))
    assert out["status"] == "plan", out
    best = out["best"][0]
    command = json.loads(out["plan_text"])["best"][0]["command"].split()
    assert command[0] == "flopsweep" and command[1:4] == ["model=gpt-1.3b", "+sweep=mine", "batch=fixed"], (
        command
    )
    again, choices = _compose(conf, [o for o in command[1:] if o not in ("-m", "hydra/launcher=slurm")])
    assert choices["batch"] == "fixed" and not again.plan
    assert again.batch.micro_batch_size == best["micro_batch"]
    assert choices["backend"] == best["backend"] and again.model.name == "gpt-1.3b"
    assert (str(again.nproc_per_node), again.nnodes) == ("8", 1)  # nproc_per_node: an int or "auto"


def test_the_command_keeps_the_users_overrides_in_their_order() -> None:
    """Every override but the plan's and those the set-up replaces stays, in the order typed."""
    from flopsweep.job.planrender import override_line
    from flopsweep.plan_assess import Row

    row = Row(cluster="H100:1x8:ib400", setup=None)
    line = override_line(
        row, ["batch=fixed", "model=gpt-1.3b", "plan=true", "backend=fsdp", "batch.grad_accum=2"]
    )
    assert line.split()[2:5] == ["batch=fixed", "model=gpt-1.3b", "batch.grad_accum=2"], line
    assert "backend=fsdp" not in line and "plan=true" not in line


@pytest.mark.parametrize("plan", [[], ["plan=true"]])
@pytest.mark.parametrize(
    ("override", "ref"),
    [
        ("model.n_layer=${nope}", "nope"),
        ("batch.micro_batch_size=${nope}", "nope"),
        ("model.n_layer=${model.nope}", "model.nope"),
        ("tag=x${steps.nope}", "steps.nope"),
    ],
)
def test_an_interpolation_of_a_missing_key_is_one_line(plan: list[str], override: str, ref: str) -> None:
    """Was: a traceback (``InterpolationKeyError``), exit 1, after Hydra made outputs/."""
    line = refusal(["model=gpt-tiny", "device=cpu", *plan, override])
    assert line is not None and "\n" not in line, line
    assert line.startswith(
        f"Invalid config: {override}: interpolates a key the config does not have ({ref}). Fix: "
    )


@pytest.mark.parametrize(
    "override",
    [
        "model.n_layer=${model.n_head}",
        "tag=${model.name}",
        "tag=${oc.env:HOME}",
        "tag=${.x}",
        "tag=${now:%H}",
    ],
)
def test_an_interpolation_of_a_key_the_config_has_is_left_to_the_job(override: str) -> None:
    assert refusal(["model=gpt-tiny", "device=cpu", override]) is None


def test_a_key_the_command_line_adds_may_be_interpolated() -> None:
    from flopsweep.interpolations import missing_key_problem

    assert missing_key_problem("model.n_layer", "${model.extra}", {"model.extra"}) is None
    assert missing_key_problem("model.n_layer", "${model.extra}", set()) is not None
