"""Every refusal's fix runs as written (session 25): for a table of bad command lines, the fix the refusal
prints is taken out of its line (:func:`fix_lines`), applied to the command line as a user copies it
(:func:`applied`) and checked again in-process: before Hydra (``run.py``'s :func:`refusal`) and, where the
first refusal was the job's, composed with Hydra and planned as the job plans it, then placed on this
machine as the launch places it (:func:`unit.test_key_needs._runs`'s steps). No fix may meet a second
refusal; where it cannot run here at all (``nnodes=2`` locally), the first line names that choice.

The cases of the trial before it: a look-alike in a key that needs another (``fault.rаnk=1``) or in a
typed value (``plan_clusters=[Н100:8]``, ``repeats=２``), ``nnodes=2 nproc=2``, ``fault.rank=-1``, a
degree on one rank (``parallel.cp=2``) or one that does not divide the model's experts
(``parallel.ep=3``), and ``-m hydra/sweeper=tune --cfg job``, whose two fixes sent each other back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flopsweep.key_needs import MOE_EXAMPLE_EXPERTS, degree_line
from run import refusal
from unit.test_key_needs import CPU, _planned

FLAGS_WITH_VALUE = {"--cfg", "-c", "--info", "-i", "--config-name", "-cn"}


def _tokens(text: str) -> list[str]:
    """The arguments of a fix's line, without its notes (``(...)``) and what it replaces."""
    text = re.sub(r" \([^()]*(?:\([^()]*\)[^()]*)*\)", "", text).split(" in place of ")[0]
    return text.strip().rstrip(".?").split()


def _flags_first(args: list[str]) -> list[str]:
    """``args`` with Hydra's flags (and a flag's value) before the overrides, as Hydra reads one run;
    ``--info`` last (it takes an optional value, which an override after it would be read as)."""
    if "--info" in args or "-i" in args:
        return [*_flags_first([a for a in args if a not in ("--info", "-i")]), "--info"]
    flags, rest, i = [], [], 0
    while i < len(args):
        if args[i].startswith("-") and "=" not in args[i]:
            takes = args[i] in FLAGS_WITH_VALUE and i + 1 < len(args) and "=" not in args[i + 1]
            flags += args[i : i + 1 + takes]
            i += 1 + takes
        else:
            rest.append(args[i])
            i += 1
    return [*flags, *rest]


def applied(args: list[str], refused: str, fix: list[str]) -> list[str]:
    """``args`` with ``fix`` written in place of the ``refused`` override: each key the fix sets replaces
    the command line's value of it, a flag is added once, the flags first."""
    keys = {f.partition("=")[0].lstrip("+") for f in fix if "=" in f}
    kept = [a for a in args if a != refused and not ("=" in a and a.partition("=")[0].lstrip("+") in keys)]
    return _flags_first([*kept, *(f for f in fix if f not in kept)])


