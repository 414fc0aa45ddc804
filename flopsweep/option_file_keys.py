"""The option files a command line picks (``model=NAME``: ``conf/model/NAME.yaml``, a user's own as
docs/extending.md describes), checked before Hydra composes them, as a sweep file is
(:mod:`flopsweep.sweep_file_keys`).

Hydra answered a key given twice with a YAML traceback, a misspelled key (``n_layre: 2``) or a value of
the wrong type (``n_layer: two``) with a six-line ``ConfigKeyError`` block (exit 1), an empty file with a
line about ``model.name`` the user never wrote, and a file that is a link to ``/etc/passwd`` by printing
that file as a key, twice. :func:`option_file_problem` refuses each in one line naming the file, the key
and the fix (exit 2). The file's bytes, UTF-8 and YAML are :func:`flopsweep.conf_files.conf_file_problem`'s,
checked before. Torch-free.
"""

from __future__ import annotations

import os

import yaml

from flopsweep.conf_files import (
    ConfFileProblem,
    read_bounded,
    read_selected,
    repeated_key_line,
    selected_files,
    shown_path,
)
from flopsweep.override_schema import CONF, SAFE_LOADER, near_names

_FIX_LINK = "copy the file's text into {shown} in place of the link, or remove it"


def _picked_files(argv: list[str], conf: str) -> list[tuple[str, str, str]]:
    """``(path, group, option)`` of each option file of a group of :data:`flopsweep.options.GROUP_BASES`
    that the command line picks, conf/config.yaml's defaults and the files they name included."""
    from flopsweep.options import GROUP_BASES

    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return []  # conf_file_problem's line
    out = []
    for path in read:
        rel = os.path.relpath(path, conf)
        group, _, rest = rel.partition(os.sep)
        if group in GROUP_BASES and rest.endswith(".yaml"):
            out.append((path, group, rest.removesuffix(".yaml")))
    return out


def _links(argv: list[str], conf: str) -> list[str]:
    """The option files the command line picks itself (``group=option``) that are symbolic links, which
    :func:`flopsweep.conf_files.read_selected` follows."""
    from flopsweep.options import GROUP_BASES

    files = selected_files(argv, conf)
    return [
        f for f in files if os.path.islink(f) and os.path.relpath(f, conf).split(os.sep)[0] in GROUP_BASES
    ]


_SCHEMA_LINES: dict[tuple[str, str, str], str | None] = {}
""":func:`_schema_line`'s answers by ``(group, option, repr(data))`` (safe YAML's plain values print the
same for the same data): the checks before Hydra ask it of each picked file several times a start."""


def _schema_line(group: str, option: str, data: dict) -> str | None:
    """Why a key of the option's ``data`` is no key of its schema, or its value not of the key's type
    (kept in :data:`_SCHEMA_LINES`, at most 256 answers)."""
    key = (group, option, repr(data))
    if key not in _SCHEMA_LINES:
        if len(_SCHEMA_LINES) >= 256:
            _SCHEMA_LINES.clear()
        _SCHEMA_LINES[key] = _fresh_schema_line(group, option, data)
    return _SCHEMA_LINES[key]


def _fresh_schema_line(group: str, option: str, data: dict) -> str | None:
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

    from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS
    from flopsweep.override_schema import option_kind

    kind = option_kind(group, option)
    schema = OPTION_SCHEMAS[group].get(kind, GROUP_BASES[group])
    node = OmegaConf.structured(schema)
    whose = f"{schema.__name__}, the schema of {group}={option}"
    for key, value in data.items():
        if key == "defaults":
            continue
        try:
            OmegaConf.update(node, str(key), value, merge=True)
        except (ConfigKeyError, ConfigAttributeError) as exc:
            full = str(exc.full_key or key)
            parent, _, leaf = full.rpartition(".")
            keys = OmegaConf.select(node, parent) if parent else node
            near = near_names(leaf, list(keys.keys()) if OmegaConf.is_dict(keys) else [], n=1)
            fix = f"did you mean {parent + '.' if parent else ''}{near[0]}?" if near else "drop it."
            return f"{full}: is no key of {whose}. Fix: {fix}"
        except ValidationError as exc:
            full = str(exc.full_key or key)
            why = str(exc).splitlines()[0]
            return f"{full}: {why} ({whose}). Fix: write a value of {schema.__name__}.{full}'s type."
        except OmegaConfBaseException as exc:
            return f"{key}: {str(exc).splitlines()[0]} ({whose}). Fix: correct the value."
    return None


