"""``hydra.*`` keys that no schema has: a typo of a sweeper's or launcher's key
(``hydra.sweeper.inital=3`` under ``hydra/sweeper=tune``), a key of another sweeper or launcher than
the one picked (``hydra.sweeper.eta=3`` with the basic sweeper, ``hydra.launcher.timeout_min=5``
with the basic launcher), or of Hydra's own sections (``hydra.job.chdri=true``); and a basic
sweeper's ``params`` or ``max_batch_size`` that its code cannot take (``params=5``,
``max_batch_size=-1``: tracebacks). One line each, before Hydra starts (``run.py``'s
:func:`refusal`, exit 2).

Hydra refuses them too, in six to eight lines ("Could not override 'hydra.sweeper.inital'. To
append to your config use +hydra.sweeper.inital=3", ``Key 'inital' is not in struct``,
``full_key``, ``object_type=dict``), without the key meant or the option it belongs to.

The keys of a sweeper or launcher are its YAML's (``conf/hydra/sweeper/tune.yaml``, the Slurm
plug-in's ``conf/hydra/launcher/slurm.yaml``) and those of the schema it extends (Hydra's
``BasicSweeperConf``, hydra-submitit-launcher's ``SlurmQueueConf``); one whose schema is not known
here (``optuna_objective``, a plug-in of another package) is left to Hydra. Hydra's own sections are
its ``HydraConf`` dataclasses; a section typed as a plain mapping (``hydra.job.env_set``,
``hydra.callbacks``) takes any key. Torch-free.
"""

from __future__ import annotations

import functools
import os
import shlex
from typing import Any

from flopsweep.override_multirun import split_choices
from flopsweep.override_parsing import override_key, overrides_of, split_override
from flopsweep.overrides import CONF, NEVER_SUGGESTED, near_names

_PLUGIN_CONF = os.path.join(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "hydra_plugins", "flopsweep_slurm", "conf"
)

DEFAULT_CHOICE = {"sweeper": "basic_batched", "launcher": "basic"}
"""The option conf/config.yaml (or Hydra) picks when the command line picks none."""


def _schema(name: str) -> type | None:
    """The dataclass a sweeper's or launcher's YAML extends, by its defaults entry (``basic``,
    ``submitit_slurm``, ``submitit_local``, ``flopsweep_local_base``), else None (not known here)."""
    try:
        if name == "basic/sweeper":
            from hydra._internal.core_plugins.basic_sweeper import BasicSweeperConf as conf
        elif name == "basic/launcher":
            from hydra._internal.core_plugins.basic_launcher import BasicLauncherConf as conf
        elif name == "submitit_slurm/launcher":
            from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf as conf
        elif name == "submitit_local/launcher":
            from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf as conf
        elif name == "flopsweep_local_base/launcher":  # slurm_local's (the Slurm plug-in's ConfigStore)
            from flopsweep.slurm import LocalConf as conf
        else:
            return None
    except ImportError:
        return None
    return conf


def _schema_keys(name: str) -> set[str] | None:
    """The fields of :func:`_schema`'s dataclass, else None."""
    from omegaconf import OmegaConf

    conf = _schema(name)
    return None if conf is None else set(OmegaConf.structured(conf).keys())


@functools.cache
def _option_yaml(kind: str, option: str) -> dict | None:
    """The YAML of ``hydra/<kind>=<option>`` (flopsweep's or the Slurm plug-in's), else None."""
    import yaml

    for folder in (CONF, _PLUGIN_CONF):
        path = os.path.join(folder, "hydra", kind, f"{option}.yaml")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return yaml.safe_load(f.read(1 << 20)) or {}
    return None


def _option_schema(kind: str, option: str) -> type | None:
    """The dataclass that types ``hydra/<kind>=<option>``'s keys: its own, or its YAML's base."""
    if (conf := _schema(f"{option}/{kind}")) is not None:
        return conf
    data = _option_yaml(kind, option) or {}
    bases = [e for e in data.get("defaults") or [] if isinstance(e, str) and e != "_self_"]
    return _schema(f"{bases[0]}/{kind}") if len(bases) == 1 else None


_KINDS = {"IntegerNode": "a whole number", "FloatNode": "a number", "BooleanNode": "true or false"}
"""What a typed node takes, by its OmegaConf node type, for the refusal's words."""


