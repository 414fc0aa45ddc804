"""Refusals of a command line before Hydra starts (``run.py``), torch-free: each function takes the
overrides as typed and returns one line (``Invalid config: ...``), or None when it has nothing to say.

These are the overrides whose Hydra error is a traceback, a message that does not say what to do, or
silence: a config group given ``null`` or a list (:func:`group_choice_problem`), a sweeper whose
package is not installed (:func:`sweeper_extra_problem`), a ready-made sweep whose file sets a key
of an option the command line replaces (:func:`preset_option_keys`), and a value a typed key cannot
take: another type, ``null`` where it is not optional, a list for one value, one value for a list, a
value for a section, in the schema or the picked option's (:func:`type_problem`).
"""

from __future__ import annotations

import functools
import os
import re

from flopsweep.override_schema import (  # re-exported: run.py, flags, cli, hydra_keys read them here
    CONF as CONF,
)
from flopsweep.override_schema import (
    NEVER_SUGGESTED as NEVER_SUGGESTED,
)
from flopsweep.override_schema import (
    key_schemas as key_schemas,
)
from flopsweep.override_schema import (
    known_keys as known_keys,
)
from flopsweep.override_schema import (
    listed_values as listed_values,
)
from flopsweep.override_schema import (
    near_names as near_names,
)
from flopsweep.override_schema import (
    option_files as option_files,
)
from flopsweep.override_schema import (
    option_kind as option_kind,
)
from flopsweep.override_schema import (
    read_conf_yaml as read_conf_yaml,
)


