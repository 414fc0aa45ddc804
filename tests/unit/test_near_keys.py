"""The "did you mean" of an unknown key names only fixes that the same command line then takes
(:mod:`flopsweep.near_keys`): keys of the options it picks, a group for a top-level typo, a key inside a
section rather than the section, never ``+KEY``; another option's key only with the option that adds it.
And a whole number written as a float beyond its key's bound is told the bound, not the rewritten number."""

from __future__ import annotations

import re

import pytest

from flopsweep.limits import MAX_BY_KEY
from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS
from flopsweep.overrides import known_keys, option_files, option_kind, type_problem, unknown_key_problem
from run import foreign_option_keys


def _line(overrides: list[str]) -> str:
    line = type_problem(overrides)
    assert line is not None and line.startswith("Invalid config: ") and "\n" not in line, line
    assert line.endswith("."), line
    return line


def _alternatives(text: str) -> list[str]:
    """The keys of ``A or B`` where each may be a whole line (``backend=ddp nproc_per_node=2 (...)``): the
    last override's key of each, before any ``in place of`` or parenthesis."""
    keys = []
    for part in re.split(r" or (?![^(]*\))", text):
        words = part.split(" (")[0].split(" in place of ")[0].split()
        keys.append(words[-1].partition("=")[0] if words else part)
    return keys


def _named(line: str) -> tuple[list[str], str | None]:
    """The keys a line suggests (``did you mean A or B?``, ``; or C``) and the option it says to pick."""
    mean = re.search(r"did you mean (.+?)\?(?: |$)", line)
    names = _alternatives(mean.group(1)) if mean else []
    if also := re.search(r"; or (.+?)\. docs/", line):
        names += _alternatives(also.group(1))
    pick = re.search(r"pick (\w+=[\w/.-]+)", line)
    return names, pick.group(1) if pick else None


def _extra(line: str) -> list[str]:
    """The overrides the first suggestion writes before its key (``backend=ddp`` of
    ``did you mean backend=ddp nproc_per_node=2 (...)?``)."""
    mean = re.search(r"did you mean (.+?)\?(?: |$)", line)
    first = re.split(r" or (?![^(]*\))", mean.group(1))[0].split(" (")[0].split(" in place of ")[0].split()
    return first[:-1]


def _accepted(choice: list[str], key: str) -> bool:
    """Whether the pre-launch checks take ``key`` with the options ``choice`` picks: a known key that is
    no section (a group name is a choice, not a key), of an option picked."""
    sections = {k.rpartition(".")[0] for k in known_keys() if "." in k}
    if key in GROUP_BASES:
        return True
    return (
        unknown_key_problem(key) is None
        and key not in sections
        and foreign_option_keys([*choice, f"{key}=1"]) is None
    )


def _one_option_per_kind(group: str) -> list[str]:
    seen: dict[str, str] = {}
    for option in option_files(group):
        seen.setdefault(option_kind(group, option), option)
    return sorted(seen.values())


def _group_cases() -> list[tuple[str, str]]:
    return [
        (group, option)
        for group in sorted(GROUP_BASES)
        if OPTION_SCHEMAS.get(group)
        for option in _one_option_per_kind(group)
    ]


@pytest.mark.parametrize(("group", "option"), _group_cases())
def test_a_typo_of_any_group_key_suggests_only_what_the_picked_option_takes(group: str, option: str) -> None:
    """Each key of every option of ``group`` typed with its last letter doubled, on each kind of option:
    every bare suggestion is a key the picked option takes; another option's key comes with the option
    that takes it."""
    keys = sorted(k for k in known_keys() if k.startswith(f"{group}.") and k.count(".") == 1)
    choice = [f"{group}={option}"]
    assert keys
    foreign_seen = 0
    for key in keys:
        names, pick = _named(_line([*choice, f"{key}{key[-1]}=1"]))
        assert names, key
        for name in names[1:] if pick else names:
            assert _accepted(choice, name), (choice, key, name)
        if pick:  # the nearest is another option's key: picking that option takes it
            foreign_seen += 1
            assert not _accepted(choice, names[0]), (choice, key)
            assert _accepted([pick], names[0]), (pick, names[0])
    own = {k for k in keys if _accepted(choice, k)}
    assert foreign_seen == len([k for k in keys if k not in own])  # each foreign key's typo names its option


