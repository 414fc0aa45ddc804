"""Issue #40, class 12 and the new-user trial: command lines whose answer was a traceback, a message
that did not say what to do, a wrong count, or a silent choice.

- a config group given ``null`` or a list (``backend=null``: Hydra's ValueError traceback);
- ``hydra/sweeper=optuna_objective`` without the ``optuna`` extra (Hydra: "Could not load
  'hydra/sweeper/optuna'"), and an Optuna study's progress counted as its search space (``job 1/32``
  for 4 trials);
- a ready-made sweep with another option of a group it sets knobs of (``+sweep=hf-1gpu batch=fixed``
  did not compose);
- ``python -m analysis --baseline`` with several values (a speedup over an average of set-ups) or a
  key given twice (the last won in silence).

All in this process (the refusals are the functions ``run.py`` calls before Hydra starts) but one
``run.py`` start per refusal kind, marked slow.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from flopsweep.callbacks import sweep_size
from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS
from flopsweep.overrides import (
    CONF,
    group_choice_problem,
    option_kind,
    preset_option_keys,
    sweeper_extra_problem,
    type_problem,
)
from flopsweep.plan import option_names

SWEEP_DIR = Path(CONF) / "sweep"


PRESETS = sorted(p.stem for p in SWEEP_DIR.glob("*.yaml"))


GROUPS = [*GROUP_BASES, "hydra/sweeper"]


def _one_line(line: str | None) -> str:
    assert line is not None
    assert line.startswith("Invalid config: ") and "\n" not in line and line.endswith("."), line
    return line


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("value", ["null", "[a,b]", "{first},null", "{first},[a,b]"])
def test_a_group_given_null_or_a_list_is_refused_in_one_line(hydra_compose, group: str, value: str) -> None:
    """Every group, a sweep's values too; the fix's example is an option that composes."""
    options = sorted(p.stem for p in (Path(CONF) / group).glob("*.yaml"))
    override = f"{group}={value.format(first=options[0])}"
    line = _one_line(group_choice_problem(["-m", override]))
    assert line.startswith(f"Invalid config: {override}: ") and f"no option of {group}" in line
    example = line.split(", e.g. ", 1)[1].split()[0].rstrip(".")
    assert example.partition("=")[2] in options
    if not group.startswith("hydra/"):
        assert hydra_compose([example]) is not None


@pytest.mark.parametrize(
    "override", ["backend=fsdp", "~backend", "-m", "backend=fsdp,ddp", "seed=null", "tag=[a]"]
)
def test_an_option_a_sweep_or_a_plain_key_is_no_group_problem(override: str) -> None:
    assert group_choice_problem([override]) is None


def test_the_optuna_sweeper_without_its_package_names_the_extra() -> None:
    """Refused, with the install command, exactly when hydra-optuna-sweeper cannot be found."""
    installed = importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is not None
    for sweeper in ("optuna_objective", "optuna"):
        line = sweeper_extra_problem(["-m", f"hydra/sweeper={sweeper}", "plan=true"])
        if installed:
            assert line is None
        else:
            assert "pip install -e '.[optuna]'" in _one_line(line) and "hydra-optuna-sweeper" in line
    assert sweeper_extra_problem(["-m", "hydra/sweeper=basic_batched"]) is None


def test_an_optuna_studys_progress_counts_its_trials() -> None:
    """``range(1,33)`` is what Optuna draws from; the study runs ``n_trials`` jobs (the basic sweeper,
    with no ``n_trials``, still runs every value)."""
    space = {"batch.micro_batch_size": "range(1,33)", "backend": "fsdp,ddp"}
    optuna = OmegaConf.create(
        {"hydra": {"sweeper": {"n_trials": 4, "n_jobs": 2, "params": space}, "overrides": {"task": []}}}
    )
    assert sweep_size(optuna) == 4
    basic = OmegaConf.create({"hydra": {"sweeper": {"params": space}, "overrides": {"task": []}}})
    assert sweep_size(basic) == 32 * 2


def _one_option_per_schema(group: str) -> list[str]:
    """One YAML option of ``group`` for each schema its options have (composition depends on it)."""
    seen: dict[type, str] = {}
    for name in option_names(group):
        schema = OPTION_SCHEMAS.get(group, {}).get(option_kind(group, name), GROUP_BASES[group])
        seen.setdefault(schema, name)
    return list(seen.values())


def _preset_cases() -> list[tuple[str, str]]:
    """``(preset, group=option)`` for each group a preset sets keys of (its body or its sweeper's
    params), with one option of each schema of that group."""
    cases = []
    for preset in PRESETS:
        node = OmegaConf.load(SWEEP_DIR / f"{preset}.yaml")
        params = OmegaConf.select(node, "hydra.sweeper.params") or {}
        groups = {g for g in GROUP_BASES if isinstance(node.get(g), DictConfig)}
        groups |= {str(k).partition(".")[0] for k in params if str(k).partition(".")[0] in GROUP_BASES}
        cases += [(preset, f"{g}={o}") for g in sorted(groups) for o in _one_option_per_schema(g)]
    return cases


PRESET_CASES = _preset_cases()


def _first_point(preset: str, choice: str) -> list[str]:
    """The overrides of the first job of ``+sweep=P choice``: the sweeper's params (their first value)
    that the command line does not set, as Hydra's basic sweeper gives them to each job."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    node = OmegaConf.load(SWEEP_DIR / f"{preset}.yaml")
    params = OmegaConf.select(node, "hydra.sweeper.params") or {}
    lines = [f"{k}={v}" for k, v in params.items() if str(k) != choice.partition("=")[0]]
    parsed = OverridesParser.create().parse_overrides(lines)
    return [
        f"{o.key_or_group}={next(iter(o.sweep_string_iterator())) if o.is_sweep_override() else o.value()}"
        for o in parsed
    ]