def fix_lines(line: str, args: list[str]) -> list[list[str]]:
    """Each command line a refusal's fix leads to, as a user copies it: a whole line (``did you mean
    flopsweep ...?``, ``Fix: flopsweep ... (print the config)``), the overrides of a "did you mean" or of
    ``write ...`` in place of the refused override, ``add -m``, and each ``set KEY=VALUE, or LINE``."""
    refused = line.removeprefix("Invalid config: ").split(": ")[0]
    refused = next((a for a in args if a == refused or a.lstrip("+") == refused), refused)
    fix = line.split("Fix: ", 1)[1]
    if m := re.match(r"did you mean flopsweep (.+?)\?(?: \(|$)", fix):
        return [_flags_first(_tokens(m.group(1)))]
    if m := re.match(r"did you mean (.+?)\?(?: |$)", fix):
        return [applied(args, refused, _tokens(m.group(1)))]
    if m := re.match(r"write (.+?)(?: \(then: .*\))?, or drop ", fix):
        return [applied(args, refused, _tokens(m.group(1).split(" (or ")[0]))]
    if m := re.match(r"one value prints one job's config: flopsweep (.+?)(?:, or, |\.$)", fix):
        return [_flags_first(_tokens(m.group(1)))]
    if (m := re.match(r"drop ([\w./]+)=?:", fix)) and m.group(1) == refused.partition("=")[0].lstrip("+~"):
        return [[a for a in args if a != refused]]  # "drop repeat=: the sweeper sets it from repeats="
    if fix.startswith(
        "add -m"
    ):  # "add -m and the pool's devices (flopsweep -m X hydra.launcher.slots=[0,1] ...)"
        added = re.match(r"add -m and [^(]*\(flopsweep -m (.+?) \.\.\.\)", fix)
        extra = [t for t in (_tokens(added.group(1)) if added else []) if t not in args]
        return [_flags_first(["-m", *args, *extra])]
    if fix.startswith("flopsweep "):
        return [_tokens(alt.removeprefix("flopsweep ")) for alt in fix.split(", or flopsweep ")]
    out = []
    for alt in re.split(r", or (?:one of \[[\d, ]+\] on a world size it divides: )?", fix.rstrip(".")):
        out.append(applied(args, refused, _tokens(alt.removeprefix("set "))))
    return out


def _overrides(args: list[str]) -> list[str]:
    return [a for a in args if "=" in a and not a.startswith("-")]


def _job_refusal(hydra_compose, args: list[str], tmp_path: Path) -> str | None:
    """The job's refusal of ``args`` (composed, planned, placed here as the launch places it), or None."""
    from flopsweep.config import ConfigError
    from flopsweep.plan import Environment, plan

    if any(a in ("--cfg", "-c", "--info", "-i") for a in args):
        return None  # it prints, and runs no job
    over = _overrides(args)
    row = _planned(hydra_compose, over, tmp_path)
    if row["status"] != "ok":
        return row["reason"]
    if "plan=true" in over:
        return None  # plans it, places nothing here
    try:
        plan(hydra_compose([*CPU, *over]), Environment.detect())
    except ConfigError as exc:
        return str(exc)
    return None


def settled(hydra_compose, args: list[str], tmp_path: Path) -> str | None:
    """The first refusal of ``args``: before Hydra, else the job's."""
    return refusal([*CPU, *args]) or _job_refusal(hydra_compose, args, tmp_path)


BEFORE_HYDRA = [
    "fault.rаnk=1",  # Cyrillic а in a key that needs fault.kind and two ranks
    "fault.kind=raise fault.rаnk=1",
    "fault.rаnk=0",
    "plan_clusters=[Н100:8]",  # Cyrillic Н in a typed value of a key that needs plan=true
    "repeats=２",  # a fullwidth digit, in a key that needs -m
    "fault.rank=１",  # in a typed value of a key that needs fault.kind and two ranks
    "parallel.cp=２",  # a degree: the backend and the ranks it splits
    "plan=true plan_clusters=[Н100:8]",
    "hydra/launcher=pooℓ",
    "repeats=２ plan=true",  # the corrected line's own conflict (a plan's rounds) is named in the first
    "hydra/sweeper=tunе",  # a look-alike in a group option that needs -m
    "model=llama-tinу steps.mеasure=3",
    "nproc=2",
    "nnodes=2 nproc=2 plan=true",
    "fault.rank=-1",
    "fault.rank=-2 fault.kind=none",
    "fault.rank=1",
    "-m hydra/sweeper=tune backend=ddp,fsdp --cfg job",  # its two fixes sent each other back (an axis: #323)
    "-m repeats=3 --cfg job",
    "repeats=3",
    "model=gpt-tiny,llama-tiny --cfg job",  # "add -m" was refused beside --cfg in turn
    "tag=a,b --info",
    "parallel.e=2 nnodes=2 plan=true",
    "hydra/launcher=pool",  # a launcher without -m: never started
    "parallel.e=3",  # a typo of a degree that does not divide the MoE example's experts
    "-m hydra/sweeper=tune plan_clusters=[H100:8]",  # plan=true, which the tuner refuses: named in the first
    "-m hydra/sweeper=tune plan_formt=csv",  # a typo's did-you-mean adds plan=true: named likewise
    "fault.kind=oomm",  # a name outside its key's set (session 26: refused only in the job)
    "fault.phase=mesure",  # its did-you-mean needs fault.kind: named in the first line
    "model=llama-tiny model.n_kv_head=0",  # a family's size below 1
    "backend=deepspeed backend.zero_stage=4",  # a ZeRO stage outside 1..3 (session 26: only in the job)
    "backend=zero2 backend.zero_stage=0",
    "parallel.dp_shard=0",  # positive or -1 (session 26: only in the job)
    "parallel.dp_shard=-2",
    "repeat=-1",  # its fix drops it
    "batch=auto batch.max_micro_batch_size=0",
    "parallel.pp_schedule=1f1b",  # a case-only difference: did you mean 1F1B (session 26: no suggestion)
    "precision=BF16",  # a group's option, in case alone
]