def _typed_value_problem(kind: str, option: str, key: str, text: str) -> str | None:
    """One line for a value that the typed key of the option's schema cannot take
    (``hydra.launcher.timeout_min=abc`` under Slurm: Hydra's six-line merge error), else None; the
    fix's example is the option's YAML value, else the schema's default."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    conf = _option_schema(kind, option)
    if conf is None:
        return None
    node = OmegaConf.structured(conf)
    if key not in list(node.keys()):
        return None
    value = _literal_value(text)
    if value is _UNREAD:
        return None
    try:
        node[key] = value
    except OmegaConfBaseException:
        child = node._get_node(key)
        field, name = type(child).__name__, f"hydra.{kind}.{key}"
        example = (_option_yaml(kind, option) or {}).get(key)
        if example is None or "${" in str(example):
            default = child._value() if field in _KINDS else None
            example = None if default in (None, "???") else default
        if field in _KINDS:
            what = f"is not {_KINDS[field]}"
            if isinstance(value, bool):  # timeout_min=true: "is not a whole number" read as a number's fault
                what = f"is a boolean, not {_KINDS[field]}"
                if kind == "launcher" and key in POSITIVE_LAUNCHER_KEYS:
                    what += f" ({POSITIVE_LAUNCHER_KEYS[key][0]})"
            shown = str(example).lower() if isinstance(example, bool) else example
            fix = (
                f"set {name}={shown} (hydra/{kind}={option}'s)"
                if example is not None
                else f"set {name} to {_KINDS[field]}"
            )
        elif OmegaConf.is_list(child):
            what, fix = "is not a list", f"write a list, e.g. {name}=[a,b]"
        else:
            what, fix = "is not one text value", f"quote it as one string, e.g. '{name}=\"...\"'"
        return f"Invalid config: {text}: {what}. Fix: {fix}, or drop the override."
    if (
        kind == "launcher"
        and key in POSITIVE_LAUNCHER_KEYS
        and isinstance(value, int | float)
        and not value > 0
    ):
        what, fallback = POSITIVE_LAUNCHER_KEYS[key]
        example = (_option_yaml(kind, option) or {}).get(key)
        example = example if isinstance(example, int | float) and example > 0 else fallback
        fix = f"set hydra.launcher.{key}={example}, or drop the override"
        return f"Invalid config: {text}: {what} must be above 0. Fix: {fix}."
    return None


POSITIVE_LAUNCHER_KEYS = {
    "timeout_min": ("each job's time limit in minutes", 60),
    "mem_gb": ("each job's memory in GB", 64),
}
"""Launcher keys whose value must be above 0, with the fix's value where the option's YAML gives none: a
``timeout_min=0`` Slurm job ended without a result (``JobLost``), each recorded as an error after the sweep
waited (a re-trial, session 35); ``mem_gb=-1`` was taken as given."""


@functools.cache
def option_keys(kind: str, option: str) -> frozenset[str] | None:
    """The top-level keys ``hydra.<kind>.KEY`` of ``hydra/<kind>=<option>`` (kind ``sweeper`` or
    ``launcher``), or None when its schema is not known here."""
    if (found := _schema_keys(f"{option}/{kind}")) is not None:
        return frozenset(found)
    data = _option_yaml(kind, option)
    if data is None:
        return None
    keys = {k for k in data if k != "defaults"}
    for entry in data.get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            base = _schema_keys(f"{entry}/{kind}")
            if base is None:
                return None
            keys |= base
    return frozenset(keys)


def _options(kind: str) -> list[str]:
    """flopsweep's options of ``hydra/<kind>`` and Hydra's basic one."""
    names = {"basic"}
    for folder in (CONF, _PLUGIN_CONF):
        path = os.path.join(folder, "hydra", kind)
        if os.path.isdir(path):
            names |= {f[: -len(".yaml")] for f in os.listdir(path) if f.endswith(".yaml")}
    return sorted(names)


MAPPING_EXAMPLES = {
    "hydra.sweeper.params": "-m 'seed=0,1', or seed: 0,1 under a sweep file's hydra.sweeper.params"
}
"""The example of a mapping-valued key of a sweeper or launcher, as a "did you mean" shows it (a
mapping takes no plain value: :func:`_sweeper_value_problem`)."""


def _shown_key(kind: str, option: str, name: str) -> str:
    """``name`` (``hydra.sweeper.params``) as a "did you mean" names it: a key of one value as it is; a
    mapping-valued key (its schema's field a ``Dict``) in the form it takes, one entry at a time
    (``hydra.sweeper.params.KEY=VALUES``, its example a sweep file's or ``-m seed=0,1``: Hydra sweeps
    no ``hydra.*`` key of the command line, :func:`hydra_sweep_problem`), since ``KEY=VALUE``
    of the typo would be refused in turn."""
    from omegaconf import DictConfig, OmegaConf

    conf = _option_schema(kind, option)
    leaf = name.rpartition(".")[2]
    try:
        node = OmegaConf.structured(conf)._get_node(leaf) if conf is not None else None
    except Exception:  # noqa: BLE001 - a schema this cannot read: the name as it is
        node = None
    if not isinstance(node, DictConfig):
        return name
    example = MAPPING_EXAMPLES.get(name, f"'{name}.KEY=VALUE'")
    return f"{name}.KEY=VALUES (a mapping, set one entry at a time, e.g. {example})"


def _plugin_key_problem(kind: str, option: str, key: str, override: str) -> str | None:
    known = option_keys(kind, option)
    if known is None or key in known:
        return None
    owners = [o for o in _options(kind) if o != option and key in (option_keys(kind, o) or ())]
    picked = f"hydra/{kind}={option}"
    if owners:
        names = " or ".join(f"hydra/{kind}={o}" for o in owners)
        return (
            f"Invalid config: {override}: hydra.{kind}.{key} belongs to {names}, not to {picked} "
            f"(the {kind} this command line runs). Fix: add {names.split(' or ')[0]}, or drop the override."
        )
    keys = sorted(k for k in known if not k.startswith("_") and f"hydra.{kind}.{k}" not in NEVER_SUGGESTED)
    close = [_shown_key(kind, option, name) for name in near_names(key, keys, f"hydra.{kind}.")]
    fix = f"did you mean {' or '.join(close)}?" if close else f"{picked} takes {', '.join(keys)}."
    if not close:  # a near key of another option only: named with it (timeout_mn on the basic launcher)
        others = {k: o for o in _options(kind) if o != option for k in sorted(option_keys(kind, o) or ())}
        if near := near_names(key, [k for k in others if not k.startswith("_")], f"hydra.{kind}.", n=1):
            owner = f"hydra/{kind}={others[near[0].rpartition('.')[2]]}"
            fix = f"did you mean {near[0]}? It is a key of {owner}: pick {owner} to set it."
        elif not keys:
            fix = "drop the override."
        fix = fix if keys or near else f"{picked} takes no keys: {fix}"
    return f"Invalid config: {override}: {picked} has no key {key}. Fix: {fix}"


def _hydra_section_problem(path: list[str], override: str) -> str | None:
    """A key of Hydra's own typed sections (``hydra.job.chdri``) that its dataclass lacks."""
    from hydra.conf import HydraConf
    from omegaconf import DictConfig, OmegaConf

    node = OmegaConf.structured(HydraConf)
    for depth, name in enumerate(path):
        if not isinstance(node, DictConfig) or not OmegaConf.is_config(node):
            return None
        kind = OmegaConf.get_type(node)
        if kind is dict or kind is None:  # a plain mapping takes any key
            return None
        if name not in list(node.keys()):  # `in` misses a field still MISSING (job_logging)
            here = "hydra." + ".".join(path[:depth]) if depth else "hydra"
            keys = [str(k) for k in node.keys() if f"{here}.{k}" not in NEVER_SUGGESTED]
            close = near_names(name, keys, f"{here}.")
            fix = f"did you mean {' or '.join(close)}?" if close else f"{here} takes {', '.join(keys)}."
            return f"Invalid config: {override}: {here} has no key {name}. Fix: {fix}"
        node = node._get_node(name)
    return _section_value_problem(node, "hydra." + ".".join(path), override)


def _section_value_problem(node: Any, name: str, override: str) -> str | None:
    """One line for a value that a typed key of Hydra's own sections cannot take
    (``hydra.job.chdir=maybe``: Hydra's seven-line merge error, "Value 'maybe' is not a valid bool"),
    else None; the fix's example is the key's default."""
    from omegaconf.errors import OmegaConfBaseException

    field = type(node).__name__
    if field not in _KINDS:
        return None
    value = _literal_value(override)
    if value is _UNREAD:
        return None
    try:
        node.validate_and_convert(value)
    except OmegaConfBaseException:
        default = node._value()
        shown = str(default).lower() if isinstance(default, bool) else default
        example = f"e.g. {name}={shown} (Hydra's default), " if default not in (None, "???") else ""
        what = _KINDS[field]
        fix = f"set {name} to {what}, {example}or drop the override"
        return f"Invalid config: {override}: is not {what}. Fix: {fix}."
    return None


BATCHING_SWEEPERS = ("basic", "basic_batched", "tune")
"""The sweepers built on Hydra's ``BasicSweeper``, whose ``params`` and ``max_batch_size`` it reads
unchecked (an ``AttributeError`` or ``AssertionError`` traceback for a wrong one)."""


def _sweeper_value_problem(key: str, text: str) -> str | None:
    """One line for ``hydra.sweeper.params`` or ``max_batch_size`` of a basic sweeper that its code
    cannot take: ``params`` other than null (``params=5``: Hydra's merge error, or under the tuner an
    ``AttributeError``; a mapping ``params={seed:'0,1'}``: OmegaConf's 45-line merge traceback, since
    the default is null), ``max_batch_size`` not a whole number of at least 1 (``-1``: an
    ``AssertionError``)."""
    value = _literal_value(text)
    if value is _UNREAD:
        return None
    if key == "params" and value is not None:
        return (
            f"Invalid config: {text}: hydra.sweeper.params is set one axis at a time, not as a whole. "
            "Fix: give each axis as hydra.sweeper.params.KEY=VALUES in a sweep file (conf/sweep/), "
            "or sweep it on the command line (-m seed=0,1)."
        )
    if (
        key == "max_batch_size"
        and value is not None
        and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1)
    ):
        return (
            f"Invalid config: {text}: the jobs launched at once must be a whole number of at least 1. "
            "Fix: drop it (flopsweep sets it: every job at once, 1 under fail_fast=true), or set e.g. "
            "hydra.sweeper.max_batch_size=4."
        )
    return None


