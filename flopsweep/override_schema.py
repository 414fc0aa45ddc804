"""The schema and the ``conf/`` files a command line's checks read, torch-free: the config directory,
its option files and their kinds, the structured schemas of :class:`flopsweep.config.RunConfig` and of
each option (:func:`key_schemas`, :func:`structured_schema`), every key they have (:func:`schema_keys`,
:func:`known_keys`), and the closest names to a typo (:func:`near_names`).
:mod:`flopsweep.overrides` (the refusals) and :mod:`flopsweep.near_keys` (the "did you mean") both
read them; neither imports the other's callers."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

import yaml

from flopsweep.override_parsing import overrides_of

CONF = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "conf")
"""The checkout's Hydra config directory (``conf/``)."""


MAX_YAML_BYTES = 1 << 20
"""The most of an option or sweep file read (the checkout's own files are a few KiB)."""


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader (plain values, no objects built), its libyaml build where PyYAML has one: the
same values, 14x faster (conf/'s 83 files composed and loaded in 11 ms against 156 ms, 2026-12-06). The
checks before Hydra read each file of a command line's defaults this way."""


NEVER_SUGGESTED = frozenset({"hydra.searchpath", "hydra.output_subdir", "repeat", "--experimental-rerun"})
"""Keys and flags that a command line is refused for whatever it gives them, so that no "did you mean"
(:func:`near_names`) names one: ``hydra.searchpath`` (:func:`flopsweep.flags.searchpath_problem`),
``hydra.output_subdir`` other than its default null (``command_line_checks.output_dir_problem``), ``repeat``
(the sweeper sets each round's from ``repeats=``; the job refuses another), ``--experimental-rerun``
(:func:`flopsweep.flags.flag_problem`)."""


def near_names(name: str, candidates, prefix: str = "", n: int = 3) -> list[str]:
    """Up to ``n`` of ``candidates`` closest to ``name`` (:func:`flopsweep.lookalike.near_names`: case and
    the letters O, l, I read as digits aside, ``Llama-Tiny`` and ``Ilama-tiny`` name ``llama-tiny``; else
    ``difflib``, cutoff 0.6), each with ``prefix`` before it, less those :data:`NEVER_SUGGESTED`
    (``hydra.searchpathx`` named ``hydra.searchpath``, itself refused)."""
    from flopsweep.lookalike import near_names as nearest

    allowed = [str(c) for c in candidates if f"{prefix}{c}" not in NEVER_SUGGESTED]
    return [f"{prefix}{c}" for c in nearest(name, allowed, n=n)]


def read_conf_yaml(path: str) -> dict:
    """The mapping of a YAML file of ``conf/`` (``yaml.safe_load`` of at most :data:`MAX_YAML_BYTES`: plain
    values, no objects built); empty for a file that holds something else.

    Raises:
        OSError: the file cannot be opened (the callers check it exists).
        UnicodeDecodeError: the file is not UTF-8.
        yaml.YAMLError: the file is not YAML.
    """
    with open(path, encoding="utf-8") as f:
        node = yaml.load(f.read(MAX_YAML_BYTES), Loader=SAFE_LOADER)
    return node if isinstance(node, dict) else {}


def listed_conf_yaml(path: str) -> dict:
    """:func:`read_conf_yaml` of a file that a listing of a whole group reads (every option of
    ``conf/model/``: :func:`flopsweep.model_identity.options`, :func:`option_kind` for
    :func:`options_of_kinds`): empty, never an error, for one that cannot be read (not YAML, not UTF-8,
    unopenable), so that one broken option file stops no run of another option; ``run.py`` warns of it
    (:func:`flopsweep.conf_files.unreadable_option_lines`), and a run that picks it is refused
    (:func:`flopsweep.conf_files.conf_file_problem`)."""
    try:
        return read_conf_yaml(path)
    except (OSError, ValueError, yaml.YAMLError, RecursionError):  # ValueError: UnicodeDecodeError too
        return {}


def option_kind(group: str, option: str) -> str:
    """The registry key behind a YAML option (``backend/zero3`` -> ``deepspeed``, ``model/gpt-tiny``
    -> ``gpt2``): its schema node's ``base_<kind>`` (``/schema/<group>/base_<kind>@_here_``), the
    option it extends, or its ``name``; the option itself for a file that cannot be read
    (:func:`listed_conf_yaml`)."""
    path = os.path.join(CONF, group, f"{option}.yaml")
    if not os.path.exists(path):
        return option
    node = listed_conf_yaml(path)
    for entry in node.get("defaults") or []:
        name = entry.partition("@")[0].rpartition("/")[2] if isinstance(entry, str) else ""
        if name.startswith("base_"):
            return name.removeprefix("base_")
        if isinstance(entry, str) and entry != "_self_":  # another option: fsdp, /backend/fsdp@_here_
            other = entry.partition("@")[0].removeprefix(f"/{group}/")
            return option_kind(group, other) if other and other != option else other or option
    return str(node.get("name", option))


def option_files(group: str, conf: str | None = None) -> list[str]:
    """The options of ``group``: its YAML files under ``<conf>/<group>/`` (default the package's ``conf/``),
    sub-folders too (``batch``: ``auto``, ``auto/max16``, ..., ``fixed``), without ``.yaml``, sorted."""
    folder = os.path.join(conf or CONF, group)  # CONF read at the call: tests point it elsewhere
    names = []
    for root, _, files in os.walk(folder, followlinks=False):  # conf/sweep is a link: os.walk enters it
        rel = os.path.relpath(root, folder)
        names += [
            os.path.normpath(os.path.join(rel, f.removesuffix(".yaml"))) for f in files if f.endswith(".yaml")
        ]
    return sorted(names)


def _model_size(option: str) -> float:
    """``n_layer x n_embd^2`` of a ``conf/model`` option (its YAML), the order of its block parameters;
    0 where the file names none (``hf``: its config's)."""
    try:
        node = read_conf_yaml(os.path.join(CONF, "model", f"{option}.yaml"))
        return float(node.get("n_layer") or 0) * float(node.get("n_embd") or 0) ** 2
    except (OSError, ValueError, TypeError, yaml.YAMLError):
        return 0.0


def options_of_kinds(group: str, kinds, near: str | None = None) -> list[str]:
    """The options of ``group`` a command line can pick (:func:`option_files`) whose schema is one of
    ``kinds`` (registry keys, :func:`option_kind`: ``model``'s ``llama`` is no option; its options are
    ``llama-tiny``, ``llama3.2-1b``...). For ``model`` the one nearest ``near`` in size comes first
    (``gpt-tiny`` -> ``llama-tiny``; :func:`_model_size`, by ratio), else the sorted order."""
    import math

    kinds = set(kinds)
    found = [f for f in option_files(group) if option_kind(group, f) in kinds]
    if group == "model" and near is not None and (size := _model_size(near)) > 0:
        found.sort(key=lambda f: abs(math.log(max(_model_size(f), 1.0) / size)))
    return found


def picks(group: str, kinds, near: str | None = None, more: int = 3) -> str:
    """How a fix names the options of ``kinds`` (:func:`options_of_kinds`): ``model=llama-tiny (or
    llama3.2-1b, llama3.2-3b, ...)``, each an option ``GROUP=NAME`` composes; the kind's own name where
    ``conf/`` holds none of it."""
    found = options_of_kinds(group, kinds, near)
    if not found:
        return " or ".join(f"{group}={k}" for k in kinds)
    rest = found[1 : 1 + more]
    tail = f" (or {', '.join(rest)}{', ...' if len(found) > 1 + more else ''})" if rest else ""
    return f"{group}={found[0]}{tail}"


def empty_choice_line(key: str, value: str) -> str | None:
    """The reason and fix for a ``choice()`` of no value (``seed=choice()``, ``sort(choice())``: Hydra's
    "empty choice is not legal", whose fix quoted it into one string), else None."""
    if re.fullmatch(r"\s*((sort|shuffle)\(\s*)?choice\(\s*\)\s*\)?\s*", value):
        return f"a choice needs at least one value. Fix: give its values: {key}=choice({choice_example(key)})"
    return None


def quoted_refusal(
    argv: list[str], override: str, recheck: Callable[[list[str]], str | None] | None
) -> str | None:
    """The refusal of ``override`` with its value quoted as one string (the grammar's fix for a value it
    cannot read), said of the override as typed, where ``recheck`` (``run.py``'s ``refusal``) refuses that
    form too (``hydra.sweeper.params={seed:0,1}``: quoted, it sets the axes as a whole, which the
    sweeper refuses): the fix is then that line's accepted form, never one refused again; else None."""
    key, _, value = override.partition("=")
    inner = '"' if '"' not in value else "'"
    quoted = f"{key}={inner}{value}{inner}"
    again = recheck([quoted if a == override else a for a in argv]) if recheck is not None else None
    # the refusal may show the quoted value in either quotes (hydra.launcher.slots='[0,1]')
    for said in (f"Invalid config: {key}={q}{value}{q}: " for q in (inner, "'", '"')):
        if again and again.startswith(said):
            return f"Invalid config: {override}: {again.removeprefix(said)}"
    return None


def choice_example(key: str) -> str:
    """Two values ``key`` takes, comma-separated, for a ``choice(...)`` example: a group's first options
    (``model``: ``gpt-1.3b,gpt-125m``), ``0,1`` for a key that takes a number, else ``a,b``."""
    from omegaconf.nodes import FloatNode, IntegerNode

    from flopsweep.config import RunConfig

    group = key.lstrip("+~")
    if os.path.isdir(os.path.join(CONF, group)):
        return ",".join(option_files(group)[:2])
    node: object = structured_schema(RunConfig)
    for part in group.split("."):
        getter = getattr(node, "_get_node", None)
        node = getter(part) if getter is not None else None
    return "0,1" if isinstance(node, IntegerNode | FloatNode) else "a,b"


def kinds_said(group: str, kinds) -> str:
    """``kinds`` as a refusal names them: ``backend=deepspeed`` where the kind is an option of its own,
    ``the llama options of model`` where it is not (``model=llama`` composes nothing)."""
    files = option_files(group)
    return " or ".join(f"{group}={k}" if k in files else f"the {k} options of {group}" for k in kinds)


def listed_values(o: object) -> list[str] | None:
    """The values a parsed override (Hydra's ``Override``) gives, as text: its one value, a choice's or a
    range's values, a ``glob(...)`` of a config group matched against :func:`option_files`
    (``precision=glob(fp*)``: ``fp16, fp32, fp8, ...``); None for what cannot be listed here (an
    ``interval()`` is a sampler's, a ``glob()`` of a key needs Hydra's config loader)."""
    from hydra.core.override_parser.types import Glob

    if not o.is_sweep_override():
        return [str(o.value())]
    value = o.value()
    if isinstance(value, Glob):
        group = o.key_or_group
        return value.filter(option_files(group)) if os.path.isdir(os.path.join(CONF, group)) else None
    if o.is_choice_sweep() or o.is_range_sweep():
        return [str(v) for v in o.sweep_string_iterator()]
    return None


RANGE_VALUES_CHECKED = 1000
"""The most values of one ``range()`` sweep that :func:`sweep_values` lists for the checks before Hydra
(a range's type is its start's and step's; a bound is its first values'): ``range(0,100000000)`` is
not listed whole (:data:`flopsweep.override_multirun.MAX_SWEEP_JOBS` refuses it)."""


def sweep_values(o: object) -> list:
    """The values a parsed override (Hydra's ``Override``) gives, as Hydra parsed them (``null`` is None):
    its one value, each of a choice sweep's (``a=1,2``, ``choice(1,2)``, ``tag(t,choice(1,2))``,
    ``shuffle(1,2)``, ``sort(2,1)``) or the first :data:`RANGE_VALUES_CHECKED` of a range's
    (``range(1.5,3.5,0.5)``: 1.5, 2.0, 2.5, 3.0); none for an ``interval()`` (a sampler's) or a
    ``glob()`` (Hydra's config loader lists a group's options). A glob is a choice sweep to Hydra
    (``is_choice_sweep``): ``sweep_iterator`` raised ``ConfigLoader is not set`` and ``.list``
    AttributeError before Hydra."""
    import itertools

    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep

    if not o.is_sweep_override():  # type: ignore[attr-defined]
        return [o.value()]  # type: ignore[attr-defined]
    value = o.value()  # type: ignore[attr-defined]
    if isinstance(value, ChoiceSweep):
        return list(value.list)
    if isinstance(value, RangeSweep):
        return list(itertools.islice(o.sweep_iterator(), RANGE_VALUES_CHECKED))  # type: ignore[attr-defined]
    return []


@functools.cache
def structured_schema(schema: type) -> object:
    """``OmegaConf.structured(schema)``, read-only, built once per process (about 20 ms for
    :class:`flopsweep.config.RunConfig`; the checks only read it)."""
    from omegaconf import OmegaConf

    node = OmegaConf.structured(schema)
    OmegaConf.set_readonly(node, True)
    return node


def key_schemas(parsed: list, key: str) -> list[tuple[object, str]]:
    """``(structured schema, whose)`` that ``key`` is looked up in (``parsed``: Hydra's parsed overrides of
    the command line, ``OverridesParser.parse_overrides``): :class:`flopsweep.config.RunConfig`'s
    for a key outside the option groups; for a key of a group (``model.n_layer``), the schema of each
    option the command line picks for it (``model=gpt-tiny``), else conf/config.yaml's default, with
    that option's name (its YAML value is the example of the fix)."""
    from flopsweep.config import RunConfig
    from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS

    group = key.split(".")[0]
    if group not in GROUP_BASES:
        return [(structured_schema(RunConfig), "")]
    picked = [o for o in parsed if o.key_or_group == group and o.package is None and not o.is_delete()]
    if picked:
        o = picked[-1]
        options = listed_values(o) or []
    else:
        defaults = read_conf_yaml(os.path.join(CONF, "config.yaml")).get("defaults") or []
        options = [str(d[group]) for d in defaults if isinstance(d, dict) and group in d]
    out = []
    for option in options:
        schema = OPTION_SCHEMAS[group].get(option_kind(group, option), GROUP_BASES[group])
        out.append((structured_schema(schema), option))
    return out


def schema_node(key: str, overrides: list[str]) -> tuple[object, str] | None:
    """The schema node of ``key`` (:func:`key_schemas`: the picked option's for a key of a group, the first
    that has it) and that option (``""`` outside the groups), else None (a key no schema has, a command
    line the grammar refuses)."""
    from omegaconf import OmegaConf

    from flopsweep.override_parsing import parsed_overrides

    parsed = parsed_overrides(overrides)
    if parsed is None:
        return None
    for schema, option in key_schemas(parsed, key):
        path = key.partition(".")[2] if option else key
        parent_key, _, leaf = path.rpartition(".")
        parent = OmegaConf.select(schema, parent_key) if parent_key else schema
        if OmegaConf.is_dict(parent) and leaf in parent:
            return parent._get_node(leaf), option
    return None


def number_key(key: str, overrides: list[str]) -> bool:
    """Whether ``key``'s schema node (:func:`schema_node`) takes a number (an integer or a float)."""
    from omegaconf.nodes import FloatNode, IntegerNode

    found = schema_node(key, overrides)
    return found is not None and isinstance(found[0], IntegerNode | FloatNode)


def schema_keys(schema: object, prefix: str = "") -> set[str]:
    """Every dotted key of a structured schema, sections included (``steps``, ``steps.measure``)."""
    from omegaconf import OmegaConf

    out: set[str] = set()
    for name in schema:  # type: ignore[attr-defined]
        key = f"{prefix}{name}"
        out.add(key)
        node = schema._get_node(name)  # type: ignore[attr-defined]
        if OmegaConf.is_dict(node) and not node._is_none() and not node._is_missing():
            out |= schema_keys(node, f"{key}.")
    return out


@functools.cache
def known_keys() -> frozenset[str]:
    """Every key a command line may set without ``+``: :class:`flopsweep.config.RunConfig`'s, and
    each option group's keys in any of its options' schemas (``backend.zero_stage``: DeepSpeed's)."""
    from omegaconf import OmegaConf

    from flopsweep.config import RunConfig
    from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS

    keys = schema_keys(OmegaConf.structured(RunConfig))
    for group, base in GROUP_BASES.items():
        for schema in {base, *OPTION_SCHEMAS.get(group, {}).values()}:
            keys |= schema_keys(OmegaConf.structured(schema), f"{group}.")
    return frozenset(keys)


def existing_key_add_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for ``+KEY=VALUE`` whose key the config has already (``+steps.measure=3``), else None:
    ``+`` adds only a key that is not there, and Hydra refused it in five lines ("Could not append to
    config. An item is already at 'steps.measure'", then its full-error hint), exit 1. A key exists when
    the schema of :class:`flopsweep.config.RunConfig`, or of the option the command line (else
    conf/config.yaml) picks for its group, has it (:func:`key_schemas`); a key only another option has
    (``+attention.layout=`` beside ``attention=sdpa``) is not. Config groups (``+model=``:
    :func:`flopsweep.flags.group_prefix_problem`), ``++`` (adds or sets), a package (``@``) and
    ``hydra.`` keys are left alone."""
    from flopsweep.override_parsing import parsed_or_none

    parsed = []
    for text in overrides_of(argv):
        if (o := parsed_or_none(text)) is not None:  # None: syntax_problem's
            parsed.append((text, o))
    every = [o for _, o in parsed]
    for text, o in parsed:
        key = o.key_or_group
        if not o.is_add() or o.package is not None or key.startswith("hydra") or "/" in key:
            continue
        if os.path.isdir(os.path.join(conf, key)):
            continue
        schemas = key_schemas(every, key)  # an option's schema has its keys without the group's name
        if any((key.partition(".")[2] if whose else key) in schema_keys(schema) for schema, whose in schemas):
            fix = text.removeprefix("+")
            return f"Invalid config: {text}: {key} already exists; + adds only new keys. Fix: {fix}"
    return None


def added_key_error(
    key: str, value: object, section: str, keys: list[str], plus: str | None = None, shown: str | None = None
) -> ValueError:
    """The one line (a :class:`flopsweep.config.ConfigError`) for ``key`` (dotted, ``steps.bogus``), added
    with ``plus`` (``+`` or ``++``; None in the job, which cannot tell which was typed) though
    ``section`` (dotted, ``steps``; ``""`` the top level) has no such key, ``keys`` being the ones it has:
    ``Invalid config: steps.bogus=1: is not a key of steps (a '++' override adds keys without checking
    them). Fix: drop ++steps.bogus=1 (the keys of steps are warmup, measure, ...).`` A near key
    (``+model.n_layers=3``) is the fix: ``write model.n_layer=3, without the '+' (model.n_layer is a key
    already)``. ``shown``: the value as typed (else its ``repr``)."""
    from flopsweep.config import ConfigError

    typed = f"'{plus}'" if plus else "'+' or '++'"
    said = shown if shown is not None else repr(value)
    where = f"the keys of {section} are" if section else "the top-level keys are"
    missing = key.removeprefix(f"{section}.").split(".")[0] if section else key.split(".")[0]
    near = near_names(missing, keys, n=1)
    if near and "." not in key.removeprefix(f"{section}.").removeprefix(missing):  # the key's last part
        name = f"{section}.{near[0]}" if section else near[0]
        fix = f"write {name}={said}, without the {typed} ({name} is a key already)"
    elif plus:
        fix = f"drop {plus}{key}={said} ({where} {', '.join(keys)})"
    else:
        fix = f"drop the override that adds {key} ({where} {', '.join(keys)})"
    what = f"a key of {section}" if section else "a top-level key of the config"
    override = f"a {typed} override" if plus else f"an override with {typed}"
    return ConfigError(key, value, f"is not {what} ({override} adds keys without checking them)", fix, shown)