def option_file_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line refusing an option file the command line picks, else None
    (``Invalid config: conf/model/NAME.yaml: ... Fix: ...``):

    - a symbolic link (``conf/model/x.yaml -> /etc/passwd``): an option is a file of conf/ itself;
    - empty, or a list or a scalar in place of a mapping of keys;
    - a key given twice (Hydra's YAML reader, OmegaConf's, refuses it);
    - a key no schema of the option has (the nearest key named), or a value not of its key's type.
    """

    for path in _links(argv, conf):
        shown = shown_path(path, conf)
        return (
            f"Invalid config: {shown}: is a symbolic link (to {os.readlink(path)}); an option is read only "
            f"from a file of conf/ itself. Fix: {_FIX_LINK.format(shown=shown)}."
        )
    for path, group, option in _picked_files(argv, conf):
        shown = shown_path(path, conf)
        try:
            text = read_bounded(path).decode("utf-8")
            data = yaml.load(text, Loader=SAFE_LOADER)
        except (OSError, ValueError, yaml.YAMLError):
            continue  # conf_file_problem's line
        example = "conf/model/llama-tiny.yaml" if group == "model" else f"conf/{group}/*.yaml"
        if data is None:
            return (
                f"Invalid config: {shown}: is empty, so {group}={option} sets none of its keys. Fix: write "
                f"its keys (as {example}), or remove the file."
            )
        if not isinstance(data, dict):
            what = "a list" if isinstance(data, list) else "one value"
            return (
                f"Invalid config: {shown}: holds {what}, not a mapping of keys. Fix: write KEY: VALUE lines "
                f"(as {example})."
            )
        if (twice := repeated_key_line(text, shown)) is not None:  # Hydra's reader: a key given twice
            if twice:
                return twice
            continue
        if problem := _schema_line(group, option, data):
            return f"Invalid config: {shown}: {problem}"
    return None


def _hydra_leaves(data: dict, prefix: str = "hydra") -> list[str]:
    """Each plain value under a sweep file's ``hydra:`` as the override that sets it
    (``hydra.launcher.bogus=1``); ``hydra.sweeper.params`` left out (the axes:
    :func:`flopsweep.conf_files.sweep_file_problem`'s)."""
    from flopsweep.sweep_file_keys import override_value

    out = []
    for key, value in data.items():
        full = f"{prefix}.{key}"
        if full == "hydra.sweeper.params":
            continue
        if isinstance(value, dict) and value:
            out += _hydra_leaves(value, full)
        else:
            out.append(f"{full}={override_value(value)}")
    return out


def sweep_picks_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a sweep file's ``defaults: [override /GROUP: OPTION]`` naming no option of the group,
    or a key under its ``hydra:`` that the picked sweeper, launcher or Hydra's schema lacks
    (``hydra: {launcher: {bogus: 1}}``), each the command line's own line with the file named, else None.
    Hydra answered both with its multi-line errors (exit 1); ``model=llama-tny`` and
    ``hydra.launcher.bogus=1`` on the command line were one line each (exit 2)."""
    from flopsweep.hydra_keys import hydra_key_problem
    from flopsweep.override_grammar import overrides_of
    from flopsweep.overrides import group_choice_problem

    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return None  # conf_file_problem's line
    folder = os.path.join(os.path.normpath(conf), "sweep") + os.sep
    own = [
        o
        for o in overrides_of(argv)
        if o.partition("=")[0].lstrip("+~") in ("hydra/sweeper", "hydra/launcher")
    ]
    for path, data in read.items():
        if not path.startswith(folder) or not isinstance(data, dict):
            continue
        shown = shown_path(path, conf)
        entries = data.get("defaults") if isinstance(data.get("defaults"), list) else []
        picks = []
        for entry in entries:
            for key, value in entry.items() if isinstance(entry, dict) else ():
                words = str(key).split()
                if len(words) == 2 and words[0] == "override" and isinstance(value, str):
                    picks.append(f"{words[1].partition('@')[0].lstrip('/')}={value}")
        for pick in picks:
            if (problem := group_choice_problem([pick])) is not None:
                return (
                    f"Invalid config: {shown} (defaults: override /{pick.replace('=', ': ', 1)}): "
                    + problem.removeprefix("Invalid config: ")
                )
        hydra = data.get("hydra")
        if not isinstance(hydra, dict):
            continue
        chosen = [p for p in picks if p.startswith(("hydra/sweeper=", "hydra/launcher="))] + own
        if problem := hydra_key_problem(chosen + _hydra_leaves(hydra)):
            return f"Invalid config: {shown} (hydra:): {problem.removeprefix('Invalid config: ')}"
    return None