def hydra_key_problem(argv: list[str]) -> str | None:
    """One line for the first ``hydra.*`` override whose key the picked sweeper, the picked launcher
    or Hydra's own schema lacks (see the module doc), else None; first, a sweep of a ``hydra.*`` key
    (:func:`hydra_sweep_problem`). ``+hydra.sweeper.KEY=``/``++`` and the launcher's are held to the
    picked option's keys (``+hydra.sweeper.foo=1``: Hydra's ``TypeError`` from the sweeper's
    constructor, "unexpected keyword argument 'foo'"), one ``+`` of a key it has is refused as
    ``+`` of any existing key; ``~`` overrides, ``+`` keys of Hydra's own sections, a ``+sweep=``
    file (it may pick a sweeper) and another primary config (``--config-name``) are Hydra's."""
    if problem := hydra_sweep_problem(overrides_of(argv)):  # whatever the config: Hydra sweeps none
        return problem
    if any(a in ("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir") for a in argv) or any(
        a.startswith(("--config-name=", "--config-path=", "--config-dir=")) for a in argv
    ):
        return None
    overrides = overrides_of(argv)
    picked = dict(DEFAULT_CHOICE)
    for text in overrides:
        _, key, value = split_override(text)
        if key in ("sweep",):
            return None
        if key in ("hydra/sweeper", "hydra/launcher"):
            picked[key.partition("/")[2]] = value.strip().strip("'\"")
    for text in overrides:
        prefix, key, _ = split_override(text)
        added = prefix.startswith("+")  # +/++hydra.sweeper.KEY: the option's class takes no other key
        if "~" in prefix or "@" in key or not key.startswith("hydra."):
            continue
        path = key.split(".")[1:]
        if added and not (path[0] in picked and len(path) > 1):
            continue  # a key added to Hydra's own sections: Hydra's
        if path[0] in picked and len(path) > 1:
            problem = _plugin_key_problem(path[0], picked[path[0]], path[1], text)
            if added:  # the values are the option's class's to judge
                problem = problem or (
                    _added_existing_problem(path[0], picked[path[0]], path[1], text)
                    if len(path) == 2
                    else None
                )
                if problem:
                    return problem
                continue
            if (
                not problem
                and path[0] == "sweeper"
                and len(path) == 2
                and picked["sweeper"] in BATCHING_SWEEPERS
            ):
                problem = _sweeper_value_problem(path[1], text)
            if not problem and len(path) == 2:
                problem = _typed_value_problem(path[0], picked[path[0]], path[1], text)
        elif path[0] in picked:
            problem = None
        else:
            problem = _hydra_section_problem(path, text)
        if problem:
            return problem
    return None


