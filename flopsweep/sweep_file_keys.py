"""The keys and plain values of a sweep file (``+sweep=NAME``: ``conf/sweep/NAME.yaml``, package
``_global_``), checked before Hydra composes it, as the command line's own overrides are.

Hydra merges a sweep file's top-level keys into :class:`flopsweep.config.RunConfig` and answered a key it
does not know with a six-line ``ConfigKeyError`` block, exit 1: an unknown key (``bogus_key: 3``), a
block kept for YAML aliases (``base: &b {...}`` then ``<<: *b``), a config group given a value
(``backend: [fsdp, ddp]``, ``backend: fsdp``), a file without the ``# @package _global_`` line (its
keys read as ``sweep.*``: "Key 'sweep' not in 'RunConfig'"), a list or a scalar for the whole file.
Its plain values (``timeout_s: -5``, ``repeats: 0``) were checked only inside the job.

:func:`shape_problem` refuses the file's form and keys in one line (the file, the key, the value, the fix:
a "did you mean" of :func:`flopsweep.near_keys.suggestion`, a look-alike letter named by
:func:`flopsweep.lookalike.ascii_lookalike`); :func:`file_overrides` writes each plain value as the
override Hydra's grammar reads (``timeout_s=-5``), which ``run.py`` checks with the command line's own
checks (:func:`values_problem`). A key the command line gives itself, or an axis of the file's
``hydra.sweeper.params``, replaces the file's value and is not checked here. Torch-free.

Imported by ``run.py`` (its checks before Hydra) and :mod:`flopsweep.subdir_jobs` (:func:`file_overrides`).
The files are read with :mod:`flopsweep.sweep_file_read`; the ``hydra:`` block's folders and logs are
checked in :mod:`flopsweep.sweep_file_hydra`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable

import yaml

from flopsweep.conf_files import (
    picks_of,
    repeated_key_line,
    shown_path,
)
from flopsweep.override_schema import CONF, SAFE_LOADER
from flopsweep.space_values import BESIDE_SPACE_KEYS
from flopsweep.sweep_file_fix import as_the_file_writes, flow_comma_problem, in_file_form, merged_problem
from flopsweep.sweep_file_read import (
    file_text,
    override_value,
    plain_leaves,
    selected_data,
    sweep_files,
    yaml_value,
)

OWN_KEYS = ("defaults", "hydra")
"""A sweep file's top-level keys that are Hydra's, not :class:`flopsweep.config.RunConfig`'s."""

_KEY = re.compile(r"[A-Za-z_][\w-]*")
"""One part of a key as Hydra's override grammar reads it (``steps``, ``max_extra_warmup``)."""

_CLI_WORDS = "(a command-line override applies to every job of the sweep)"
"""How a check of the command line's says that a value is set in every job of a sweep
(``foreign_option_keys``): said of the file's sweep, the value is the file's or the command line's."""

_EXAMPLE = "conf/sweep/smoke.yaml"
"""The shipped sweep file a fix points to: the header line, a defaults list, plain keys and axes."""


def _package(text: str) -> tuple[str | None, str | None]:
    """The file's ``# @package`` (Hydra's own header reader, ``ConfigSource._get_header_dict``: the
    comment lines before the first other line), and the line refusing its header, if any."""
    from hydra.plugins.config_source import ConfigSource

    try:
        return ConfigSource._get_header_dict(text)["package"], None
    except ValueError as exc:
        return None, str(exc)


def _anchored_keys(text: str) -> dict[str, str]:
    """The top-level keys whose value carries a YAML anchor (``base: &b {...}``): key -> anchor name."""
    out: dict[str, str] = {}
    depth, position, key = 0, 0, ""
    try:
        for event in yaml.parse(text, Loader=SAFE_LOADER):
            if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            if depth == 1:
                if position % 2 == 0:
                    key = str(getattr(event, "value", ""))
                elif getattr(event, "anchor", None):
                    out[key] = event.anchor
                position += 1
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
    except yaml.YAMLError:
        return out
    return out


def _sections(known: frozenset[str]) -> set[str]:
    return {k.rpartition(".")[0] for k in known if "." in k}