@pytest.mark.parametrize(("preset", "choice"), PRESET_CASES, ids=[f"{p}+{c}" for p, c in PRESET_CASES])
def test_a_preset_with_another_option_composes_or_is_refused_in_one_line(
    hydra_compose, preset: str, choice: str
) -> None:
    """``+sweep=P group=O``: its jobs compose (the sweep file, its params' first values, the command
    line) and ``run.py`` lets it through; or ``run.py`` refuses it in one line naming the first key of
    the sweep file that belongs to another option (Hydra would stop the sweep with "Key '...' not in
    '...Config'", at composition or at its first job)."""
    line = preset_option_keys(["-m", f"+sweep={preset}", choice])
    try:
        hydra_compose.config([f"+sweep={preset}", *_first_point(preset, choice), choice])
    except Exception as exc:  # noqa: BLE001 - Hydra's composition error, the class under test
        assert line is not None, (preset, choice, str(exc).splitlines()[:2])
        found = re.search(r"Key '([^']+)' not in|Could not override '[^'.]+\.([^'.]+)'", str(exc))
        assert found, str(exc)
        key = found.group(1) or found.group(2)
        group = choice.partition("=")[0]
        assert _one_line(line).startswith(f"Invalid config: +sweep={preset} {choice}: the sweep file sets ")
        assert f"{group}.{key}" in line, line
    else:
        assert line is None, line


def test_the_sweeps_with_a_micro_batch_cap_compose_with_batch_fixed_and_keep_their_caps(
    hydra_compose,
) -> None:
    """The caps the sweep files set before (records keep the same config) now live in ``batch=auto/maxN``
    options, which ``batch=fixed`` replaces whole."""
    caps = {"fp8": 32, "frontier-fsdp": 16, "frontier-zero3": 16, "hf-1gpu": 64, "llama": 32}
    for preset, cap in caps.items():
        auto = hydra_compose([f"+sweep={preset}"]).batch
        assert (auto.name, auto.max_micro_batch_size) == ("auto", cap)
        fixed = hydra_compose([f"+sweep={preset}", "batch=fixed"]).batch
        assert fixed.name == "fixed" and not hasattr(fixed, "max_micro_batch_size")
        assert fixed.micro_batch_size == auto.micro_batch_size  # the sweep's micro batch, fixed
    assert hydra_compose(["batch=auto/max16"]).batch.max_micro_batch_size == 16
    assert option_kind("batch", "auto/max16") == "auto"


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--baseline", "backend=fsdp,ddp"], "a baseline is one set-up, one value per key"),
        (["--baseline", "backend=fsdp", "--baseline", "backend=ddp"], "--baseline backend: given twice"),
        (["--filter", "backend=fsdp", "--filter", "backend=ddp"], "--filter backend: given twice"),
    ],
)
def test_a_baseline_of_several_values_is_refused_in_one_line(capsys, args: list[str], words: str) -> None:
    from analysis.__main__ import main

    with pytest.raises(SystemExit) as done:  # argparse's error: one line, exit 2
        main([str(FIXTURE), *args])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err, err