def _added_existing_problem(kind: str, option: str, key: str, text: str) -> str | None:
    """One line for ``+hydra.<kind>.KEY=`` (one ``+``) whose key the picked option has already
    (``+hydra.sweeper.initial=2``: Hydra's "Could not append to config. An item is already at"),
    else None; ``++`` adds or sets."""
    if text.startswith("++") or key not in (option_keys(kind, option) or ()):
        return None
    fix = text.removeprefix("+")
    return f"Invalid config: {text}: hydra.{kind}.{key} already exists; + adds only new keys. Fix: {fix}"


POOL_LIST_KEYS = ("hydra.launcher.slots", "hydra.launcher.devices")
"""The pool's keys of a list of devices (``conf/hydra/launcher/pool.yaml``): ``slots=0,1`` meant ``[0,1]``."""


def _elements(value: str) -> list[str]:
    """A comma list's elements as typed, split at its top-level commas only (:func:`split_choices`):
    ``[0,1],[2]`` -> ``[0,1]``, ``[2]``; ``'a,b',c`` -> ``'a,b'``, ``c``; a bracket or quote left open:
    the value."""
    return [part.strip() for part in split_choices(value) or [value]]


def hydra_sweep_problem(overrides: list[str]) -> str | None:
    """One line for a sweep of a ``hydra.*`` key (a comma list, ``range()``, ``choice()``, ``glob()``,
    ``interval()``: ``hydra.sweeper.budget_gpu_s=1,2``), else None: Hydra sweeps only the job's
    config and stopped with "Sweeping over Hydra's configuration is not supported" and its
    ``HYDRA_FULL_ERROR`` hint, exit 1. The fix gives one value (a list's whole: ``[0,1],[2]`` -> ``[0,1]``,
    was ``[0``); for the pool's ``slots=0,1``, the list ``[0,1]``; for an axis of
    ``hydra.sweeper.params.KEY``, the sweep of ``KEY`` itself on the command line."""
    from flopsweep.override_parsing import parsed_or_none

    for text in overrides:
        if text.startswith("-") or "=" not in text or not override_key(text).startswith("hydra."):
            continue
        if (o := parsed_or_none(text)) is None:  # the grammar's own line comes first
            continue
        if o.is_delete() or not o.is_sweep_override():
            continue
        key, value = o.key_or_group, text.partition("=")[2]
        if key.startswith("hydra.sweeper.params.") and key.count(".") == 3:
            axis = key.rpartition(".")[2]
            fix = f"sweep {axis} itself on the command line: -m {axis}={value}"
        elif key in POOL_LIST_KEYS and o.is_choice_sweep() and "(" not in value and "[" not in value:
            ids = ",".join(_elements(value))  # slots=0,1: the pool's devices, one list
            fix = f"give the pool's devices as one list, {text.partition('=')[0]}=[{ids}]"
        else:
            sweep = o.value()
            first = "VALUE"
            comma_list = bool(getattr(sweep, "list", None)) and "(" not in value
            if comma_list:  # a comma list: its first as the grammar writes it
                first = next(iter(_elements(value)), "VALUE")
            elif getattr(sweep, "start", None) is not None:  # range(1,3): its start
                first = str(sweep.start)
            one = f"{text.partition('=')[0]}={first}"
            if "$" in one or _shell_split(one) != [one]:  # hydra.run.dir=a b: one shell word
                one = shlex.quote(one)
            fix = f"give one value, e.g. {one} (one sweep per value)"
            if comma_list and is_string_key(key):  # hydra.run.dir=out,x: a folder named out,x, quoted
                from flopsweep.shown_overrides import string_word

                whole = string_word(text.partition("=")[0], value)
                fix = (
                    f"quote the value for one {_string_what(key)} named {value}: {whole} (the outer quotes "
                    f"are the shell's), or {fix}"
                )
        return (
            f"Invalid config: {text}: Hydra sweeps the job's config only, not its own hydra.* keys. "
            f"Fix: {fix}."
        )
    return None