def _not_an_option(group: str, value: object) -> str | None:
    """How ``value`` shows when it is no option name of ``group`` (``null``, ``[a,b]``, ``1``, ``''``,
    ``{a: 1}``, or, for a group of ``conf/`` other than Hydra's own, a name without its YAML file),
    else None. An interpolation is left to Hydra."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{v}" for k, v in value.items()) + "}"
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    if not isinstance(value, str) or "${" in value:
        return None
    if not value.strip():
        return repr(value)
    stem = value.removesuffix(".yaml")  # Hydra takes model=gpt-tiny.yaml too
    if os.path.isfile(os.path.join(CONF, group, f"{stem}.yaml")):
        return None
    if group.startswith("hydra/"):  # the plug-ins' options are not all files of conf/: Hydra's list
        plugin = os.path.join(os.path.dirname(CONF), "hydra_plugins", "flopsweep_slurm", "conf", group)
        if stem == "basic" or os.path.isfile(os.path.join(plugin, f"{stem}.yaml")):
            return None  # Hydra's own basic sweeper and launcher, the Slurm launchers: no scan needed
        known = hydra_group_options(group)
        return value if known and stem not in known else None
    return value


@functools.cache
def hydra_group_options(group: str) -> tuple[str, ...]:
    """The options Hydra composes for ``group`` (``hydra/launcher``: ``basic``, ``pool``, ``slurm``,
    ``submitit_local``, ...): conf/'s, Hydra's own and the plug-ins' (their search-path plug-ins and
    config-store entries), as Hydra lists them after its plug-in scan (``ConfigLoaderImpl
    .get_group_options`` on the search path ``run.py``'s Hydra uses); () when they cannot be listed
    (the name is then left to Hydra). Torch-free; the scan takes about a second, and runs only for a
    name that is no file of conf/ (``hydra/sweeper=nope``: Hydra's error, its options and search path
    were 14 lines)."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra._internal.utils import create_config_search_path

        loader = ConfigLoaderImpl(config_search_path=create_config_search_path(CONF))
        return tuple(loader.get_group_options(group))
    except Exception:  # noqa: BLE001 - a courtesy before Hydra starts: Hydra reports what this cannot
        return ()


def shown_options(group: str) -> list[str]:
    """The options a refusal of ``group`` lists: its files of conf/ (:func:`option_files`), and for a
    ``hydra/`` group but the sweeper Hydra's list (:func:`hydra_group_options`, less the ``*_base``
    configs others extend). ``hydra/sweeper`` lists flopsweep's sweepers alone: Hydra's own ``basic``
    and the Optuna plug-in's ``optuna`` compose but are refused at the sweep's start
    (:func:`flopsweep.hydrafiles.sweeper_problem`)."""
    if group.startswith("hydra/") and group != "hydra/sweeper":
        return [n for n in hydra_group_options(group) if not n.endswith("_base")] or option_files(group)
    return option_files(group)


def group_choice_problem(overrides: list[str]) -> str | None:
    """One line for a config group given no option name of its own, else None: ``backend=null``
    (Hydra stops with a ``ValueError`` traceback), ``backend=1`` or ``backend=true`` (a traceback
    too), ``backend=[fsdp,ddp]`` (Hydra merges both options into one node and runs that, unasked),
    ``backend={a:1}``, ``backend=`` or a name that is no option (``backend=nope``, ``precision=BF16``:
    Hydra's error and its list of options over 15 lines), or such a value among a sweep's
    (``-m backend=fsdp,null``). The fix lists the group's options (its YAML files in ``conf/``) and
    takes the closest name as its example; a name with non-ASCII look-alikes of an option's letters
    (``'model=llama-tinу'``, a Cyrillic ``у``: :func:`flopsweep.lookalike.ascii_lookalike`) gets that
    option's "did you mean" instead, naming the character, and so does a name that differs from an option in
    case alone (``precision=BF16``: ``options are case-sensitive``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from flopsweep.config import near_name
    from flopsweep.lookalike import ascii_lookalike

    conf = CONF
    parser = OverridesParser.create()
    for text in overrides:
        if "=" not in text or text.startswith("-"):
            continue
        try:
            o = parser.parse_override(text)
        except Exception:  # noqa: BLE001 - Hydra reports its own syntax errors
            continue
        group = o.key_or_group
        if not group.strip("/"):  # ``=3``: the conf folder itself passed for a group, every option listed
            return (
                f"Invalid config: {text}: an override names its key before '='. "
                "Fix: write KEY=VALUE, e.g. steps.measure=3."
            )
        if o.is_delete() or not (group.startswith("hydra/") or os.path.isdir(os.path.join(conf, group))):
            continue
        value = o.value()
        if o.is_sweep_override():
            values = list(getattr(value, "list", None) or [])  # a choice sweep's; a range or glob: Hydra's
        else:
            values = [value]
        shown = next((b for v in values if (b := _not_an_option(group, v)) is not None), None)
        if shown is None:
            continue
        names = shown_options(group)
        defaults = read_conf_yaml(os.path.join(conf, "config.yaml")).get("defaults") or []
        chosen = {k: v for d in defaults if isinstance(d, dict) for k, v in d.items()}
        example = chosen.get(group) if chosen.get(group) in names else (names or ["NAME"])[0]
        near = near_name(shown, names)  # case aside: precision=BF16 names bf16
        example = near or example
        case = (near, "options are case-sensitive") if near and near.lower() == shown.lower() else None
        plus = "+" if text.startswith("+") or ("/" not in group and group not in chosen) else ""
        if look := ascii_lookalike(shown, names) or case:  # llama-tinу (a Cyrillic у), BF16: the option meant
            meant = (
                text.replace(shown, look[0], 1)
                if o.is_sweep_override()
                else f"{text.partition('=')[0]}={look[0]}"
            )
            said = f"{shown} is no option of {group}: {look[1]}"
            return f"Invalid config: {text}: {said}. Fix: did you mean {meant}?"
        pick = f"pick one of {', '.join(names)}, e.g. {plus}{group}={example}" if names else "name one option"
        several = "" if group.startswith("hydra/") or plus else f" (several, one job each: -m {group}=a,b)"
        return (
            f"Invalid config: {text}: {shown} is no option of {group} (a config group takes one option "
            f"name). Fix: {pick}{several}."
        )
    return None


OPTUNA_SWEEPERS = ("optuna_objective", "optuna")
"""``hydra/sweeper=`` options that need hydra-optuna-sweeper (the ``optuna`` extra)."""


def sweeper_extra_problem(overrides: list[str]) -> str | None:
    """One line for ``hydra/sweeper=optuna_objective`` (or the plugin's own ``optuna``) when
    hydra-optuna-sweeper is not installed, else None: Hydra would say only "Could not load
    'hydra/sweeper/optuna'", with no word of the extra that provides it. Looks the package up
    (``importlib.util.find_spec``); imports nothing."""
    import importlib.util

    for text in overrides:
        key, _, value = text.partition("=")
        if key.lstrip("+~") != "hydra/sweeper" or value.strip().strip("'\"") not in OPTUNA_SWEEPERS:
            continue
        try:
            found = importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (
                f"Invalid config: {text}: needs hydra-optuna-sweeper (the optuna extra), which is not "
                "installed. Fix: pip install -e '.[optuna]' in the flopsweep checkout (or pip install "
                "hydra-optuna-sweeper), or drop hydra/sweeper= for the basic sweeper."
            )
    return None


SPACE_READERS = ("hydra/sweeper=tune", "plan_clusters")
"""What reads ``space.*``: the tuner, and ``plan=true``'s ranking of the set-ups on clusters."""


def unread_space_problem(overrides: list[str]) -> str | None:
    """One line for ``space.*`` on a command line that nothing reads it on, else None: no
    ``hydra/sweeper=tune`` and no ``plan_clusters`` (``plan=true 'space.layouts=[dp,tp2]'`` planned
    the command's own job, ``backend=single``, and a run or a basic sweep ran as if it were not there).
    A ``+sweep=`` file or another ``--config-name`` may pick either reader: left alone."""
    given: dict[str, str] = {}
    for text in overrides:
        key, eq, value = text.partition("=")
        if text.startswith(("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir")):
            return None
        if eq and not text.startswith("~"):
            given[key.lstrip("+")] = value.strip()
    if "sweep" in given or given.get("hydra/sweeper") == "tune":
        return None
    if given.get("plan_clusters", "null").lower() not in ("null", "none", "[]", ""):
        return None
    space = next((k for k in given if k.startswith("space.")), None)
    if space is None:
        return None
    from flopsweep.clusters import plans_gpu

    plan = given.get("plan", "").lower() == "true"
    gpu = plans_gpu(given.get("plan_gpu", "").strip("'\"") or None)  # the GPU the plan is about
    clusters = f"plan_clusters=[{gpu}:8]"
    add = clusters if plan else f"-m hydra/sweeper=tune, or plan=true {clusters}"
    return (
        f"Invalid config: {space}={given[space]}: space.* lists the set-ups of the tuner "
        "(hydra/sweeper=tune) and of plan=true's ranking on clusters (plan_clusters=[...]); this command "
        f"has neither, so it would be ignored. Fix: add {add}, or drop the space.* overrides."
    )


def preset_option_keys(overrides: list[str]) -> str | None:
    """One line for a ready-made sweep (``+sweep=P``) whose file sets a key of one option of a group
    (in its body or its sweeper's params: ``attention.block_size`` of ``attention=blocksparse``)
    while the command line picks another option of that group (``attention=sdpa``), else None.
    Hydra would stop composing with "Key 'block_size' not in 'AttentionConfig'" and no word of the
    sweep file. (A sweep file keeps an option's own knobs in an option file of their own where it
    can, as ``batch=auto/max16`` does, so that another option replaces them.)"""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from flopsweep.options import GROUP_BASES, owners
    from flopsweep.override_schema import kinds_said

    parser = OverridesParser.create()
    presets: list[str] = []
    chosen: dict[str, list[str]] = {}
    for text in overrides:
        try:
            o = parser.parse_override(text) if "=" in text and not text.startswith("-") else None
        except Exception:  # noqa: BLE001 - Hydra reports its own syntax errors
            o = None
        if o is None or o.package is not None:
            continue
        values = listed_values(o)
        if values is None:
            continue
        if o.key_or_group == "sweep":
            presets += [v for v in values if re.fullmatch(r"[\w.-]+", v)]
        elif o.key_or_group in GROUP_BASES:
            chosen[o.key_or_group] = values
    for preset in presets:
        path = os.path.join(CONF, "sweep", f"{preset}.yaml")
        if not os.path.isfile(path):
            continue  # Hydra names the options
        node = read_conf_yaml(path)
        params = ((node.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
        body = [f"{g}.{k}" for g in GROUP_BASES if isinstance(node.get(g), dict) for k in node[g]]
        keys = body + [str(k) for k in params if str(k) not in body]  # Hydra composes the body first
        for group, options in chosen.items():
            foreign = {}  # key of the sweep file -> the options it belongs to, for the options it misses
            for dotted in keys:
                head, _, key = dotted.partition(".")
                own = owners(group, key) if head == group and key and "." not in key else []
                missing = [c for c in options if own and option_kind(group, c) not in own]
                if missing:
                    foreign[dotted] = (own, missing)
            if foreign:
                own, missing = next(iter(foreign.values()))
                picked = f"{group}={','.join(missing)}"
                names = kinds_said(group, own)  # the llama options of model: model=llama composes nothing
                listed = ", ".join(foreign)
                return (
                    f"Invalid config: +sweep={preset} {picked}: the sweep file sets {listed}, of {names}. "
                    f"Fix: drop {picked} (the sweep picks its own), or copy sweep/{preset}.yaml and leave "
                    f"{'those keys' if len(foreign) > 1 else listed} out."
                )
    return None


_KINDS = {
    "IntegerNode": ("a whole number", "5"),
    "FloatNode": ("a number", "0.5"),
    "BooleanNode": ("true or false", "true"),
    "StringNode": ("one text value", "NAME"),
}
"""The schema's scalar node types by name: what a value must be (``a whole number``) and an example."""


def _example(key: str, node: object, kind: tuple[str, str], option: str) -> tuple[str, str]:
    """The example of a fix for ``key`` and where it comes from: the picked option's YAML value
    (``model=gpt-tiny``'s), else the schema's default, else ``kind``'s."""
    group, _, leaf = key.partition(".")
    if option:
        path = os.path.join(CONF, group, f"{option}.yaml")
        own = read_conf_yaml(path).get(leaf) if os.path.isfile(path) else None
        if isinstance(own, bool | int | float | str) and own != "":
            return (str(own).lower() if isinstance(own, bool) else str(own)), f" ({group}={option}'s)"
    default = node._value()  # type: ignore[attr-defined]
    if default is None or default == "" or isinstance(default, list | dict):
        return kind[1], ""
    return (str(default).lower() if isinstance(default, bool) else str(default)), " (its default)"


def _bound_problem(
    head: str, key: str, value: int | float, node: object, option: str, float_: bool
) -> str | None:
    """The line for a whole number beyond its key's bound (:data:`flopsweep.config.MAX_BY_KEY`, else
    :data:`flopsweep.config.MAX_INT`), as :func:`flopsweep.checks.check_bounds` would refuse it in the
    job: the bound, an example that passes (the picked option's value, else the default) and the
    check a large value meets next (:func:`flopsweep.key_needs.memory_note`); None within it."""
    from flopsweep.config import MAX_BY_KEY, MAX_INT
    from flopsweep.key_needs import memory_note

    limit = int(MAX_BY_KEY.get(key, MAX_INT))
    if abs(value) <= limit:
        return None
    example, whose = _example(key, node, _KINDS["IntegerNode"], option)
    if not whose and node._is_optional():  # type: ignore[attr-defined]  # batch.global_batch_size: unset
        example, whose = "null", " (its default)"
    side = f"at most {limit}" if value > 0 else f"at least -{limit}"
    written = " written as a float, and" if float_ else ""
    how = ", without a point or exponent" if float_ else ""
    return (
        f"{head} is a whole number{written} beyond the bound of {limit}. "
        f"Fix: write a whole number {side}{how}, e.g. {key}={example}{whose}{memory_note(key)}."
    )


def _written(key: str, value: object, given: dict[str, str] | None) -> str:
    """``key=value`` as a fix writes it: after the overrides it needs on the command line's options
    (:func:`flopsweep.key_needs.needed`: ``nnodes=1000`` on ``backend=single`` needs ``backend=ddp``),
    with the check it still meets (:func:`flopsweep.key_needs.still_meets`)."""
    from flopsweep.key_needs import needed, still_meets

    given = given or {}
    extra = needed(key, str(value), given)
    replaced = [f"{k}={given[k]}" for k in (e.partition("=")[0] for e in extra) if k in given]
    line = " ".join([*extra, f"{key}={value}"]) + (f" in place of {' '.join(replaced)}" if replaced else "")
    note = still_meets(key, str(value), given)
    return f"{line} ({note})" if note else line


def _nproc_problem(head: str, value: object, given: dict[str, str] | None) -> str | None:
    """Why ``nproc_per_node`` (a text key: ``auto`` or a count) cannot take a number, as the job would
    refuse it (:func:`flopsweep.plan.resolve_nproc`, :func:`flopsweep.checks.check_bounds`), before
    Hydra makes a run folder: a whole number written as a float (``2.0``), a count beyond
    :data:`flopsweep.checks.MAX_NPROC_PER_NODE` (``1e12`` too); else None (text, a count below 1: the
    job's line). The fix writes a count with what it needs (``backend=ddp nproc_per_node=2``)."""
    from flopsweep.checks import MAX_NPROC_PER_NODE

    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    if value > MAX_NPROC_PER_NODE:
        return (
            f"{head} is beyond the bound of {MAX_NPROC_PER_NODE} ranks per node. Fix: set "
            f"nproc_per_node=auto, or a count of ranks: {_written('nproc_per_node', 2, given)}."
        )
    if isinstance(value, float) and value >= 1:
        return (
            f"{head} is a whole number written as a float. Fix: write it without a point or exponent: "
            f"{_written('nproc_per_node', int(value), given)}."
        )
    return None


def _value_problem(
    key: str,
    value: object,
    node: object,
    option: str,
    typed: str | None = None,
    given: dict[str, str] | None = None,
) -> str | None:
    """Why ``node`` of the schema cannot take ``value`` (one line), else None. ``typed``: the value as
    the command line wrote it, which the line echoes for a number (``1e12``, not ``1000000000000.0``)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    from flopsweep.config import cut

    if typed is not None and isinstance(value, int | float) and not isinstance(value, bool) and typed.strip():
        shown = cut(typed.strip())  # a 400-digit number: its first digits and its length
    elif isinstance(value, list):
        shown = "[" + ",".join("null" if v is None else str(v) for v in value) + "]"
    elif isinstance(value, bool):
        shown = str(value).lower()
    else:
        shown = "null" if value is None else repr(value) if isinstance(value, str) else str(value)
    head = f"Invalid config: {key}={shown}:"
    if key == "nproc_per_node" and isinstance(value, int | float) and not isinstance(value, bool):
        return _nproc_problem(head, value, given)  # a count, given as a number; text is the job's
    optional = node._is_optional()  # type: ignore[attr-defined]
    if isinstance(node, DictConfig):
        if isinstance(value, dict):  # fault={kind:oom,rank:1}: Hydra merges a mapping into the section
            return None
        first = next(iter(node), "KEY")
        example = node[first] if first in node and not OmegaConf.is_config(node[first]) else "..."
        example = str(example).lower() if isinstance(example, bool) else example
        return (
            f"{head} {key} is a section of keys, not a value. Fix: set one of its keys, e.g. "
            f"{key}.{first}={example}."
        )
    if isinstance(node, ListConfig):
        if value is None and not optional:
            return (
                f"{head} takes a list, not null. Fix: write a list, e.g. {key}=[a,b]; or drop the override."
            )
        if value is not None and not isinstance(value, list):
            from flopsweep.lookalike import list_text

            if isinstance(value, str) and (meant := list_text(value)):  # '"[H100:8,]"': a list, quoted
                return f"{head} is one string, not a list (its quotes make it one). Fix: {key}={meant}"
            return f"{head} is one value, not a list. Fix: write a list: {key}=[{value}]."
        return _element_problem(head, key, value or [], node)
    kind = _KINDS.get(type(node).__name__)
    if kind is None:
        return None
    example, whose = _example(key, node, kind, option)
    fix = f"set {key} to {kind[0]}, e.g. {key}={example}{whose}"
    if value is None:
        return None if optional else f"{head} takes {kind[0]}, not null. Fix: {fix}, or drop the override."
    if isinstance(value, list | dict):
        what = "a list" if isinstance(value, list) else "a mapping"
        several = f"; several, one job each: -m {key}=a,b" if isinstance(value, list) else ""
        return f"{head} takes {kind[0]}, not {what}. Fix: {fix}{several}."
    try:
        converted = node.validate_and_convert(value)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - omegaconf's ValidationError and its kin
        if kind[0] == "a whole number" and isinstance(value, float) and value.is_integer():
            # 1e3 or 4.0: a whole number written as a float, which the typed key does not convert
            if problem := _bound_problem(head, key, value, node, option, True):
                return problem  # the rewritten number would be refused by checks.check_bounds
            return (
                f"{head} is a whole number written as a float. Fix: write it without a point or "
                f"exponent: {_written(key, int(value), given)}."
            )
        return f"{head} is not {kind[0]}. Fix: {fix}."
    if kind[0] == "a whole number" and isinstance(value, int) and not isinstance(value, bool):
        # the job's check_bounds, before Hydra: the upper bound's own line, then the lower (nnodes=0)
        return _bound_problem(head, key, value, node, option, False) or _number_problem(
            head, key, value, node, option, "IntegerNode"
        )
    if kind[0] == "a number" and isinstance(converted, float):
        return _number_problem(
            head, key, converted, node, option
        )  # the job's bounds and ranges, before Hydra
    return None


def _number_problem(
    head: str, key: str, value: float, node: object, option: str, kind: str = "FloatNode"
) -> str | None:
    """The line for a number that the job would refuse by its value alone
    (:func:`flopsweep.checks.number_problem`: beyond :data:`flopsweep.config.MAX_BY_KEY`, else
    :data:`flopsweep.config.MAX_FLOAT`; below :data:`flopsweep.lower_bounds.MIN_BY_KEY`, ``timeout_s=0``,
    ``nnodes=0``; not finite; out of the key's range, ``optim.lr=-1``, ``predict.overlap=2``), with the
    job's fix and an example that passes (the picked option's value, else the default, else null for an
    optional key); None when the job would take it. ``kind``: the schema node's (``IntegerNode``)."""
    from flopsweep.checks import number_problem

    error = number_problem(key, value)
    if error is None:
        return None
    example, whose = _example(key, node, _KINDS[kind], option)
    if not whose and node._is_optional():  # type: ignore[attr-defined]  # cost.usd_per_gpu_hour: unset
        example, whose = "null", " (its default)"
    fix = error.fix
    if fix.startswith("set e.g. ") and f"{key}=" not in fix:  # cost's "set e.g. 2.5, or null"
        fix = f"set e.g. {key}={fix.removeprefix('set e.g. ')}"
    elif f"{key}=" not in fix:  # the bound's "set optim.lr to at most 1e+12"
        fix = f"{fix}, e.g. {key}={example}{whose}"
    return f"{head} {error.problem}. Fix: {fix}."


_ELEMENTS = {
    int: ("a whole number", "whole numbers"),
    float: ("a number", "numbers"),
    str: ("a text value", "text values"),
    bool: ("true or false", "true or false values"),
}
"""What a typed list of the schema holds, by its element type."""


def _element_problem(head: str, key: str, values: list, node: object) -> str | None:
    """Why the typed list ``node`` cannot hold one of ``values`` (``space.micro_batches=[1.5]``,
    ``[a]``, ``[null]``: Hydra's five-line "could not be converted to Integer"), else None. The fix's
    example is the schema's default list."""
    from omegaconf import ListConfig, OmegaConf

    element = getattr(node._metadata, "element_type", None)  # type: ignore[attr-defined]
    if element not in _ELEMENTS:
        return None
    for item in values:
        try:
            ListConfig([item], element_type=element)
        except Exception:  # noqa: BLE001 - omegaconf's ValidationError and its kin
            shown = "null" if item is None else repr(item) if isinstance(item, str) else str(item)
            default = OmegaConf.to_container(node) if not node._is_none() else None  # type: ignore[attr-defined]
            example = "[" + ",".join(map(str, default)) + "]" if default else "[...]"
            one, many = _ELEMENTS[element]
            return f"{head} {shown} is not {one}. Fix: list {many}, e.g. {key}={example}."
    return None


def unknown_key_problem(key: str, value: str | None = None, parsed: list | None = None) -> str | None:
    """One line for a key no schema has (``modle=...``, ``batch.micro_batch_sze=4``: Hydra's
    five-line "Could not override ... To append to your config use +"), naming the closest keys that
    the command line ``parsed`` (Hydra's parsed overrides; its options picked) may set
    (:func:`flopsweep.near_keys.suggestion`); None for a known key and under an untyped section (a key
    below one that the schema types as a plain mapping)."""
    from flopsweep.near_keys import suggestion

    known = known_keys()
    if key in known:
        return None
    parent = key.rpartition(".")[0]
    if parent and parent not in known:  # a section's typo: the section is named
        return unknown_key_problem(parent, None if value is None else "...", parsed)
    named = key if value is None else f"{key}={value}"
    return f"Invalid config: {named}: no such key. Fix: {suggestion(key, parsed, value)}"


def type_problem(overrides: list[str]) -> str | None:
    """One line for an override whose value the schema's typed key cannot take, else None: a value of
    the wrong type (``steps.measure=abc``, ``seed=1.5``, ``parallel.cp=two``, ``optim.lr=fast``;
    each value of a choice sweep too), ``null`` for a key that is not optional (``precision.name=null``,
    ``model.name=null``, ``device=null``), a list for a key of one value (``tag=[a,b]``,
    ``model.n_layer=[2,4]``: several values are a sweep, ``-m``), one value for a list
    (``space.layouts=dp``), or a value for a whole section (``steps=3``).

    Hydra would refuse it as well, but in a five-line block ("Error merging override ... could not be
    converted to Integer", ``full_key``, ``reference_type``) without a fix. The keys of
    :class:`flopsweep.config.RunConfig` and, for a key of an option group (``model.*``, ``backend.*``,
    ...), of the schema of the option the command line (else conf/config.yaml) picks; its YAML value is
    the fix's example. Interpolations, range sweeps and keys no schema has are Hydra's.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep
    from omegaconf import OmegaConf

    from flopsweep.key_needs import given_values

    overrides = [o for o in overrides if "=" in o and not o.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - Hydra reports its own syntax errors
        return None
    for o in parsed:
        key = o.key_or_group
        if (
            o.package is not None
            or o.is_delete()
            or o.is_add()
            or o.is_force_add()
            or key.startswith("hydra")
        ):
            continue
        if "." not in key and os.path.isdir(os.path.join(CONF, key)):
            continue  # a config group's option: group_choice_problem's
        if problem := unknown_key_problem(key, (o.input_line or "").partition("=")[2], parsed):
            return problem
        if o.is_sweep_override():
            if not isinstance(o.value(), ChoiceSweep):
                continue  # range, interval and glob sweeps are Hydra's
            values = list(o.value().list)  # parsed: null is None, as Hydra reads it
        else:
            values = [o.value()]
        text = (o.input_line or "").partition("=")[2]
        given = given_values(parsed)  # the options picked: what a rewritten value needs beside it
        parts = text.split(",") if o.is_sweep_override() else [text]
        typed = (
            parts
            if len(parts) == len(values) and "[" not in text and "{" not in text
            else [None] * len(values)
        )
        for schema, option in key_schemas(parsed, key):
            path = key.partition(".")[2] if option else key  # an option's schema is the group's node
            parent_key, _, leaf = path.rpartition(".")
            parent = OmegaConf.select(schema, parent_key) if parent_key else schema
            if not OmegaConf.is_dict(parent) or leaf not in parent:
                continue
            node = parent._get_node(leaf)
            for value, written in zip(values, typed, strict=True):
                if "${" in str(value):
                    continue
                if problem := _value_problem(key, value, node, option, written, given):
                    return problem
    return None