def test_a_baseline_of_one_value_per_key_still_compares(capsys) -> None:
    from analysis import compare, load
    from analysis.__main__ import main
    from analysis.query import AnalysisError

    assert (
        main([str(FIXTURE), "--baseline", "backend=fsdp", "--baseline", "precision=bf16", "--format", "csv"])
        == 0
    )
    assert "speedup" in capsys.readouterr().out.splitlines()[0]
    df = load(FIXTURE)
    assert compare(df, {"backend": ["fsdp"]})["speedup"].notna().any()  # one value in a list: one set-up
    with pytest.raises(AnalysisError, match="one value per key"):
        compare(df, {"backend": ["fsdp", "ddp"]})


def _typed_keys() -> list[tuple[str, str]]:
    """Every whole-number, number and true/false key of the schema outside the option groups."""
    from flopsweep.config import RunConfig

    found: list[tuple[str, str]] = []

    def walk(node: DictConfig, prefix: str) -> None:
        for name in node:
            child, key = node._get_node(name), f"{prefix}{name}"
            if not prefix and name in GROUP_BASES:
                continue
            if isinstance(child, DictConfig):
                walk(child, f"{key}.")
            elif type(child).__name__ in ("IntegerNode", "FloatNode", "BooleanNode"):
                found.append((key, type(child).__name__))

    walk(OmegaConf.structured(RunConfig), "")
    return found


def test_a_value_of_the_wrong_type_for_a_typed_key_is_one_line_with_a_fix_that_works() -> None:
    """Trial (session 18): ``parallel.cp=abc``, ``steps.measure=abc``, ``seed=1.5`` were Hydra's
    five-line merge error without a fix. Every typed key of the schema (not only those tried)."""
    keys = _typed_keys()
    assert {"seed", "parallel.cp", "steps.measure", "optim.lr", "compile"} <= {k for k, _ in keys}
    for key, kind in keys:
        line = _one_line(type_problem([f"{key}=abc"]))
        assert line.startswith(f"Invalid config: {key}='abc': is not ") and "Fix: set " in line, line
        example = line.split(", e.g. ", 1)[1].split()[0].rstrip(".")
        assert example.startswith(f"{key}=") and type_problem([example]) is None, (line, example)
        if kind == "IntegerNode":
            assert "is not a whole number" in _one_line(type_problem(["-m", f"{key}=1.5"]))
    assert "seed='x'" in _one_line(type_problem(["-m", "seed=0,1,x"]))
    for fine in (
        "seed=3",
        "optim.lr=1e-3",
        "compile=true",
        "seed=range(0,3)",
        "seed=${oc.env:S}",
    ):
        assert type_problem([fine]) is None, fine
    assert "must be a finite number" in _one_line(type_problem(["timeout_s=nan"]))  # a float, out of range


def _scalar_keys(node: DictConfig, prefix: str = "") -> list[tuple[str, object]]:
    """``(dotted key, node)`` of every scalar key of a structured schema, sections walked."""
    found = []
    for name in node:
        child, key = node._get_node(name), f"{prefix}{name}"
        if isinstance(child, DictConfig):
            if prefix or name not in GROUP_BASES:
                found += _scalar_keys(child, f"{key}.")
        elif type(child).__name__ in ("IntegerNode", "FloatNode", "BooleanNode", "StringNode"):
            found.append((key, child))
    return found


def _keys_with_their_option() -> list[tuple[str, list[str]]]:
    """Every scalar key of ``RunConfig`` outside the groups (no option picked), and of each option
    schema of every group, under one YAML option that has it (``model.n_layer`` with ``model=gpt-tiny``)."""
    from flopsweep.config import RunConfig

    out = [(key, []) for key, _ in _scalar_keys(OmegaConf.structured(RunConfig))]
    for group, base in GROUP_BASES.items():
        seen: set[type] = set()
        for option in option_names(group):
            schema = OPTION_SCHEMAS[group].get(option_kind(group, option), base)
            if schema in seen:
                continue
            seen.add(schema)
            out += [
                (f"{group}.{key}", [f"{group}={option}"])
                for key, _ in _scalar_keys(OmegaConf.structured(schema))
            ]
    return out