@pytest.mark.parametrize("bad", BEFORE_HYDRA)
def test_a_refusal_before_hydra_names_a_fix_that_runs(hydra_compose, tmp_path: Path, bad: str) -> None:
    args = _flags_first([*CPU, *bad.split()])
    line = refusal(args)
    assert line is not None and line.startswith("Invalid config: ") and "\n" not in line, line
    fixes = fix_lines(line, args)
    assert fixes, line
    for fixed in fixes:
        again = refusal(fixed)
        if again is not None:  # a choice of the command line's own, named in the first line
            assert f"(then: {again.removeprefix('Invalid config: ').removesuffix('.')}" in line, (line, again)
            continue
        if not fixed[0].startswith("-") and "plan_clusters" not in " ".join(fixed):  # a run's own checks too
            again = _job_refusal(hydra_compose, fixed, tmp_path)
            assert again is None, (line, fixed, again)


IN_THE_JOB = [
    "parallel.cp=2",  # its fix said "or backend=fsdp", refused on one rank in turn
    "parallel.tp=2",
    "backend=ddp nproc_per_node=4 parallel.cp=2",
    "parallel.ep=3",  # a dense model: the MoE example, a degree its 8 experts split
    "model=hf model.config=olmoe-tiny parallel.ep=3",
    "model=hf model.config=olmoe-tiny backend=fsdp nproc_per_node=3 parallel.ep=3",
    "model=hf model.config=olmoe-tiny backend=fsdp nproc_per_node=2 parallel.ep=3",
    "fault.kind=raise fault.rank=-1",  # "set fault.rank to 0..0" was no line
    "fault.kind=raise fault.rank=3",  # the rank, or the ranks that hold it
]


@pytest.mark.parametrize("bad", IN_THE_JOB)
def test_a_jobs_refusal_names_a_fix_that_runs_on_this_machine(
    hydra_compose, tmp_path: Path, bad: str
) -> None:
    """The job's own refusal (the rules, the layout), each alternative of its fix composed, planned and
    placed here: each runs."""
    args = bad.split()
    assert refusal([*CPU, *args]) is None
    line = _job_refusal(hydra_compose, args, tmp_path)
    assert line is not None and line.startswith("Invalid config: ") and "\n" not in line, line
    fixes = fix_lines(line, args)
    assert 1 <= len(fixes) <= 2, line  # set the value that runs here, or the line that runs the one given
    for fixed in fixes:
        assert settled(hydra_compose, fixed, tmp_path) is None, (line, fixed)


