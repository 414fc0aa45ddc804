"""A fix that names a key runs as written (trial 24): the "did you mean" of a typo whose nearest key
needs another option (``nproc=2``: ``backend=ddp nproc_per_node=2``), and keys that do nothing without
another (``fault.rank=1`` without ``fault.kind``), refused before Hydra with a fix that passes. Each
suggested line is composed with Hydra and planned as the job plans it (``plan_job``): the bare value is
refused, the line passes (:mod:`flopsweep.key_needs`, :mod:`flopsweep.idle_keys`)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from flopsweep.hydra_keys import hydra_key_problem
from flopsweep.idle_keys import IDLE
from flopsweep.job import JobInfo, plan_job
from flopsweep.key_needs import DEFAULTS, idle_key_problem, needed, still_meets
from flopsweep.override_schema import CONF, known_keys, read_conf_yaml
from run import refusal

CPU = ["device=cpu"]


def _planned(hydra_compose, overrides: list[str], tmp_path: Path) -> dict:
    """The plan row of ``overrides`` on the CPU, as the job plans it (its status and reason)."""
    overrides = [*CPU, *overrides]
    return plan_job(hydra_compose(overrides), JobInfo(job_dir=tmp_path, overrides=overrides, job_num=None))[
        "plan"
    ]


def _runs(hydra_compose, line: list[str], tmp_path: Path) -> None:
    """``line`` passes the checks before Hydra, plans ``ok`` and is placed on this machine as the launch
    places it (``plan.plan`` on ``Environment.detect()``: a local run's checks of nodes and ranks)."""
    from flopsweep.plan import Environment, plan

    assert refusal([*CPU, *line]) is None, (line, refusal([*CPU, *line]))
    row = _planned(hydra_compose, line, tmp_path)
    assert row["status"] == "ok", (line, row["reason"])
    plan(hydra_compose([*CPU, *line]), Environment.detect())


def test_the_defaults_needed_are_conf_config_yaml_s() -> None:
    defaults = read_conf_yaml(str(Path(CONF) / "config.yaml"))["defaults"]
    picked = {k: v for d in defaults if isinstance(d, dict) for k, v in d.items()}
    assert {k: picked[k] for k in DEFAULTS} == DEFAULTS


def _scalar_keys(cfg) -> list[tuple[str, str]]:
    """Every int and bool key of ``cfg`` that a "did you mean" may name, with a value a user would type
    for it: ``2`` (``4`` where 2 is the default) or the other boolean."""
    out = []
    for key in sorted(known_keys()):
        node, parts = cfg, key.split(".")
        for part in parts[:-1]:
            node = getattr(node, part, None)
        value = getattr(node, parts[-1], None) if dataclasses.is_dataclass(node) else None
        if isinstance(value, bool):
            out.append((key, "false" if value else "true"))
        elif isinstance(value, int):
            out.append((key, "4" if value == 2 else "2"))
    return out


def _with_value(node: object, key: str, value: object) -> object:
    """``node`` (a ``RunConfig``) with the dotted ``key`` set to ``value``, a copy."""
    head, _, rest = key.partition(".")
    inner = _with_value(getattr(node, head), rest, value) if rest else value
    return dataclasses.replace(node, **{head: inner})


OWN_VALUE = {"model.n_embd", "repeat", "optim.overlap_forward"}
"""Keys refused at 2 for the value itself, not for an option missing: ``model.n_embd=2`` under
gpt-tiny's 4 heads, ``repeat`` (the sweeper's, never suggested), ``optim.overlap_forward=true`` (a
second CUDA stream: no override runs it on the CPU; its refusal's fix names ``device=cuda``)."""


def test_every_key_a_value_of_which_the_defaults_refuse_gets_the_overrides_that_make_it_pass(
    hydra_compose, tmp_path: Path
) -> None:
    """The class: each int and bool key at a value a user types (on the CPU, conf/config.yaml's options)
    is either planned ``ok`` bare, or refused, and then :func:`needed` names the overrides that make it
    plan ``ok`` (``nproc_per_node``, ``nnodes``, each ``parallel.*`` degree, ``optim.in_backward``)."""
    base = hydra_compose(CPU)
    refused = []
    for key, value in _scalar_keys(base):
        if key in OWN_VALUE:
            continue
        typed = {"true": True, "false": False}.get(value, None)
        cfg = _with_value(base, key, int(value) if typed is None else typed)  # as Hydra would set it
        info = JobInfo(job_dir=tmp_path, overrides=[*CPU, f"{key}={value}"], job_num=None)
        row = plan_job(cfg, info)["plan"]
        if row["status"] == "ok":
            continue
        refused.append(key)
        extra = needed(key, value, {"device": "cpu"})
        assert extra, (key, value, row["reason"])
        if still_meets(key, value, {"device": "cpu"}):  # nnodes: Slurm's; the plan passes here
            assert _planned(hydra_compose, [*extra, f"{key}={value}"], tmp_path)["status"] == "ok", (
                key,
                extra,
            )
        else:
            _runs(hydra_compose, [*extra, f"{key}={value}"], tmp_path)
    assert {"nnodes", "parallel.tp", "parallel.pp", "parallel.cp", "parallel.ep", "optim.in_backward"} <= set(
        refused
    )


@pytest.mark.parametrize(
    ("line", "extra"),
    [
        (["nproc_per_node=2"], ["backend=ddp"]),
        (["backend=fsdp", "nproc_per_node=2"], []),
        (["nnodes=2"], ["backend=ddp"]),
        (["parallel.tp=2"], ["backend=fsdp", "nproc_per_node=2"]),
        (["backend=ddp", "parallel.pp=2"], ["backend=fsdp", "nproc_per_node=2"]),
        (["parallel.dp_shard=2"], ["backend=fsdp", "nproc_per_node=2"]),
        (["parallel.ep=2"], ["model=hf", "model.config=olmoe-tiny", "backend=fsdp", "nproc_per_node=2"]),
        (["fault.rank=1"], ["backend=ddp", "fault.kind=raise", "nproc_per_node=2"]),
        (["fault.kind=oom", "fault.rank=1"], ["backend=ddp", "nproc_per_node=2"]),
        (["optim.in_backward=true"], ["optim.grad_clip=0"]),
        (["search.max_n_layer=4"], ["search.model=largest"]),
        (["plan_format=csv"], ["plan=true"]),
    ],
)
def test_what_each_value_needs_and_that_the_whole_line_runs(
    hydra_compose, tmp_path: Path, line: list[str], extra: list[str]
) -> None:
    """:func:`needed` of the last override on the others: what it returns, and the line it makes (a
    replaced option dropped: ``backend=ddp`` for ``backend=fsdp``) passes; the bare line does not."""
    key, _, value = line[-1].partition("=")
    given = dict(o.split("=", 1) for o in ["device=cpu", *line[:-1]])
    assert needed(key, value, given) == extra
    groups = {e.partition("=")[0] for e in extra}
    kept = [o for o in line[:-1] if o.partition("=")[0] not in groups]
    if note := still_meets(key, value, given):  # nnodes: a local run has one node, the line says so
        assert "hydra/launcher=slurm" in note
        assert _planned(hydra_compose, [*kept, *extra, line[-1]], tmp_path)["status"] == "ok"
    else:
        _runs(hydra_compose, [*kept, *extra, line[-1]], tmp_path)
    if extra:
        bare = refusal([*CPU, *line]) or _planned(hydra_compose, line, tmp_path)["reason"]
        assert bare and bare.startswith("Invalid config: "), line


def _suggested(line: str) -> list[str]:
    """The overrides of the first "did you mean" of a refusal (its whole line, without the note)."""
    mean = re.search(r"did you mean (.+?)\?(?: |$)", line)
    assert mean, line
    return mean.group(1).split(" (")[0].split(" in place of ")[0].split()


@pytest.mark.parametrize(
    ("typed", "others", "suggested"),
    [
        ("nproc=2", [], ["backend=ddp", "nproc_per_node=2"]),
        ("nproc=2", ["backend=fsdp"], ["nproc_per_node"]),
        (
            "parallel.e=2",
            [],
            ["model=hf", "model.config=olmoe-tiny", "backend=fsdp", "nproc_per_node=2", "parallel.ep=2"],
        ),
        ("parallel.t=2", [], ["backend=fsdp", "nproc_per_node=2", "parallel.tp=2"]),
        ("fault.rnk=1", [], ["backend=ddp", "fault.kind=raise", "nproc_per_node=2", "fault.rank=1"]),
        ("plan_formt=csv", [], ["plan=true", "plan_format=csv"]),
        ("search.max_n_layr=4", [], ["search.model=largest", "search.max_n_layer=4"]),
        ("optim.in_backwards=true", [], ["optim.grad_clip=0", "optim.in_backward=true"]),
    ],
)
def test_a_typos_did_you_mean_is_a_line_that_runs_as_written(
    hydra_compose, tmp_path: Path, typed: str, others: list[str], suggested: list[str]
) -> None:
    """Trial 24: ``nproc=2`` suggested ``nproc_per_node=2``, which ``backend=single`` then refused. The
    suggestion, put in place of the typo, passes the checks before Hydra and plans ``ok``."""
    line = refusal([*CPU, *others, typed])
    assert line is not None and line.startswith(f"Invalid config: {typed}: no such key."), line
    assert "\n" not in line
    assert _suggested(line) == suggested, line
    fixed = suggested if "=" in suggested[-1] else [f"{suggested[-1]}={typed.partition('=')[2]}"]
    _runs(hydra_compose, [*others, *fixed], tmp_path)


def test_a_mapping_valued_hydra_key_is_suggested_in_the_form_it_takes() -> None:
    """``hydra.sweeper.param=1`` suggested ``hydra.sweeper.params``, which takes no plain value; the fix
    shows its form, and its example passes."""
    line = refusal(["-m", "hydra.sweeper.param=1"])
    assert line is not None and "hydra.sweeper.params.KEY=VALUES" in line and "\n" not in line, line
    example = re.search(r"e\.g\. -m '([^']+)'", line).group(1)  # Hydra sweeps no hydra.* key: the axis
    assert (
        example == "seed=0,1"
        and hydra_key_problem(["-m", example]) is None
        and refusal(["-m", example]) is None
    )
    assert refusal(["-m", "hydra.sweeper.params=1"]).startswith("Invalid config: hydra.sweeper.params=1:")
    near = refusal(["-m", "hydra.sweeper.max_batch_siz=2"])  # a plain key: named bare
    assert near.endswith("did you mean hydra.sweeper.max_batch_size?"), near


@pytest.mark.parametrize("idle", IDLE, ids=[i.needs for i in IDLE])
def test_each_key_that_does_nothing_without_another_is_refused_with_a_fix_that_runs(
    hydra_compose, tmp_path: Path, idle
) -> None:
    """Trial 24: ``fault.rank=1`` without ``fault.kind`` injected nothing and said nothing. Each key of
    :data:`flopsweep.idle_keys.IDLE`, alone: one line naming the key, the value and the other key; the
    fix's line passes and plans ``ok``; the key with a value of the other that acts passes."""
    values = {
        "fault.rank": "0",
        "fault.phase": "warmup",
        "search.grow": "seq_len",
        "search.min_seq_len": "512",
        "search.max_seq_len": "4096",
        "plan_clusters": "[H100:8]",
        "compile_scope": "model",
        "compile_mode": "max-autotune-no-cudagraphs",  # a CUDA-graph mode needs CUDA: the job says so
    }
    before = [i.pick for i in IDLE if idle.needs in i.keys]  # search.grow acts with search.model=largest
    alone = [f"{idle.needs}={idle.idle[0]}"] if idle.unset_acts else []  # search.grow=n_layer: the default
    for key in idle.keys:
        typed = f"{key}={values.get(key, '4' if key.startswith('search') else 'csv')}"
        line = refusal([*CPU, *before, *alone, typed])
        assert line is not None and line.startswith(
            f"Invalid config: {typed}: does nothing without {idle.needs}"
        ), line
        assert "\n" not in line
        fix = (
            line.partition("Fix: write ")[2].split(" (or ")[0].split(" in place of ")[0].split(", or drop")[0]
        )
        fix = fix.split()
        assert fix[-1] == typed and idle.pick in fix, line
        if key != "plan_clusters":  # a cluster plan ranks set-ups: its own tests
            _runs(hydra_compose, [*before, *fix], tmp_path)
        assert idle_key_problem([*CPU, *before, *fix]) is None


def test_a_sweep_with_a_value_that_acts_or_a_sweep_file_is_left_alone() -> None:
    """``-m fault.kind=none,raise fault.phase=warmup`` sweeps a control job beside the fault (the failure
    tests do); a ``+sweep`` file or another config may set the other key; null is unset."""
    assert idle_key_problem(["-m", "fault.kind=none,raise", "fault.phase=warmup"]) is None
    assert idle_key_problem(["fault.rank=1", "+sweep=smoke"]) is None
    assert idle_key_problem(["--config-name=other", "fault.rank=1"]) is None
    assert idle_key_problem(["plan_clusters=null"]) is None
    assert idle_key_problem(["fault.kind=${oc.decode:raise}", "fault.rank=0"]) is None  # resolved: raise
    for bad in ("fault.phase=bogus", "compile_scope=layer", "search.grow=n_embd"):  # the job lists the values
        assert idle_key_problem([bad]) is None, bad
    line = idle_key_problem(["fault.kind=none", "fault.rank=0"])
    assert line is not None and "fault.kind=raise fault.rank=0 in place of fault.kind=none" in line, line


def test_an_interpolation_never_lets_a_key_that_does_nothing_through() -> None:
    """Session 25: ``fault.phase=${tag}`` passed (not a phase as typed: left to the job, which resolved it
    and ran no fault), and ``fault.kind=${oc.decode:none} fault.rank=1`` passed (the other key's
    interpolation was "Hydra's to resolve", and resolved to none). An interpolated value of the idle key is a
    value; the other key's is resolved here when it stands alone, else refused: it decides before the run."""
    line = idle_key_problem(["fault.phase=${tag}"])
    assert line is not None and line.startswith(
        "Invalid config: fault.phase=${tag}: does nothing without fault.kind"
    )
    resolved = idle_key_problem(["fault.kind=${oc.decode:none}", "fault.rank=1"])
    assert resolved is not None and resolved.startswith("Invalid config: fault.rank=1: does nothing without")
    assert "fault.kind=raise" in resolved and "in place of fault.kind=${oc.decode:none}" in resolved
    assert idle_key_problem(["fault.kind=${tag}", "fault.rank=0"]) == (
        "Invalid config: fault.kind=${tag}: an interpolation, which only the job resolves, in fault.kind, "
        "which decides before the run whether fault.rank does anything. Fix: write the value itself, e.g. "
        "fault.kind=raise, or drop fault.rank."
    )
    assert (
        idle_key_problem(["fault.kind=${tag}"]) is None
    )  # no key it decides: the job resolves and checks it


def test_a_value_refused_by_itself_is_left_to_its_own_line_so_the_fix_is_never_refused_again() -> None:
    """``search.seq_len_multiple=0`` had been told "write search.model=largest search.seq_len_multiple=0",
    a line refused in turn (below its bound): its own bound's line comes instead."""
    assert idle_key_problem(["search.seq_len_multiple=0"]) is None
    from run import refusal

    line = refusal(["search.seq_len_multiple=0"])
    assert line is not None and line.startswith(
        "Invalid config: search.seq_len_multiple=0: must be a positive number of tokens. Fix: "
    )


@pytest.mark.parametrize(
    ("grow", "key", "other"),
    [
        ("", "search.min_seq_len=4096", "search.grow=seq_len"),
        ("", "search.max_seq_len=1024", "search.grow=seq_len"),
        ("", "search.seq_len_multiple=1024", "search.grow=seq_len"),
        ("search.grow=n_layer", "search.min_seq_len=4096", "search.grow=seq_len"),
        ("search.grow=seq_len", "search.min_n_layer=7", "search.grow=n_layer"),
        ("search.grow=seq_len", "search.max_n_layer=8", "search.grow=n_layer"),
    ],
)
def test_a_search_key_of_the_axis_that_does_not_grow_is_refused(grow: str, key: str, other: str) -> None:
    """Session 35 (D2): ``search.model=largest search.min_seq_len=4096 search.max_seq_len=1024`` (min over
    max even) passed and was ignored: ``search.grow=n_layer``, the default, grew the blocks; and beside
    ``search.grow=seq_len`` ``search.min_n_layer=7`` passed while ``search.max_n_layer=0`` was refused.
    Every key of the axis that does not grow is refused in one line naming the key and the fix; the
    key with its axis passes, and a sweep over both axes passes."""
    line = idle_key_problem([*CPU, "search.model=largest", *([grow] if grow else []), key])
    assert line is not None and "\n" not in line, line
    assert line.startswith(f"Invalid config: {key}: does nothing without search.grow: "), line
    assert f"Fix: write {other} {key}" in line and line.endswith(f"or drop {key.partition('=')[0]}."), line
    assert idle_key_problem([*CPU, "search.model=largest", other, key]) is None
    assert idle_key_problem(["-m", *CPU, "search.model=largest", "search.grow=n_layer,seq_len", key]) is None


def test_a_seq_len_key_without_a_search_names_both_keys_it_needs() -> None:
    """``search.min_seq_len`` alone needs ``search.model=largest`` and ``search.grow=seq_len``: the fix
    writes both, so that it is not refused in turn."""
    line = idle_key_problem([*CPU, "search.min_seq_len=2048"])
    assert line is not None and line.startswith(
        "Invalid config: search.min_seq_len=2048: does nothing without search.model: "
    ), line
    assert "Fix: write search.model=largest search.grow=seq_len search.min_seq_len=2048, or drop" in line, (
        line
    )
    assert (
        idle_key_problem([*CPU, "search.model=largest", "search.grow=seq_len", "search.min_seq_len=2048"])
        is None
    )