def test_null_or_a_list_for_a_key_of_one_value_is_one_line_with_a_fix_that_works() -> None:
    """Trial (session 19): ``model.name=null``, ``device=null``, ``tag=[a,b]``, ``model.n_layer=[2,4]``
    were Hydra's merge error (``field 'model.name' is not Optional``, ``Cannot convert 'list' to
    string``) in five lines. Every scalar key of the schema and of every option's schema: null where
    the key is not optional, a list anywhere; the fix's example passes."""
    from flopsweep.config import RunConfig

    keys = _keys_with_their_option()
    assert {"device", "tag", "model.name", "model.n_layer", "backend.reshard_after_forward"} <= {
        k for k, _ in keys
    }
    optional = {k for k, n in _scalar_keys(OmegaConf.structured(RunConfig)) if n._is_optional()}
    checked = 0
    for key, picked in keys:
        listed = _one_line(type_problem([*picked, f"{key}=[a,b]"]))
        assert (
            listed.startswith(f"Invalid config: {key}=[a,b]: takes ") and ", not a list. Fix: set " in listed
        )
        assert listed.endswith(f"; several, one job each: -m {key}=a,b."), listed
        example = listed.split(", e.g. ", 1)[1].split()[0].rstrip(".;")
        assert example.startswith(f"{key}=") and type_problem([*picked, example]) is None, (listed, example)
        line = type_problem([*picked, f"{key}=null"])
        if line is None:  # an optional key takes null
            assert key in optional or picked, key
            continue
        checked += 1
        assert _one_line(line).startswith(f"Invalid config: {key}=null: takes "), line
        assert ", not null. Fix: set " in line and line.endswith(", or drop the override."), line
    assert checked > 100, checked


@pytest.mark.parametrize(
    ("override", "words"),
    [
        (
            "steps=3",
            "steps=3: steps is a section of keys, not a value. Fix: set one of its keys, e.g. steps.",
        ),
        ("parallel=null", "parallel=null: parallel is a section of keys, not a value."),
        (
            "space.layouts=dp",
            "space.layouts=dp: is one value, not a list. Fix: write a list: space.layouts=[dp].",
        ),
        ("space.layouts=null", "space.layouts=null: takes a list, not null. Fix: write a list"),
        ("plan_clusters=null", "plan_clusters=null: takes a list, not null."),
    ],
)
def test_a_section_or_a_list_key_given_a_plain_value_is_one_line(override: str, words: str) -> None:
    from flopsweep.plan_command_line import command_line_problem

    assert command_line_problem([override]) is None  # plan_clusters=null is no cluster name
    assert _one_line(type_problem([override])).startswith(f"Invalid config: {words}")


@pytest.mark.parametrize(
    "override",
    ["fault={kind:oom,rank:1,phase:measure}", "parallel={dp_shard:-1}", "steps={warmup:1,measure:2}"],
)
def test_a_mapping_for_a_section_is_hydras_merge_not_refused(override: str) -> None:
    """Hydra merges ``section={key:value}`` into the section (``fault=`` in test_failures, ``parallel=``
    in the layout sweeps): no one-line refusal, and a sweep of mappings neither."""
    assert type_problem([override]) is None
    assert type_problem([f"{override},{override}"]) is None


def test_a_group_key_is_checked_against_the_option_picked() -> None:
    """``model.n_layer`` is checked in ``model=gpt-tiny``'s schema (its YAML value is the example);
    a sweep over options checks each; a key the picked option lacks is left to the other refusals."""
    line = _one_line(type_problem(["model=gpt-tiny", "model.n_layer=null"]))
    fix = "Fix: set model.n_layer to a whole number, e.g. model.n_layer=2 (model=gpt-tiny's)"
    assert line.endswith(f"{fix}, or drop the override."), line
    assert type_problem(["model=gpt-tiny", "model.n_layer=4"]) is None
    assert "backend.reshard_after_forward='maybe': is not true or false" in _one_line(
        type_problem(["-m", "backend=ddp,fsdp", "backend.reshard_after_forward=maybe"])
    )
    ddp = ["backend=ddp", "backend.reshard_after_forward=maybe"]
    assert type_problem(ddp) is None  # the key is not ddp's: foreign_option_keys' refusal
    assert type_problem(["-m", "model.n_layer=2,null"]).startswith("Invalid config: model.n_layer=null: ")