def _shell_split(text: str) -> list[str] | None:
    """``text`` as a POSIX shell splits it into words (no expansion), None where a quote is left open."""
    try:
        return shlex.split(text)
    except ValueError:
        return None


@functools.lru_cache(maxsize=64)
def is_string_key(key: str) -> bool:
    """Whether ``key`` (``hydra.run.dir``) is a string in Hydra's own schema (``HydraConf``: ``run.dir``,
    ``sweep.dir``, ``sweep.subdir``, ``output_subdir``, ``job.name``, ...): a comma there is more likely a
    character of a folder's or name's value (``hydra.run.dir=out,x``) than a sweep of it. False for any
    other key, one of a plug-in's section or a plain mapping's (``hydra.job.env_set.X``)."""
    from hydra.conf import HydraConf
    from omegaconf import OmegaConf

    node: Any = OmegaConf.structured(HydraConf)
    for name in key.removeprefix("hydra.").split("."):
        if not OmegaConf.is_config(node) or name not in list(node.keys()):
            return False
        node = node._get_node(name)
    return getattr(getattr(node, "_metadata", None), "ref_type", None) is str


def _string_what(key: str) -> str:
    """What a string key of Hydra's names, for its fix: ``folder`` for a ``dir`` or ``subdir``, else
    ``value``."""
    return "folder" if key.rpartition(".")[2] in ("dir", "subdir", "output_subdir") else "value"