def _dotted_key(data: dict, prefix: str = "") -> tuple[str, object] | None:
    """The first key of ``data``, at any depth, written with a dot (``steps.measure: 3``), with the
    keys above it (``a.b.c`` for ``a: {b.c: 1}``'s), and its value; else None."""
    for key, value in data.items():
        if "." in str(key):
            return f"{prefix}{key}", value
        if isinstance(value, dict) and (found := _dotted_key(value, f"{prefix}{key}.")):
            return found
    return None


def _nested(dotted: str, value: object) -> str:
    """``steps.measure`` and 3 as YAML's nesting: ``steps: {measure: 3}``."""
    parts = dotted.split(".")
    leaf = f"{parts[-1]}: {yaml_value(value)}"
    return "".join(f"{p}: {{" for p in parts[:-1]) + leaf + "}" * (len(parts) - 1)


def _group(key: str, conf: str) -> bool:
    return "." not in key and key != "hydra" and os.path.isdir(os.path.join(conf, key))


def _key_problem(key: str, value: object, anchor: str | None, conf: str) -> str | None:
    """Why the top-level ``key`` of a sweep file cannot stand there (the line after the file's name)."""
    from flopsweep.lookalike import ascii_lookalike
    from flopsweep.override_schema import known_keys, option_files
    from flopsweep.overrides import unknown_key_problem

    head = key.partition(".")[0]
    if _group(head, conf) and key == head and not isinstance(value, dict):
        shown = yaml_value(value)
        options = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        if isinstance(value, list):
            return (
                f"{key}: {shown}: a list of options is a sweep over them, and {key} is a config group (a "
                f"value here would be merged into its keys). Fix: sweep it under hydra.sweeper.params: "
                f"{key}: {','.join(options)} (as {_EXAMPLE})."
            )
        example = options[0] if options[0] in option_files(key) else "NAME"
        return (
            f"{key}: {shown}: {key} is a config group; a sweep file picks its option in its defaults list (a "
            f"value here would be merged into its keys). Fix: defaults: [override /{key}: {example}] (as "
            "conf/sweep/frontier-fsdp.yaml)."
        )
    known = known_keys()
    if key in known or key in OWN_KEYS or (key == head and _group(head, conf)):
        return None
    top = sorted({k.partition(".")[0] for k in known} | set(OWN_KEYS))
    if (alike := ascii_lookalike(head, top)) is not None:
        return f"{key}: {alike[1]}. Fix: write {alike[0]}{key[len(head) :]}."
    if anchor is not None and "." not in key:
        return (
            f"{key}: is no key of the config, and holds the YAML anchor &{anchor}: every top-level key of a "
            "sweep file (package _global_) is a config key, so is a block kept for aliases (*name, << "
            "merges). "
            f"Fix: drop {key}, and write its values under the keys that use them."
        )
    if problem := unknown_key_problem(key, yaml_value(value)):
        return problem.removeprefix("Invalid config: ")
    return None


def _own_keys_problem(data: dict) -> str | None:
    """Why the file's ``defaults`` (a list) or ``hydra`` (a mapping; its ``sweeper.params`` too) cannot
    be read, else None."""
    if "defaults" in data and not isinstance(data["defaults"], list):
        return (
            f"defaults: {yaml_value(data['defaults'])}: is a list of the options the file picks. Fix: "
            "defaults: [override /model: gpt-tiny] (one - override /GROUP: OPTION line each)."
        )
    hydra = data.get("hydra", {})
    sweeper = hydra.get("sweeper", {}) if isinstance(hydra, dict) else None
    params = sweeper.get("params", {}) if isinstance(sweeper, dict) else None
    for key, value in (("hydra", hydra), ("hydra.sweeper", sweeper), ("hydra.sweeper.params", params)):
        if not isinstance(value, dict) and value is not None:
            what = "a list" if isinstance(value, list) else "one value"
            return (
                f"{key}: {yaml_value(value)}: is {what}, not a mapping of keys. Fix: write a sweep's axes as "
                f"hydra: {{sweeper: {{params: {{KEY: VALUES}}}}}}, one KEY: a,b line each (as {_EXAMPLE})."
            )
        if value is None:
            break
    for key, value in params.items() if isinstance(params, dict) else ():
        if isinstance(value, dict) and value:  # Hydra's sweeper writes it as KEY={'k': 1}: no override
            dotted = plain_leaves({key: value}, "", {str(key)} | {f"{key}.{k}" for k in value})[0]
            return (
                f"hydra.sweeper.params: {key}: {yaml_value(value)}: an axis is one key and its values, not "
                f"a mapping (Hydra's sweeper writes it as {key}={value!r}, which its grammar cannot read). "
                f"Fix: write the key in full, one axis each: {dotted[0]}: {yaml_value(dotted[1])}."
            )
    return None