@pytest.mark.parametrize(
    ("overrides", "first", "pick", "extra"),
    [
        (["backend.zero_stag=2"], "backend.zero_stage", "backend=deepspeed", []),
        (["attention.window_block=2"], "attention.window_blocks", "attention=blocksparse", []),
        (["batch.micro_batch_sze=4"], "batch.micro_batch_size", None, []),
        (["parallel.tpp=2"], "parallel.pp", None, ["backend=fsdp", "nproc_per_node=2"]),
        (["precison=bf16"], "precision", None, []),
        (["fault.kil=oom"], "fault.kind", None, []),
        (["optim.lrr=1"], "optim.lr", None, []),
        (["nproc=2"], "nproc_per_node", None, ["backend=ddp"]),
        (["nproc=2", "backend=fsdp"], "nproc_per_node", None, []),
        (["zero_stage=3"], "backend.zero_stage", "backend=deepspeed", []),
        (["backend=zero3", "backend.zero_stag=2"], "backend.zero_stage", None, []),
    ],
)
def test_the_trials_typos_suggest_a_fix_that_is_taken(
    overrides: list[str], first: str, pick: str | None, extra: list[str]
) -> None:
    """The nearest key, and where its value needs another option on the picked ones (``nproc_per_node=2``
    on ``backend=single``), the whole line to write (test_key_needs.py plans each such line)."""
    line = _line(overrides)
    names, picked = _named(line)
    assert names[0] == first and picked == pick, line
    assert _extra(line) == extra, line
    choice = [o for o in overrides if "." not in o.partition("=")[0] and o.partition("=")[0] in GROUP_BASES]
    assert _accepted([pick] if pick else choice, first), line
    assert "parallel.ep" not in line and "batch.max_micro_batch_size" not in line and "space." not in line


@pytest.mark.parametrize("name", sorted(GROUP_BASES))
def test_a_typo_of_a_group_names_the_group_first(name: str) -> None:
    typo = name[:-2] + name[-1] + name[-2]  # the last two letters swapped
    names, _ = _named(_line([f"{typo}=x"]))
    assert names[0] == name


@pytest.mark.parametrize(
    "overrides", [["nproc=2"], ["qqqq=1"], ["fault.qqqq=1"], ["backend.qqqq=1"], ["modle.n_layer=2"]]
)
def test_no_fix_adds_a_key_with_plus(overrides: list[str]) -> None:
    line = _line(overrides)
    assert "+" not in line, line


def test_a_section_is_never_suggested_for_a_key_inside_it() -> None:
    sections = {k.rpartition(".")[0] for k in known_keys() if "." in k}
    for section in sorted(s for s in sections if "." not in s and s not in GROUP_BASES):
        children = sorted(k for k in known_keys() if k.rpartition(".")[0] == section)
        leaf = children[0].rpartition(".")[2]
        names, _ = _named(_line([f"{section}.{leaf}{leaf[-1]}=1"]))
        assert section not in names and names[0] == children[0], (section, names)


@pytest.mark.parametrize(
    "key", sorted(k for k, v in MAX_BY_KEY.items() if float(v).is_integer() and k in known_keys())
)
def test_a_float_whole_number_beyond_the_bound_names_the_bound(key: str) -> None:
    limit = int(MAX_BY_KEY[key])
    line = type_problem([f"{key}={float(limit * 10)}"])
    if line is None or "whole number written as a float" not in line:
        return  # a float key: 1e7 is its value
    assert f"beyond the bound of {limit}" in line and str(limit * 10) not in line.partition("Fix:")[2], line
    within = type_problem([f"{key}={float(limit)}"])
    fix = within.partition("Fix: write it without a point or exponent: ")[2] if within else ""
    assert re.search(rf"(^| ){re.escape(key)}={limit}( |\.$)", fix), within  # with what it needs (nnodes)
    assert type_problem([f"{key}={limit}"]) is None