@pytest.mark.parametrize("group", [*GROUP_BASES, "sweep"])
@pytest.mark.parametrize("value", ["1", "true", "''", "{{a:1}}", "nope", "{upper}", "{first},nope"])
def test_a_group_given_no_option_name_is_refused_in_one_line(hydra_compose, group: str, value: str) -> None:
    """Trial (session 19): ``backend=1`` and ``backend=true`` were Hydra's traceback, ``backend=``,
    ``backend={a:1}``, ``backend=nope`` and ``precision=BF16`` its error and a 15-line list. Every
    group: one line listing its options, the closest as the example, which composes (``BF16``: did you mean
    ``bf16``, options being case-sensitive)."""
    from flopsweep.config import synonym
    from flopsweep.overrides import option_files

    options = option_files(group)
    value = value.format(first=options[0], upper=options[-1].upper())
    plus = "+" if group == "sweep" else ""
    override = f"{plus}{group}={value}"
    if value == options[-1].upper():  # session 26: a case-only difference is a did-you-mean that says so
        assert group_choice_problem(["-m", override]) == (
            f"Invalid config: {override}: {value} is no option of {group}: options are case-sensitive. "
            f"Fix: did you mean {plus}{group}={options[-1]}?"
        )
        return
    if meant := synonym(value, options):  # session 41: another word for an option (true: full) names it
        assert group_choice_problem(["-m", override]) == (
            f"Invalid config: {override}: {value} is no option of {group}: its name here is {meant}. "
            f"Fix: did you mean {plus}{group}={meant}?"
        )
        return
    line = _one_line(group_choice_problem(["-m", override]))
    assert line.startswith(f"Invalid config: {override}: ") and f"is no option of {group}" in line, line
    assert f"Fix: pick one of {', '.join(options)}, e.g. {plus}{group}=" in line
    example = line.split(", e.g. ", 1)[1].split()[0].rstrip(".").lstrip("+")
    assert example.partition("=")[2] in options
    if group != "sweep":
        assert hydra_compose([example]) is not None
    for fine in options[:2]:
        assert group_choice_problem([f"{plus}{group}={fine}"]) is None


@pytest.mark.parametrize(
    "overrides",
    [
        ["precision=glob(*)"],
        ["precision=glob(fp*,exclude=fp8*)"],
        ["+sweep=blocksparse-2k", "attention=glob(block*)"],
        ["steps.measure=interval(1,3)"],
        ["model.n_layer=glob(*)"],
        ["backend=glob(fsdp)", "backend.reshard_after_forward=false"],
    ],
)
def test_glob_and_interval_sweeps_pass_the_refusals_before_hydra(overrides) -> None:
    """Valid sweeps of Hydra's ``glob()`` and a sampler's ``interval()``: ``preset_option_keys`` raised
    Hydra's "ConfigLoader is not set" (a traceback, exit 1) as it listed their values."""
    for check in (group_choice_problem, preset_option_keys, type_problem):
        assert check(overrides) is None, check


def test_a_glob_of_options_is_checked_as_the_options_it_matches() -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from flopsweep.overrides import listed_values

    glob = OverridesParser.create().parse_override("precision=glob(fp*,exclude=fp8*)")
    assert listed_values(glob) == ["fp16", "fp32"]
    assert listed_values(OverridesParser.create().parse_override("steps.measure=interval(1,3)")) is None
    line = _one_line(preset_option_keys(["+sweep=blocksparse-2k", "attention=glob(sdpa-f*)"]))
    assert "attention=sdpa-flash:" in line and "attention.block_size" in line