def test_an_ep_fix_names_the_degrees_that_divide_the_models_experts(hydra_compose, tmp_path: Path) -> None:
    """``parallel.ep=3`` on an 8-expert model: the fix names 2, 4 and 8 and writes the nearest."""
    line = _job_refusal(hydra_compose, ["model=hf", "model.config=olmoe-tiny", "parallel.ep=3"], tmp_path)
    assert "parallel.ep=2 (parallel.ep=3 does not divide its 8 experts: 2, 4 or 8)" in line, line
    assert degree_line("pp", 3, {"backend": "fsdp", "nproc_per_node": "2"}, (1, "model.n_layer=1")) is None
    assert degree_line("ep", 6, {"model": "hf"}, (8, "its 8 experts")).startswith(
        "backend=fsdp nproc_per_node=4 parallel.ep=4"
    )
    assert degree_line("ep", 4, {"model": "gpt-tiny", "backend": "fsdp", "nproc_per_node": "4"}) == (
        "model=hf model.config=olmoe-tiny parallel.ep=4"
    )
    import json

    from flopsweep.models.hf_files import SHIPPED

    data = json.loads((SHIPPED / "olmoe-tiny.json").read_text())
    assert data["num_experts"] == MOE_EXAMPLE_EXPERTS


def test_several_nodes_here_are_named_with_the_choice_they_leave() -> None:
    """``nnodes=2 nproc=2``: no local line runs two nodes; the "did you mean" says so, naming the
    launcher (under ``-m``) and ``plan=true``, and with ``plan=true`` its line passes."""
    line = refusal([*CPU, "nnodes=2", "nproc=2"])
    assert "nnodes=2 of the command line: several nodes run under -m hydra/launcher=slurm" in line, line
    assert "plan=true plans them here" in line
    (fixed,) = fix_lines(line, [*CPU, "nnodes=2", "nproc=2"])
    assert refusal([*fixed, "plan=true"]) is None
    assert refusal(["nnodes=2", "hydra/launcher=slurm"]).endswith(
        "Fix: add -m (flopsweep -m hydra/launcher=slurm ...)."
    )


def test_a_look_alike_fix_is_the_whole_line_where_the_override_alone_is_refused() -> None:
    line = refusal([*CPU, "fault.rаnk=1"])
    assert line.endswith(
        "Fix: did you mean flopsweep device=cpu backend=ddp fault.kind=raise nproc_per_node=2 fault.rank=1? "
        "(fault.rank=1 alone is refused: it needs backend=ddp fault.kind=raise nproc_per_node=2)"
    ), line
    assert refusal(["repeats=２"]).endswith(
        "Fix: did you mean flopsweep -m repeats=2? (repeats=2 alone is refused: it needs -m)"
    )
    assert refusal(["steps.mеasure=3"]).endswith("Fix: did you mean steps.measure=3?")  # alone it runs
    tag = refusal(["tag=ｖ１"])  # a free string keeps its characters: quoted, not folded
    assert "quote the value" in tag and "did you mean" not in tag, tag


DEGREES = [
    f"{backend}parallel.{degree}={value}"
    for degree in ("tp", "pp", "cp", "dp_replicate", "ep")
    for value in (2, 3)
    for backend in ("", "backend=ddp nproc_per_node=2 ")
]


@pytest.mark.parametrize("bad", DEGREES)
def test_every_degree_on_a_backend_that_does_not_build_it_names_a_line_that_runs(
    hydra_compose, tmp_path: Path, bad: str
) -> None:
    """The class of ``parallel.cp=2``: each degree, at a value that divides and one that may not, on one
    rank and on DDP: each fix of the job's refusal, then of the next one where the first leads to a
    value the model refuses (heads, layers), runs within two steps."""
    args = bad.split()
    line = _job_refusal(hydra_compose, args, tmp_path)
    assert line is not None and f"parallel.{bad.split('parallel.')[1].split('=')[0]}" in line, line
    for fixed in fix_lines(line, args):
        again = settled(hydra_compose, fixed, tmp_path)
        assert again is None, (line, fixed, again)