def test_a_hydra_plugin_keys_typo_names_the_option_that_takes_the_near_key() -> None:
    """``hydra.launcher.timeout_mn`` on the basic launcher (which takes no keys): the near key is named
    with the launcher that takes it, and picking that launcher takes the key."""
    from flopsweep.hydra_keys import hydra_key_problem

    line = hydra_key_problem(["hydra.launcher.timeout_mn=3"])
    assert line is not None and "\n" not in line, line
    pick = re.search(r"did you mean hydra\.launcher\.(\w+)\? .*pick (hydra/launcher=\w+) to set it\.$", line)
    assert pick is not None, line
    assert hydra_key_problem(["-m", pick.group(2), f"hydra.launcher.{pick.group(1)}=3"]) is None
    bare = hydra_key_problem(["hydra.launcher.qqqq=3"])
    assert bare is not None and bare.endswith("takes no keys: drop the override."), bare


@pytest.mark.parametrize(
    "key", ["model.seq_len", "batch.micro_batch_size", "model.n_layer", "steps.measure", "steps.warmup"]
)
def test_a_value_beyond_its_bound_echoes_what_was_typed_and_its_example_passes(
    key: str, hydra_compose, tmp_path
) -> None:
    """Trial 24: ``model.seq_len=1e12`` was echoed as ``1000000000000.0``, and the bound it named was then
    refused for host memory. The line names the value as typed, a float or a whole number beyond the
    bound (the job's check_bounds, now before Hydra); its example (the option's value or the default)
    passes and plans; a memory key's fix says which check a large value meets next."""
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.key_needs import MEMORY_KEYS

    limit = int(MAX_BY_KEY[key])
    for typed in ("1e12", str(limit + 1), f"{limit * 10}.0"):
        line = _line([f"{key}={typed}"])
        assert line.startswith(f"Invalid config: {key}={typed}: is a whole number"), line
        assert f"beyond the bound of {limit}" in line and f"at most {limit}" in line, line
        example = re.search(rf"e\.g\. ({re.escape(key)}=\d+)", line).group(1)
        assert type_problem([example]) is None
        cfg = hydra_compose(["device=cpu", example])
        row = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=["device=cpu", example], job_num=None))[
            "plan"
        ]
        assert row["status"] == "ok" and row["fits"] is True, row
        assert ("the free host memory on device=cpu" in line) == (key in MEMORY_KEYS), line
    assert type_problem([f"{key}={limit}"]) is None


def test_a_rewritten_whole_number_is_written_with_what_it_needs(hydra_compose, tmp_path) -> None:
    """``parallel.tp=2.0``'s fix ``parallel.tp=2`` was refused in turn on ``backend=single``: the rewritten
    value comes in the line that runs (``key_needs.needed``), in place of a picked option it replaces,
    and with the check no override passes (``nnodes``: Slurm's); an optional key's example beyond the
    bound is its default, null (``batch.global_batch_size=5`` did not divide the micro batch)."""
    from flopsweep.job import JobInfo, plan_job

    line = _line(["parallel.tp=2.0"])
    assert line.endswith(
        "Fix: write it without a point or exponent: backend=fsdp nproc_per_node=2 parallel.tp=2."
    ), line
    fixed = ["device=cpu", "backend=fsdp", "nproc_per_node=2", "parallel.tp=2"]
    assert type_problem(fixed) is None
    row = plan_job(hydra_compose(fixed), JobInfo(job_dir=tmp_path, overrides=fixed, job_num=None))["plan"]
    assert row["status"] == "ok", row
    line = _line(["backend=ddp", "parallel.tp=2.0"])
    assert "backend=fsdp nproc_per_node=2 parallel.tp=2 in place of backend=ddp." in line, line
    assert _line(["backend=fsdp", "nproc_per_node=2", "parallel.tp=2.0"]).endswith("exponent: parallel.tp=2.")
    line = _line(["nnodes=2.0"])
    assert "backend=ddp nnodes=2 (several nodes run under -m hydra/launcher=slurm" in line, line
    line = _line(["batch.global_batch_size=1e12"])
    assert line.endswith("e.g. batch.global_batch_size=null (its default)."), line
    assert type_problem(["batch.global_batch_size=null"]) is None