def params_axis_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for one axis of ``hydra.sweeper.params`` set on the command line in a way Hydra cannot
    take, else None (a sweep of it is :func:`hydra_sweep_problem`'s):

    - with no sweep file's ``params`` picked (``+sweep=NAME``), ``hydra.sweeper.params`` is null, and
      ``hydra.sweeper.params.seed=3`` (``+``/``++``, empty, quoted) stopped Hydra with "AssertionError:
      Unexpected type for root: NoneType" in a traceback, ``~hydra.sweeper.params.seed`` with "Could not
      delete from config";
    - an axis given no value (``hydra.sweeper.params.backend=``, ``=null``): no job to run;
    - beside a sweep file, an axis it lacks without ``+`` ("Key 'seed' is not in struct", 7 lines), one it
      has with one ``+`` (Hydra: "Could not append to config"), or the delete of one it lacks.

    Another ``--config-name`` may give params: left to Hydra."""
    from flopsweep.conf_files import sweep_params
    from flopsweep.override_parsing import parsed_or_none

    if any(a.startswith(("-cn", "--config-name")) for a in argv):
        return None
    axes = None
    for text in overrides_of(argv) + [a for a in argv if a.startswith("~hydra.sweeper.params.")]:
        prefix, key, raw = split_override(text)
        axis = key.removeprefix("hydra.sweeper.params.")
        if not key.startswith("hydra.sweeper.params.") or "." in axis:
            continue
        if (o := parsed_or_none(text)) is None:  # the grammar's own line comes first
            continue
        if o.is_sweep_override():
            continue  # hydra_sweep_problem's
        if axes is None:
            axes = {pair.partition("=")[0]: shown for shown, pair in sweep_params(argv, conf)}
        value = raw.strip().strip("'\"")
        files = ", ".join(sorted(set(axes.values())))
        if o.is_delete():
            if axis in axes:
                continue
            where = f"{files} has no axis {axis}" if axes else "no sweep file (+sweep=NAME) gives axes"
            return f"Invalid config: {text}: {where}, so there is none to delete. Fix: drop it."
        if not value or value.lower() == "null":
            return (
                f"Invalid config: {text}: gives the sweep axis {axis} no value, so no job would run. "
                f"Fix: give its values, e.g. -m {axis}=VALUE1,VALUE2 on the command line, or drop it."
            )
        if not axes:
            return (
                f"Invalid config: {text}: hydra.sweeper.params is null without a sweep file's axes "
                f"(+sweep=NAME), so Hydra cannot set one in it (an AssertionError traceback). Fix: sweep "
                f"{axis} itself on the command line: -m {axis}={value}."
            )
        if axis not in axes and not prefix.startswith("+"):
            return (
                f"Invalid config: {text}: {files} has no sweep axis {axis} (its axes: "
                f"{', '.join(axes)}); Hydra adds a key only with +. Fix: +{text}."
            )
        if axis in axes and prefix == "+":
            return (
                f"Invalid config: {text}: {axis} is already an axis of {axes[axis]}; + adds only new keys. "
                f"Fix: {text.lstrip('+')}."
            )
    return None


_UNREAD = object()
"""What :func:`_literal_value` returns for an override it leaves to another check."""


def _literal_value(text: str) -> Any:
    """The value of the override ``text`` as Hydra's grammar reads it, or :data:`_UNREAD` when the
    grammar refuses it (its own one-line refusal comes first) or the value interpolates (``${...}``:
    resolved later, nothing to judge here)."""
    from flopsweep.override_parsing import parsed_or_none

    if (parsed := parsed_or_none(text)) is None:  # the grammar's own line comes first
        return _UNREAD
    value = parsed.value()
    return _UNREAD if isinstance(value, str) and "${" in value else value
