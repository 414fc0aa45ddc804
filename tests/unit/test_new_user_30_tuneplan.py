"""Session 30's trial of the plan and the tuner (docs/reliability-4.md, rows 239 on): a swept ``space.*``
list tuned the default space, keys the set-ups overwrite ignored beside ``plan_clusters``, ``compile=``
beside ``space.compile`` refused in one word order only, one backend listed under two names and ``01,1``
two jobs. ``run.refusal`` is the line ``run.py`` prints before Hydra (exit 2), nothing written."""

from __future__ import annotations

import pytest

from run import refusal

PLAN = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]"]
TUNE = ["-m", "hydra/sweeper=tune", "device=cpu", "model=gpt-tiny"]


@pytest.mark.parametrize(
    ("reader", "who"), [(PLAN, "the plan"), (["-m", *PLAN], "the plan"), (TUNE, "the tuner")]
)
def test_a_swept_space_list_is_refused_with_the_one_list(reader, who):
    """Was: the tuner dropped ``[ddp],[fsdp]`` and measured the default space's 90 set-ups (``single``
    among them); without -m, "add -m". Now one line whose fix is one list, and the fix passes."""
    line = refusal([*reader, "space.backends=[ddp],[fsdp]"])
    assert line == (
        "Invalid config: space.backends=[ddp],[fsdp]: is swept, but the space is every combination of its "
        f"lists ({who} searches one space, not a sweep of spaces). "
        "Fix: give one list: space.backends=[ddp,fsdp]."
    )
    assert refusal([*reader, "space.backends=[ddp,fsdp]"]) is None


@pytest.mark.parametrize("reader", [PLAN, TUNE])
@pytest.mark.parametrize(
    ("given", "space_key", "listed"),
    [
        ("backend=ddp", "space.backends", "[ddp]"),
        ("activation_checkpointing=none", "space.checkpointing", "[none]"),
        ("batch.micro_batch_size=4", "space.micro_batches", "[4]"),
        ("parallel.tp=2", "space.layouts", "[tp2]"),
        ("precision=fp8", "space.precisions", "[fp8]"),
    ],
)
def test_a_key_the_space_decides_is_refused_naming_its_space_key(reader, given, space_key, listed):
    """Was: ``backend=ddp`` beside ``space.layouts=[dp]`` ranked fsdp set-ups, exit 0, the key ignored."""
    key = given.partition("=")[0]
    who = "a plan over plan_clusters" if reader is PLAN else "a tuning sweep over space.*"
    line = refusal([*reader, "space.layouts=[dp]", given])
    assert line == (
        f"Invalid config: {given}: {who} takes it from {space_key} (each set-up sets its own {key}). "
        f"Fix: drop {key} and give it as {space_key}={listed}."
    )
    fixed = [*reader, f"{space_key}={listed}"] + (
        [] if space_key == "space.layouts" else ["space.layouts=[dp]"]
    )
    assert refusal(fixed) is None


@pytest.mark.parametrize(
    ("given", "instead"),
    [("batch=auto", "list them: space.micro_batches=[1,2,4,8]"), ("search.model=largest", "name the model")],
)
def test_a_key_a_plan_over_clusters_cannot_use_is_refused(given, instead):
    line = refusal([*PLAN, given])
    assert line is not None and line.startswith(
        f"Invalid config: {given}: a plan over plan_clusters cannot use it"
    )
    assert f"Fix: drop {given} and {instead}" in line, line


def test_keys_the_space_does_not_decide_pass():
    for given in ("model.seq_len=1024", "batch.global_batch_size=64", "compile=true"):
        assert refusal([*PLAN, given]) is None, given
    assert refusal([*TUNE, "backend=ddp,fsdp"]) is None  # no space.*: the sweep's axes are the set-ups


@pytest.mark.parametrize("reader", [PLAN, TUNE])
def test_a_layout_degree_restated_at_its_default_passes(reader):
    """``parallel.dp_shard=-1`` or ``parallel.tp=1`` beside a space restates what its ``dp`` layout sets:
    no conflict (it was refused with the fix ``space.layouts=[hsdp]``, a layout one node refuses); a degree
    the space would override is still refused."""
    for given in ("parallel.dp_shard=-1", "parallel.dp_replicate=1", "parallel.tp=1", "parallel.cp=1"):
        assert refusal([*reader, "space.layouts=[dp,tp2]", given]) is None, given
    line = refusal([*reader, "space.layouts=[dp,tp2]", "parallel.tp=2"])
    assert line is not None and "Fix: drop parallel.tp and give it as space.layouts=[tp2]" in line


@pytest.mark.parametrize(("reader", "who"), [(PLAN, "a plan"), (TUNE, "a tuning sweep")])
def test_compile_beside_space_compile_is_refused_in_either_order(reader, who):
    """Was: ``space.compile=[false,true] compile=true`` planned 900 set-ups (the bare ``compile`` read as
    ``space.compile`` and taking its place); the other order was refused."""
    expected = (
        f"Invalid config: compile=true: {who} over space.* takes it from the space (space.compile sets each "
        "set-up's compile). Fix: give it as space.compile=[true] in place of both, or drop space.compile to "
        "keep the job's own."
    )
    assert refusal([*reader, "space.compile=[false,true]", "compile=true"]) == expected
    assert refusal([*reader, "compile=true", "space.compile=[false,true]"]) == expected


@pytest.mark.parametrize("reader", [PLAN, TUNE])
def test_one_backend_under_two_names_is_refused(reader):
    """Was: ``[deepspeed,zero3]`` ranked two identical rows (deepspeed is ZeRO-3)."""
    line = refusal([*reader, "space.backends=[deepspeed,zero3]"])
    assert line == (
        "Invalid config: space.backends=[deepspeed,zero3]: lists deepspeed and zero3, one backend under two "
        "names (deepspeed is ZeRO-3): each set-up twice. Fix: list it once: space.backends=[zero3]."
    )
    assert refusal([*reader, "space.backends=[zero3]"]) is None


def test_a_value_listed_twice_is_compared_as_the_job_reads_it():
    """Was: ``batch.micro_batch_size=01,1`` ran two identical jobs (``'01'`` and 1 to the grammar, 1 and 1
    to the job) while ``model=a,a`` was refused. A text key keeps its text: ``tag=01,1`` is two tags."""
    line = refusal(["-m", "device=cpu", "batch.micro_batch_size=01,1"])
    assert line == (
        "Invalid config: batch.micro_batch_size=01,1: lists 1 more than once, so the same job would run "
        "twice. Fix: give each value once: batch.micro_batch_size=1 (to measure a set-up several times: "
        "-m repeats=3)."
    )
    assert refusal(["-m", "device=cpu", "seed=01,1"]) is not None
    assert refusal(["-m", "device=cpu", "tag=01,1"]) is None
    assert refusal(["-m", "device=cpu", "batch.micro_batch_size=1,2"]) is None