def test_a_rank_count_written_as_a_float_or_beyond_its_bound_is_refused_before_hydra(hydra_compose) -> None:
    """``nproc_per_node`` is text (``auto`` or a count): ``2.0`` and ``99999999`` were the job's lines,
    after Hydra made a run folder. Now before Hydra, the fix a count with the backend it needs, which
    composes and validates; text and counts below 1 stay the job's (its line names them)."""
    from flopsweep.checks import MAX_NPROC_PER_NODE, validate

    line = _line(["nproc_per_node=2.0"])
    assert line.endswith("Fix: write it without a point or exponent: backend=ddp nproc_per_node=2."), line
    for typed in ("99999999", "1e12"):
        line = _line([f"nproc_per_node={typed}"])
        assert line.startswith(
            f"Invalid config: nproc_per_node={typed}: is beyond the bound of {MAX_NPROC_PER_NODE}"
        )
        assert line.endswith(
            "Fix: set nproc_per_node=auto, or a count of ranks: backend=ddp nproc_per_node=2."
        ), line
    validate(hydra_compose(["device=cpu", "backend=ddp", "nproc_per_node=2"]))
    assert _line(["backend=fsdp", "nproc_per_node=4.0"]).endswith("exponent: nproc_per_node=4.")
    for left in ("two", "0", "2.5", "auto", "2"):
        assert type_problem([f"nproc_per_node={left}"]) is None, left


def _float_keys() -> dict[str, list[str]]:
    """Every float key of the schema, with the option pick it needs (``model=llama-tiny`` for
    ``model.rope_theta``): :class:`flopsweep.config.RunConfig`'s and each group option's."""
    from omegaconf import FloatNode, OmegaConf

    from flopsweep.config import RunConfig

    found: dict[str, list[str]] = {}

    def walk(node, prefix: str, pick: list[str]) -> None:
        for name in node:
            child = node._get_node(name)
            if isinstance(child, FloatNode):
                found.setdefault(f"{prefix}{name}", pick)
            elif OmegaConf.is_dict(child) and not child._is_none() and not child._is_missing():
                if f"{prefix}{name}" not in GROUP_BASES:  # a group's keys: under its options below
                    walk(child, f"{prefix}{name}.", pick)

    walk(OmegaConf.structured(RunConfig), "", [])
    for group, base in GROUP_BASES.items():
        for option in option_files(group):
            schema = OPTION_SCHEMAS.get(group, {}).get(option_kind(group, option), base)
            walk(OmegaConf.structured(schema), f"{group}.", [f"{group}={option}"])
    return found


_FLOAT_KEYS = _float_keys()


def test_the_float_keys_include_those_the_trial_named() -> None:
    """The walk below is over the schema, not a list: the trial's keys and an option's are in it."""
    for key in (
        "cost.usd_per_gpu_hour",
        "budget.tokens",
        "optim.lr",
        "predict.layer_probe_settle",
        "timeout_s",
    ):
        assert _FLOAT_KEYS[key] == [], key
    assert "model.rope_theta" in _FLOAT_KEYS and len(_FLOAT_KEYS) >= 20, sorted(_FLOAT_KEYS)


