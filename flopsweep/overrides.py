"""Refusals of a command line before Hydra starts (``run.py``), torch-free: each function takes the
overrides as typed and returns one line (``Invalid config: ...``), or None when it has nothing to say.

These are the overrides whose Hydra error is a traceback, a message that does not say what to do, or
silence: a config group given ``null`` or a list (:func:`group_choice_problem`), a sweeper whose
package is not installed (:func:`sweeper_extra_problem`), and a ready-made sweep whose file sets a key
of an option the command line replaces (:func:`preset_option_keys`).
"""

from __future__ import annotations

import os
import re

import yaml

CONF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
"""The checkout's Hydra config directory (``conf/``)."""
MAX_YAML_BYTES = 1 << 20
"""The most of an option or sweep file read (the checkout's own files are a few KiB)."""


def _yaml(path: str) -> dict:
    """The mapping of a YAML file of ``conf/`` (``yaml.safe_load``: plain values, no objects built);
    empty for a file that holds something else."""
    with open(path, encoding="utf-8") as f:
        node = yaml.safe_load(f.read(MAX_YAML_BYTES))
    return node if isinstance(node, dict) else {}


def option_kind(group: str, option: str) -> str:
    """The registry key behind a YAML option (``backend/zero3`` -> ``deepspeed``, ``model/gpt-tiny``
    -> ``gpt2``): its schema node's ``base_<kind>`` (``/schema/<group>/base_<kind>@_here_``), the
    option it extends, or its ``name``."""
    path = os.path.join(CONF, group, f"{option}.yaml")
    if not os.path.exists(path):
        return option
    node = _yaml(path)
    for entry in node.get("defaults") or []:
        name = entry.partition("@")[0].rpartition("/")[2] if isinstance(entry, str) else ""
        if name.startswith("base_"):
            return name.removeprefix("base_")
        if isinstance(entry, str) and entry != "_self_":
            return option_kind(group, entry)
    return str(node.get("name", option))


def group_choice_problem(overrides: list[str]) -> str | None:
    """One line for a config group given no single option name, else None: ``backend=null`` (Hydra
    stops with a ``ValueError`` traceback), ``backend=[fsdp,ddp]`` (Hydra merges both options into
    one node and runs that, unasked), or such a value among a sweep's (``-m backend=fsdp,null``).
    The fix lists the group's options (its YAML files in ``conf/``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

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
        if o.is_delete() or not (group.startswith("hydra/") or os.path.isdir(os.path.join(conf, group))):
            continue
        value = o.value()
        values = list(getattr(value, "list", None) or []) if o.is_sweep_override() else [value]
        bad = next((v for v in values if v is None or isinstance(v, list)), "")  # a dict: Hydra's message
        if bad == "":
            continue
        folder = os.path.join(conf, group)
        listed = os.listdir(folder) if os.path.isdir(folder) else []
        names = sorted(n.removesuffix(".yaml") for n in listed if n.endswith(".yaml"))
        defaults = _yaml(os.path.join(conf, "config.yaml")).get("defaults") or []
        chosen = {k: v for d in defaults if isinstance(d, dict) for k, v in d.items()}
        example = chosen.get(group) if chosen.get(group) in names else (names or ["NAME"])[0]
        pick = f"pick one of {', '.join(names)}, e.g. {group}={example}" if names else "name one option"
        several = "" if group.startswith("hydra/") else f" (several, one job each: -m {group}=a,b)"
        shown = "null" if bad is None else "[" + ",".join(map(str, bad)) + "]"
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


def preset_option_keys(overrides: list[str]) -> str | None:
    """One line for a ready-made sweep (``+sweep=P``) whose file sets a key of one option of a group
    (in its body or its sweeper's params: ``attention.block_size`` of ``attention=blocksparse``)
    while the command line picks another option of that group (``attention=sdpa``), else None.
    Hydra would stop composing with "Key 'block_size' not in 'AttentionConfig'" and no word of the
    sweep file. (A sweep file keeps an option's own knobs in an option file of their own where it
    can, as ``batch=auto/max16`` does, so that another option replaces them.)"""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from flopsweep.options import GROUP_BASES, owners

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
        values = [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [str(o.value())]
        if o.key_or_group == "sweep":
            presets += [v for v in values if re.fullmatch(r"[\w.-]+", v)]
        elif o.key_or_group in GROUP_BASES:
            chosen[o.key_or_group] = values
    for preset in presets:
        path = os.path.join(CONF, "sweep", f"{preset}.yaml")
        if not os.path.isfile(path):
            continue  # Hydra names the options
        node = _yaml(path)
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
                names = " or ".join(f"{group}={name}" for name in own)
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
}


def type_problem(overrides: list[str]) -> str | None:
    """One line for an override whose value the schema's typed key cannot take (``steps.measure=abc``,
    ``seed=1.5``, ``parallel.cp=two``, ``optim.lr=fast``; each value of a choice sweep too), else None.

    Hydra would refuse it as well, but in a five-line block ("Error merging override ... could not be
    converted to Integer", ``full_key``, ``reference_type``) without a fix. Only the keys of
    :class:`flopsweep.config.RunConfig` outside the option groups (``model.*``, ``backend.*``, ...:
    their schema is the option's) are checked here; interpolations and range sweeps are Hydra's.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from flopsweep.config import RunConfig
    from flopsweep.options import GROUP_BASES

    overrides = [o for o in overrides if "=" in o and not o.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - Hydra reports its own syntax errors
        return None
    schema = OmegaConf.structured(RunConfig)
    for o in parsed:
        key = o.key_or_group
        parent_key, _, leaf = key.rpartition(".")
        if (
            o.package is not None
            or o.is_delete()
            or key.split(".")[0] in GROUP_BASES
            or key.startswith("hydra")
        ):
            continue
        parent = OmegaConf.select(schema, parent_key) if parent_key else schema
        node = parent._get_node(leaf) if OmegaConf.is_dict(parent) and leaf in parent else None
        kind = _KINDS.get(type(node).__name__)
        if kind is None:
            continue
        if o.is_sweep_override():
            if not o.is_choice_sweep():
                continue
            values = list(o.sweep_string_iterator())
        else:
            values = [o.value()]
        for value in values:
            if value is None or "${" in str(value):
                continue
            try:
                node.validate_and_convert(value)
            except Exception:  # noqa: BLE001 - omegaconf's ValidationError and its kin
                shown = repr(value) if isinstance(value, str) else str(value)
                default = node._value()  # the schema's default, the example of the fix
                example = (
                    kind[1]
                    if default is None
                    else str(default).lower()
                    if default in (True, False)
                    else default
                )
                its = " (its default)" if default is not None else ""
                fix = f"set {key} to {kind[0]}, e.g. {key}={example}{its}"
                return f"Invalid config: {key}={shown}: is not {kind[0]}. Fix: {fix}."
    return None
