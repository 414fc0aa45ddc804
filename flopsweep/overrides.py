"""Refusals of a command line before Hydra starts (``run.py``), torch-free: each function takes the
overrides as typed and returns one line (``Invalid config: ...``), or None when it has nothing to say.

These are the overrides whose Hydra error is a traceback, a message that does not say what to do, or
silence: a config group given ``null`` or a list (:func:`group_choice_problem`), a sweeper whose
package is not installed (:func:`sweeper_extra_problem`), a ready-made sweep whose file sets a key
of an option the command line replaces (:func:`preset_option_keys`), and a value a typed key cannot
take: another type, ``null`` where it is not optional, a list for one value, one value for a list, a
value for a section, in the schema or the picked option's (:func:`type_problem`; each value's line is
:func:`flopsweep.override_values.value_problem`'s). Imported by ``run.py``, :mod:`flopsweep.flags`,
:mod:`flopsweep.cli`, :mod:`flopsweep.hydra_keys` (the names of :mod:`flopsweep.override_schema` it hands
on) and the conf and sweep files' checks; the refusals of a sweep's values stand in
:mod:`flopsweep.override_sweeps`.
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
    ``{a: 1}``, a path through ``.`` or ``..`` (``+sweep=../conf/config``: Hydra's 12 lines, or another
    option's file read under this name), or, for a group of ``conf/`` other than Hydra's own, a name
    without its YAML file), else None. An interpolation is left to Hydra."""
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
    if any(part in ("", ".", "..") for part in stem.split("/")):  # ../conf/config, ./smoke: a path, no name
        return value
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
    case alone (``precision=BF16``: ``options are case-sensitive``) or in a letter read as a digit
    (``model=llama3.2-lb``: :func:`flopsweep.lookalike.misread`)."""
    from flopsweep.choices import near_name
    from flopsweep.config import synonym as synonym_of  # another word for an option (gpu: cuda)
    from flopsweep.lookalike import ascii_lookalike, misread
    from flopsweep.override_parsing import parsed_or_none
    from flopsweep.override_schema import sweep_values

    conf = CONF
    for text in overrides:
        if "=" not in text or text.startswith("-"):
            continue
        if (o := parsed_or_none(text)) is None:  # Hydra reports its own syntax errors
            continue
        group = o.key_or_group
        if not group.strip("/"):  # ``=3``: the conf folder itself passed for a group, every option listed
            return (
                f"Invalid config: {text}: an override names its key before '='. "
                "Fix: write KEY=VALUE, e.g. steps.measure=3."
            )
        if o.is_delete() or not (group.startswith("hydra/") or os.path.isdir(os.path.join(conf, group))):
            continue
        values = sweep_values(o)  # a choice's or a range's (precision=range(1,3)); a glob: Hydra's
        shown = next((b for v in values if (b := _not_an_option(group, v)) is not None), None)
        if shown is None:
            continue
        names = shown_options(group)
        defaults = read_conf_yaml(os.path.join(conf, "config.yaml")).get("defaults") or []
        chosen = {k: v for d in defaults if isinstance(d, dict) for k, v in d.items()}
        example = chosen.get(group) if chosen.get(group) in names else (names or ["NAME"])[0]
        near = near_name(shown, names)  # case aside: precision=BF16 names bf16
        example = near or ("smoke" if group == "sweep" and "smoke" in names else example)  # runs on a CPU
        runs = _cpu_options(group, names) if _gives_cpu(overrides) else names
        cuda_only = ""  # attention=flash device=cpu: sdpa-flash is refused on the CPU, sdpa is not
        if example not in runs and runs:
            cuda_only = f" ({example}, the nearest name, needs CUDA)" if near else ""
            example = chosen.get(group) if chosen.get(group) in runs else runs[0]  # the default: sdpa
        case = (near, "options are case-sensitive") if near and near.lower() == shown.lower() else None
        case = case or ((near, f"its name here is {near}") if near and synonym_of(shown, names) else None)
        plus = "+" if text.startswith("+") or ("/" not in group and group not in chosen) else ""
        slip = misread(shown, [near]) if near else None  # model=llama3.2-lb: an l for a 1
        if look := ascii_lookalike(shown, names) or slip or case:  # llama-tinу (Cyrillic у), BF16: the option
            meant = (
                text.replace(shown, look[0], 1)
                if o.is_sweep_override()
                else f"{text.partition('=')[0]}={look[0]}"
            )
            said = f"{shown} is no option of {group}: {look[1]}"
            return f"Invalid config: {text}: {said}. Fix: did you mean {meant}?"
        example += cuda_only
        swept = any(a == "-m" or (len(a) > 3 and "--multirun".startswith(a)) for a in overrides)  # --multi
        multi = "-m " if group == "sweep" and not swept else ""  # a sweep file runs under -m
        pick = f"pick one of {', '.join(names)}, e.g. {multi}{plus}{group}={example}"
        pick = pick if names else "name one option"
        several = "" if group.startswith("hydra/") or plus else f" (several, one job each: -m {group}=a,b)"
        return (
            f"Invalid config: {text}: {shown} is no option of {group} (a config group takes one option "
            f"name). Fix: {pick}{several}."
        )
    return None


def _gives_cpu(overrides: list[str]) -> bool:
    """Whether the command line sets ``device=cpu`` (one value, not a sweep)."""
    return any(t.lstrip("+").partition("=")[::2] == ("device", "cpu") for t in overrides)


def _cpu_options(group: str, names: list[str]) -> list[str]:
    """The ``names`` of ``attention`` or ``precision`` that run on the CPU
    (:data:`flopsweep.attention.KERNELS`' and :data:`flopsweep.precision.PRECISIONS`' ``devices``); every
    name for another group, or one the tables lack."""
    if group == "attention":
        from flopsweep.attention import KERNELS as specs
    elif group == "precision":
        from flopsweep.precision import PRECISIONS as specs
    else:
        return names
    return [n for n in names if n not in specs or "cpu" in specs[n].devices]


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
    from flopsweep.options import GROUP_BASES, owners
    from flopsweep.override_parsing import is_override, parsed_or_none
    from flopsweep.override_schema import kinds_said

    presets: list[str] = []
    chosen: dict[str, list[str]] = {}
    for text in overrides:
        # None: not KEY=VALUE, or one Hydra refuses (it reports its own syntax errors)
        o = parsed_or_none(text) if is_override(text) else None
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
    if (
        parent and parent not in known
    ):  # a section's typo: the key under the nearest section, else the section
        from flopsweep.near_keys import ranked

        head, _, rest = key.partition(".")
        sections = sorted({k.partition(".")[0] for k in known if "." in k})
        for near in ranked(head, sections, 1):
            if f"{near}.{rest}" in known:
                fix = suggestion(f"{near}.{rest}", parsed, value)
                return (
                    f"Invalid config: {key if value is None else f'{key}={value}'}: no such key. Fix: {fix}"
                )
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
    the fix's example; a range's values too (``seed=range(1.5,3.5,0.5)``). Interpolations, intervals,
    globs and keys no schema has are Hydra's.
    """
    from hydra.core.override_parser.types import RangeSweep
    from omegaconf import OmegaConf

    from flopsweep.key_needs import given_values
    from flopsweep.override_parsing import parsed_overrides, sets_config_key
    from flopsweep.override_schema import sweep_values
    from flopsweep.override_values import value_problem

    if (parsed := parsed_overrides(overrides)) is None:  # Hydra reports its own syntax errors
        return None
    for o in parsed:
        key = o.key_or_group
        if not sets_config_key(o) or o.is_add() or o.is_force_add():
            continue
        if "." not in key and os.path.isdir(os.path.join(CONF, key)):
            continue  # a config group's option: group_choice_problem's
        if problem := unknown_key_problem(key, (o.input_line or "").partition("=")[2], parsed):
            return problem
        values = sweep_values(o)  # parsed: null is None, as Hydra reads it; a range's too (range(1.5,3))
        text = (o.input_line or "").partition("=")[2]
        given = given_values(parsed)  # the options picked: what a rewritten value needs beside it
        parts = text.split(",") if o.is_sweep_override() else [text]
        typed = (
            parts
            if len(parts) == len(values)
            and ("[" not in text or not o.is_sweep_override())  # a list as typed: [null,1e30]
            and ("{" not in text or not o.is_sweep_override())
            and not isinstance(o.value(), RangeSweep)
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
                if problem := value_problem(key, value, node, option, written, given):
                    return problem
    return None