@pytest.mark.parametrize("key", sorted(_FLOAT_KEYS))
def test_a_float_beyond_its_bound_is_refused_before_hydra_as_typed_with_a_fix_that_passes(
    key: str, hydra_compose
) -> None:
    """Trial (row 183's follow-up): ``cost.usd_per_gpu_hour=1e12`` was echoed ``1000000000000.0`` and
    refused only in the job, which left a run folder with an invalid metrics.json. Every float key
    beyond its bound (``MAX_BY_KEY``, else ``MAX_FLOAT``: the table ``checks.check_bounds`` reads) is
    refused in one line before Hydra, the value as typed, positive and negative, written as a float or a
    whole number; the fix's example passes this check and the job's ``validate``."""
    from flopsweep.checks import validate
    from flopsweep.config import ConfigError
    from flopsweep.limits import MAX_FLOAT

    pick = _FLOAT_KEYS[key]
    limit = MAX_BY_KEY.get(key, MAX_FLOAT)
    for typed in (f"{limit * 10:g}", "1e99", "-1e99", str(int(limit) * 10), "inf"):
        line = _line([*pick, f"{key}={typed}"])
        assert line.startswith(f"Invalid config: {key}={typed}: "), line
        example = re.search(rf"({re.escape(key)}=\S+?)[,.]?(?: \(|, or| *$)", line.split(" Fix: ")[1])
        assert example, line
        fixed = [*pick, example.group(1)]
        assert type_problem(fixed) is None, (line, fixed)
        try:
            validate(hydra_compose(["device=cpu", *fixed]))
        except ConfigError as e:  # activation_checkpointing=memory_budget needs compile=true: the pick's
            assert e.key != key, (line, str(e))
    at_bound = type_problem([*pick, f"{key}={limit:.0f}.0"]) or ""  # a share's range may still refuse it
    assert "beyond the bound" not in at_bound, at_bound


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("cost.usd_per_gpu_hour=-1", "must be >= 0 US dollars"),
        ("budget.tokens=0.0", "must be a whole number of tokens >= 1"),
        ("optim.lr=-1e-3", "is out of range for AdamW"),
        ("optim.beta2=1.5", "is out of range for AdamW"),
        ("predict.overlap=1.5", "must be a share in [0, 1]"),
        ("predict.layer_probe_settle=1", "must be a share in [0, 1)"),
        ("predict.layer_probe_max_spread=0.5", "must be at least 1"),
        ("predict.compute_scale=-2", "must be a positive number"),
    ],
)
def test_a_number_out_of_its_range_is_refused_before_hydra_with_the_jobs_reason(
    override: str, problem: str, hydra_compose
) -> None:
    """The ranges that the value alone decides (``checks.number_problem``: the job's own section checks,
    run on the defaults) are refused before Hydra too, each value of a sweep; the fix passes."""
    from flopsweep.checks import validate

    key, _, typed = override.partition("=")
    fine = "1" if key == "budget.tokens" else "0.5"  # a token budget is whole (session 37)
    for overrides in ([override], ["-m", f"{key}={fine},{typed}"]):
        line = _line(overrides)
        assert line.startswith(f"Invalid config: {override}: {problem}"), line
    example = re.search(rf"({re.escape(key)}=[^,\s]+?)[,.]?(?: |$)", line.split(" Fix: ")[1]).group(1)
    assert type_problem([example]) is None, line
    validate(hydra_compose(["device=cpu", example]))


@pytest.mark.parametrize("key", ["predict.cpu_probe", "compile", "predict.measured"])
def test_a_true_or_false_key_takes_no_whole_number_but_0_and_1(key: str) -> None:
    """OmegaConf converts any whole number to a bool (``compile=2`` ran compiled); 0 and 1 stay."""
    for value in (2, -1, 100):
        line = type_problem([f"{key}={value}"])
        assert line is not None and f"{key}={value}" in line and "is not true or false" in line, line
        assert f"Fix: set {key} to true or false" in line
    for value in ("0", "1", "true", "false"):
        assert type_problem([f"{key}={value}"]) is None