def shape_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line refusing a sweep file the command line selects for its form or a key, else None
    (``Invalid config: conf/sweep/NAME.yaml: ... Fix: ...``):

    - no ``# @package _global_`` line before its first key (or a header Hydra cannot read): its keys
      would be read as ``sweep.*``;
    - a list or a scalar in place of a mapping of keys;
    - a key given twice (Hydra's YAML reader refuses it);
    - a config group given a value (a list: a sweep, under ``hydra.sweeper.params``; one option: the
      defaults list);
    - a key no schema has: a look-alike letter named (``sееd``), a block kept for YAML anchors
      (``base: &b``), else the nearest keys (``steps.measur``: ``steps.measure``).
    """

    from flopsweep.override_schema import known_keys

    sections = _sections(known_keys()) | {g for g in os.listdir(conf) if _group(g, conf)}
    for path, data in sweep_files(selected_data(argv, conf), conf):
        shown, text = shown_path(path, conf), file_text(path)
        package, bad_header = _package(text)
        if bad_header:
            fix = "make its first line # @package _global_"
            return f"Invalid config: {shown}: its header: {bad_header}. Fix: {fix}."
        if package != "_global_":
            said = (
                f"has # @package {package}"
                if package
                else "has its # @package line after another line (Hydra reads the header from the first "
                "lines only, up to the first that is not one)"
                if "@package" in text
                else "has no # @package _global_ line before its keys"
            )
            return (
                f"Invalid config: {shown}: {said}, so Hydra would read its keys under "
                f"{package or 'sweep'}.* (Key '{package or 'sweep'}' not in 'RunConfig'). Fix: make "
                f"# @package _global_ its first line (as {_EXAMPLE})."
            )
        if data is None:
            continue  # an empty sweep file: nothing to merge
        if not isinstance(data, dict):
            what = "a list" if isinstance(data, list) else f"the one value {yaml_value(data)}"
            return (
                f"Invalid config: {shown}: holds {what}, not a mapping of keys. Fix: write KEY: VALUE lines "
                f"under the header, and a sweep's axes under hydra.sweeper.params (as {_EXAMPLE})."
            )
        if (twice := repeated_key_line(text, shown)) is not None:  # Hydra's reader: a key given twice
            if twice:
                return twice
            continue
        if problem := _own_keys_problem(data) or flow_comma_problem(text, shown):  # {x: 2,50}: a key 50
            return problem if problem.startswith("Invalid") else f"Invalid config: {shown}: {problem}"
        anchors = _anchored_keys(text)
        for key, value in data.items():
            if key in OWN_KEYS:
                continue
            if found := _dotted_key({key: value}):
                dotted, given = found
                return (
                    f"Invalid config: {shown}: {dotted}: {yaml_value(given)}: a YAML key with a dot is one "
                    f"key of that name to Hydra, not a nested one. Fix: nest it: {_nested(dotted, given)}."
                )
            for full, leaf in plain_leaves({key: value}, "", sections):
                if problem := _key_problem(str(full), leaf, anchors.get(str(key)), conf):
                    return f"Invalid config: {shown}: {problem}"
    return None


def without_m_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a ``+sweep=`` file whose ``hydra.sweeper.params`` sweeps a key the command line does
    not give itself, on a command line without ``-m``/``--multirun``, else None: Hydra runs one plain job
    and never reads the file's axes (``+sweep=mine`` of ``batch.micro_batch_size: 1,2,4`` ran one job of
    the schema's micro batch, exit 0; ``+sweep=smoke`` got the backend check's line, whose fix was
    another). A file of plain values only, a command line that gives every axis's key (a plan's best
    command), or one that only prints (``--cfg job``) is left alone. The line names the override, the
    file, its axes and the fix: ``Invalid config: +sweep=mine: conf/sweep/mine.yaml sweeps
    batch.micro_batch_size (hydra.sweeper.params), which only a multirun runs. Fix: add -m (flopsweep -m
    +sweep=mine).``"""
    from flopsweep.conf_files import sweep_params
    from flopsweep.flags import is_multirun, prints_only
    from flopsweep.override_parsing import override_key, overrides_of, split_override

    if is_multirun(argv) or prints_only(argv):
        return None
    overrides = overrides_of(argv)
    given = {override_key(o) for o in overrides}
    swept: dict[str, list[str]] = {}
    for shown, axis in sweep_params(argv, conf):
        if (key := override_key(axis)) not in given:
            swept.setdefault(shown, []).append(key)
    # sweep=NAME and ++sweep=NAME are group_prefix_problem's lines (+ forgotten, or one too many)
    picked = next((o for o in overrides if split_override(o)[:2] == ("+", "sweep")), None)
    if not swept or picked is None:
        return None
    shown, keys = next(iter(swept.items()))
    return (
        f"Invalid config: {picked}: {shown} sweeps {', '.join(keys)} (hydra.sweeper.params), which only a "
        f"multirun runs. Fix: add -m (flopsweep -m {picked})."
    )


def file_overrides(path: str, conf: str = CONF) -> list[str]:
    """Each plain value of the sweep file ``path`` as an override (``timeout_s=-5``, ``steps.measure=3``),
    read as Hydra reads the file (OmegaConf's YAML: ``1e3`` a number); the file's own keys
    (``defaults``, ``hydra``) left out. Empty for a file :func:`shape_problem` refuses."""
    from omegaconf import OmegaConf

    from flopsweep.override_schema import known_keys

    try:
        node = OmegaConf.create(file_text(path))
        data = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_dict(node) else None
    except Exception:  # noqa: BLE001 - shape_problem's line
        return []
    if not isinstance(data, dict):
        return []
    sections = _sections(known_keys()) | {g for g in os.listdir(conf) if _group(g, conf)}
    plain = {k: v for k, v in data.items() if k not in OWN_KEYS}
    raw = _scalar_texts(
        file_text(path)
    )  # a number YAML cannot hold (1e400: inf) is shown as the file writes it
    return [
        f"{key}={raw[key] if _as_written(value, raw.get(key)) else override_value(value)}"
        for key, value in plain_leaves(plain, "", sections)
    ]


def _as_written(value: object, text: str | None) -> bool:
    """``value`` is a number no float holds (inf, nan) and ``text``, the file's, a number Python and Hydra
    read as it (``1e400``; not YAML's ``.inf``, which Hydra's grammar does not take)."""
    if not isinstance(value, float) or math.isfinite(value) or text is None:
        return False
    try:
        return str(float(text)) == str(value)
    except ValueError:
        return False


def _scalar_texts(text: str) -> dict[str, str]:
    """Each scalar of a YAML mapping as the file writes it (``budget.tokens`` -> ``1e400``), by dotted key,
    read with OmegaConf's YAML loader; empty where the text does not compose."""
    from omegaconf._utils import get_yaml_loader

    out: dict[str, str] = {}
    try:
        todo = [(yaml.compose(text, Loader=get_yaml_loader()), "")]
    except yaml.YAMLError:
        return out
    while todo:
        node, prefix = todo.pop()
        if isinstance(node, yaml.MappingNode):
            todo += [(v, f"{prefix}{k.value}.") for k, v in node.value if isinstance(k, yaml.ScalarNode)]
        elif isinstance(node, yaml.ScalarNode) and prefix:
            out[prefix[:-1]] = str(node.value)
    return out


PRICE_AXES = ("plan_clusters", "cost.usd_per_gpu_hour", "budget.tokens")
"""Axes of a file's ``hydra.sweeper.params`` its plain values are checked with, as a command line's sweep
is: an ``objective:`` is priced by them (``plan_clusters: "[H100:8@2.5],[H200:8@3.5]"`` needs no
``cost.usd_per_gpu_hour``), and a bad price among them (``@1e400``) is named."""


def _checked_axis(key: str, conf: str) -> bool:
    return _group(key, conf) or key in PRICE_AXES or key in BESIDE_SPACE_KEYS


def values_problem(
    argv: list[str],
    checks: tuple[Callable[[list[str]], str | None], ...],
    conf: str = CONF,
    merged: tuple[Callable[[list[str]], str | None], ...] = (),
) -> str | None:
    """One line for a plain value of a selected sweep file that one of ``checks`` (the command line's
    own, each given a list of overrides) refuses, with the file named, else None. The file's values are
    checked after the options its defaults pick (``override /attention: blocksparse``) and before the
    command line (``argv``), whose own overrides passed these checks already; a key the command line
    or the file's ``hydra.sweeper.params`` gives is left out (it replaces the file's value). The axes that
    pick options, those of :data:`PRICE_AXES` and those of keys refused beside a space
    (:data:`flopsweep.space_values.BESIDE_SPACE_KEYS`: ``batch.micro_batch_size: 1,2,4``, ``parallel``)
    are checked with the file's values (an axis the command line gives is replaced, as Hydra's sweeper
    does); a file that sets one of those keys only by a pick or an axis (``override /backend: ddp``, no
    plain value) is checked too. A plain value the command line or the file's axis gives again still gets
    ``merged`` (Hydra merges it first); a file's refused value, its fix in the file's form
    (:mod:`flopsweep.sweep_file_fix`)."""
    from flopsweep.conf_files import params_of
    from flopsweep.override_parsing import override_key, overrides_of

    read = selected_data(argv, conf)  # once: each file is read and parsed once here
    axes = [o for path, data in read.items() for _, o in params_of(path, data, conf)]
    replaced = {override_key(o) for o in overrides_of(argv)} | {override_key(o) for o in axes}
    picks = [f"{g}={o}" for g, o in picks_of(read, conf) if g not in replaced]
    # the options the file's axes sweep (backend: ddp,fsdp) are picked too; +sweep= itself is no pick
    # (run.py's foreign_option_keys leaves a command line with one to Hydra)
    rest = [a for a in argv if override_key(a) != "sweep"]
    given = {
        override_key(o): o for o in overrides_of(argv)
    }  # an axis the command line gives is replaced (Hydra's)
    axes, own_axes = [a for a in axes if override_key(a) not in given], axes
    for path, _ in sweep_files(read, conf):
        shown, written = shown_path(path, conf), _scalar_texts(file_text(path))
        if found := merged_problem(file_overrides(path, conf), given, picks, merged, own_axes):
            said = as_the_file_writes(found[0].removeprefix("Invalid config: "), written)
            return in_file_form(f"Invalid config: {shown}: {said}", shown, replaced_by=found[1])
        own = [
            o
            for o in file_overrides(path, conf)
            # a key given again replaces the file's (a section: its keys), a group's option does not
            if not any(
                override_key(o) == k or (override_key(o).startswith(f"{k}.") and not _group(k, conf))
                for k in replaced
            )
        ]
        beside_space = any(override_key(o) in BESIDE_SPACE_KEYS for o in [*picks, *axes])
        if not own and not beside_space:
            continue
        for check in checks:
            if problem := check(
                [*picks, *[a for a in axes if _checked_axis(override_key(a), conf)], *own, *rest]
            ):
                said = problem.removeprefix("Invalid config: ")
                cli = next((a for a in rest if "=" in a and override_key(a) == said.partition(":")[0]), None)
                # the refused key's value is the command line's (every job of the file's sweep) or the file's
                words = f"(the command line's {cli} applies to each job of the file's sweep)" if cli else None
                said = said.replace(
                    _CLI_WORDS, words or "(the file's value applies to every job of the sweep)"
                )
                if cli:
                    return f"Invalid config: {shown}: {said}"
                axis = next(
                    (a for a in axes if override_key(a) == re.split(r"[=:]", said, maxsplit=1)[0]), None
                )
                return in_file_form(
                    f"Invalid config: {shown}: {as_the_file_writes(said, written)}", shown, axis=axis
                )
    return None