@pytest.mark.parametrize(
    ("override", "words"),
    [
        (
            "space.micro_batches=[1.5]",
            "space.micro_batches=[1.5]: 1.5 is not a whole number. Fix: list whole numbers, e.g.",
        ),
        ("space.micro_batches=[2,a]", "space.micro_batches=[2,a]: a is not a whole number."),  # as typed
        ("space.micro_batches=[null]", "space.micro_batches=[null]: null is not a whole number."),
        (
            "space.layouts=[dp,null]",
            "space.layouts=[dp,null]: null is not a text value. Fix: list text values",
        ),
    ],
)
def test_a_typed_lists_element_of_another_type_is_one_line(override: str, words: str) -> None:
    """Hydra refused these in five lines ("Value 'a' of type 'str' could not be converted to Integer",
    ``full_key``, ``reference_type``) and no fix."""
    assert words in _one_line(type_problem([override, "hydra/sweeper=tune"]))
    assert type_problem(["space.micro_batches=[1,2]", "space.layouts=[dp,tp2]"]) is None


def test_space_keys_that_nothing_reads_are_one_line() -> None:
    """``plan=true 'space.layouts=[dp,tp2]'`` without ``plan_clusters`` planned the command's own job
    (``backend=single``, refused on 2 ranks) as if the space were not there; a run or a basic sweep ignored
    it too. The tuner, ``plan_clusters`` and a ``+sweep=`` file (which may pick either) read it."""
    from flopsweep.clusters import plans_gpu
    from flopsweep.overrides import unread_space_problem

    line = _one_line(unread_space_problem(["plan=true", "space.layouts=[dp,tp2]"]))
    here = plans_gpu(None)  # this machine's GPU, else the H100
    assert "space.layouts=[dp,tp2]:" in line and f"Fix: add plan_clusters=[{here}:8]" in line
    assert "-m hydra/sweeper=tune" in _one_line(
        unread_space_problem(["-m", "space.top=3", "plan_clusters=null"])
    )
    for read in (
        ["-m", "hydra/sweeper=tune", "space.layouts=[dp]"],
        ["plan=true", "plan_clusters=[H100:8]", "space.layouts=[dp]"],
        ["-m", "+sweep=tuning", "space.layouts=[dp]"],
        ["--config-name", "mine", "space.layouts=[dp]"],
        ["~space.top", "model=gpt-tiny"],
    ):
        assert unread_space_problem(read) is None, read


@pytest.mark.parametrize("override", ["=3", "=fsdp", "+=3"])
def test_an_override_without_a_key_is_one_line(override: str) -> None:
    """``=3`` was read as the group of ``conf/`` itself: "3 is no option of  (a config group ...)" and
    all 55 options of every group."""
    line = _one_line(group_choice_problem([override]))
    assert (
        line.startswith(f"Invalid config: {override}: an override names its key")
        and "steps.measure=3" in line
    )


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("modle=llama-tiny", "Invalid config: modle=llama-tiny: no such key. Fix: did you mean model?"),
        (
            "batch.micro_batch_sze=4",
            "Invalid config: batch.micro_batch_sze=4: no such key. Fix: did you mean batch.micro_batch_size",
        ),
        ("stesp.measure=2", "Invalid config: stesp.measure=2: no such key. Fix: did you mean steps.measure?"),
        ("zzz=1", "Invalid config: zzz=1: no such key. Fix: see docs/reference/overrides.md"),
    ],
)
def test_a_key_no_schema_has_is_one_line_naming_the_closest(override: str, words: str) -> None:
    """Hydra's answer was five lines ending "To append to your config use +"; a group's key is known
    when any of its options has it (``backend.zero_stage``: DeepSpeed's), and ``+key`` is Hydra's."""
    assert _one_line(type_problem([override])).startswith(words)
    for fine in (
        "backend.zero_stage=3",
        "model.config=x",
        "fault.kind=oom",
        "+brand_new=1",
        "hydra.run.dir=x",
    ):
        assert type_problem([fine]) is None, fine


def test_every_key_of_the_reference_is_known() -> None:
    """docs/reference/overrides.md (generated from the schemas) lists no key the refusal calls unknown."""
    from pathlib import Path

    from flopsweep.overrides import unknown_key_problem

    text = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "overrides.md").read_text()
    keys = re.findall(r"^\| `([a-z_][\w.]*)` \|", text, re.M)
    assert len(keys) > 100 and [k for k in keys if unknown_key_problem(k)] == []
