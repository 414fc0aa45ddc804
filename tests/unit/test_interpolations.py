"""Session 25: interpolations the checks before Hydra let through that Hydra then answered with a multi-line
error and exit 1 (``model=${tag}``: "Error resolving interpolation '${tag}', possible interpolation keys";
``steps.measure=${oc.decode:0}``: an ``InterpolationResolutionError`` block): one line, exit 2, before Hydra
(:mod:`flopsweep.interpolations`). What resolves (another group's choice, ``${oc.env:...}``) or refers to a
config key in a key's value (``timeout_s=${seed}``: the job resolves and checks it) is left alone."""

from __future__ import annotations

import pytest

from flopsweep.interpolations import choice_problem, interpolated_problem, resolver_problem
from run import RUN_CONF, refusal


@pytest.mark.parametrize(
    ("override", "starts"),
    [
        (
            "model=${tag}",
            "Invalid config: model=${tag}: a config group's option cannot come from an interpolation",
        ),
        ("backend=${seed}", "Invalid config: backend=${seed}: a config group's option cannot come from"),
        (
            "steps.measure=${oc.decode:0}",
            "Invalid config: steps.measure=${oc.decode:0}: the interpolation cannot",
        ),
    ],
)
def test_an_interpolation_hydra_cannot_resolve_is_one_line_before_hydra(override: str, starts: str) -> None:
    line = refusal([override])
    assert line is not None and line.startswith(starts) and "Fix: " in line and "\n" not in line


def test_the_fix_names_the_groups_options() -> None:
    line = choice_problem("backend", "${seed}", RUN_CONF)
    assert (
        line is not None and "Fix: name the option (ddp, deepspeed, fsdp, single, zero1, zero2, ...)" in line
    )


def test_what_resolves_or_is_the_jobs_to_resolve_is_left_alone(monkeypatch) -> None:
    monkeypatch.setenv("FLOPSWEEP_TEST_BACKEND", "ddp")
    for override in (
        "model=${backend}",  # Hydra's interpolation of another group's choice
        "backend=${oc.env:FLOPSWEEP_TEST_BACKEND}",
        "timeout_s=${seed}",  # the job resolves it and checks the value (timeout_s=0 refused, naming it)
        "steps.measure=${oc.decode:'3'}",
        "tag=${now:%H-%M}",  # a resolver Hydra registers
        "hydra.run.dir=out/${now:%H}",
    ):
        assert interpolated_problem([override], RUN_CONF) is None, override
    assert resolver_problem("tag", "plain") is None
