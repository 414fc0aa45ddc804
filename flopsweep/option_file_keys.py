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
import re

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


def _fields(schema: type) -> set[str]:
    import dataclasses

    return {f.name for f in dataclasses.fields(schema)}


def _example(group: str, kind: str) -> str:
    """An option file of ``group`` whose schema is ``kind``'s (a ``tiny`` one first):
    ``conf/model/llama-tiny.yaml``; ``""`` when none is."""
    from flopsweep.override_schema import option_files, option_kind

    of_kind = [o for o in option_files(group) if option_kind(group, o) == kind]
    return f"conf/{group}/{min(of_kind, key=lambda o: ('tiny' not in o, o))}.yaml" if of_kind else ""


def family_problem(group: str, option: str, data: dict) -> str | None:
    """Why an option file's keys ``data`` (of ``group``'s option ``option``) do not meet the schema its
    defaults list names, where another schema of the group takes them, else None (:func:`_schema_line`
    then names a misspelt key):

    - no schema named (``kind`` no key of :data:`flopsweep.options.OPTION_SCHEMAS` ``[group]``), and the
      group is ``model`` (every model names its family: ``ModelConfig`` builds none) or a key is no key of
      the group's base: ``names no model family in a defaults list ... Fix: add "defaults:
      [/schema/model/base_llama@_here_, _self_]" at its top (as conf/model/llama-tiny.yaml)``; the family
      is the first whose schema has every key (else the one that has the most);
    - a schema named that lacks a key another schema has (``n_kv_head`` under ``base_gpt2``): the line to
      name that one.

    A copied model file without its defaults list got "did you mean n_head?" for ``n_kv_head``, or a
    refusal of a ``model.arch`` override never given."""
    from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS
    from flopsweep.override_schema import option_kind

    schemas = OPTION_SCHEMAS.get(group) or {}
    keys = [str(k) for k in data if k != "defaults"]
    kind = option_kind(group, option)
    if not schemas or not keys:
        return None
    own = schemas.get(kind)
    base = own or GROUP_BASES[group]
    stray = [k for k in keys if k not in _fields(base)]
    if own is not None and not stray:
        return None
    ranked = sorted(schemas, key=lambda k: -len([x for x in keys if x in _fields(schemas[k])]))
    takers = [k for k in ranked if k != kind and not [x for x in stray if x not in _fields(schemas[k])]]
    if (own is not None and not takers) or (own is None and group != "model" and not (stray and takers)):
        return None  # a misspelt key (_schema_line's), or an option of no schema with the base's keys
    family = (takers or ranked)[0]
    named = f"/schema/{group}/base_{family}@_here_"
    example = _example(group, family)
    also = f" (as {example})" if example else ""
    whose = (
        f" ({', '.join(stray)} {'is' if len(stray) == 1 else 'are'} {schemas[family].__name__}'s)"
        if stray
        else ""
    )
    if own is None:
        what = "model family" if group == "model" else f"{group} schema"
        return (
            f"names no {what} in a defaults list, so Hydra reads it as {base.__name__}{whose}. Fix: add "
            f'"defaults: [{named}, _self_]" at its top{also}.'
        )
    return (
        f"{stray[0]}: is a key of {schemas[family].__name__} (base_{family}), not of {own.__name__}, the "
        f"schema its defaults list names (base_{kind}). Fix: name {named} in its defaults list in place of "
        f"base_{kind}{also}, or drop {stray[0]}."
    )


def form_problem(path: str, group: str, option: str, conf: str = CONF) -> tuple[str, str] | None:
    """``(what, fix)`` for an option file of ``group`` that Hydra cannot take as the option ``option``
    whatever its keys, else None: a symbolic link (``conf/model/x.yaml -> /etc/passwd``: an option is a
    file of conf/ itself), empty, a list or a scalar in place of a mapping of keys, or a key given twice
    (Hydra's YAML reader, OmegaConf's, refuses it). A file that cannot be read or is not YAML is
    :func:`flopsweep.conf_files.conf_file_problem`'s (None here)."""
    shown = shown_path(path, conf)
    if os.path.islink(path):
        return (
            f"is a symbolic link (to {os.readlink(path)}); an option is read only from a file of conf/ "
            "itself",
            _FIX_LINK.format(shown=shown),
        )
    read = _read(path)
    return None if read is None else _content_problem(*read, shown, group, option)


def _read(path: str) -> tuple[str, object] | None:
    """The text of the option file ``path`` and its plain data, else None (not readable, not YAML:
    :func:`flopsweep.conf_files.conf_file_problem`'s line)."""
    try:
        text = read_bounded(path).decode("utf-8")
        return text, yaml.load(text, Loader=SAFE_LOADER)
    except (OSError, ValueError, yaml.YAMLError):
        return None


def _content_problem(text: str, data: object, shown: str, group: str, option: str) -> tuple[str, str] | None:
    """:func:`form_problem` of a file's text and data: empty, not a mapping, a key given twice."""
    example = "conf/model/llama-tiny.yaml" if group == "model" else f"conf/{group}/*.yaml"
    if data is None:
        return (
            f"is empty, so {group}={option} sets none of its keys",
            f"write its keys (as {example}), or remove the file",
        )
    if not isinstance(data, dict):
        what = "a list" if isinstance(data, list) else "one value"
        return (
            f"holds {what}, not a mapping of keys",
            f"write KEY: VALUE lines (as {example})",
        )
    if repeats_a_key(text) and (twice := repeated_key_line(text, shown)):  # Hydra's reader refuses it
        return twice.removeprefix(f"Invalid config: {shown}: ").partition(". Fix: ")[0], "give each key once"
    return None


def repeats_a_key(text: str) -> bool:
    """Whether a mapping of the YAML ``text`` gives a plain key twice (libyaml's nodes, a fraction of a
    millisecond a file: OmegaConf's reader, :func:`flopsweep.conf_files.repeated_key_line`, takes about
    one, and the warnings of ``run.py`` ask it of every option file); False when it is not YAML."""
    try:
        stack = [yaml.compose(text, Loader=SAFE_LOADER)]
    except (yaml.YAMLError, ValueError, RecursionError):
        return False
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
            if len(keys) != len(set(keys)):
                return True
            stack += [v for _, v in node.value]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return False


def option_file_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line refusing an option file the command line picks, else None
    (``Invalid config: conf/model/NAME.yaml: ... Fix: ...``):

    - a symbolic link the command line picks (:func:`form_problem`); empty, a list or a scalar, a key
      given twice (its content's :func:`form_problem`);
    - a file of a group whose options each name a schema (``model``) that names none in its defaults list,
      or whose keys are another schema's (``n_kv_head`` under ``base_gpt2``): the line to add
      (:func:`family_problem`);
    - a key no schema of the option has (the nearest key named), or a value not of its key's type.
    """
    for path in _links(argv, conf):
        what, fix = form_problem(path, "", "", conf) or ("", "")
        return f"Invalid config: {shown_path(path, conf)}: {what}. Fix: {fix}."
    for path, group, option in _picked_files(argv, conf):
        shown = shown_path(path, conf)
        if (read := _read(path)) is None:
            continue  # conf_file_problem's line
        text, data = read
        if found := _content_problem(text, data, shown, group, option):
            return f"Invalid config: {shown}: {found[0]}. Fix: {found[1]}."
        if repeated_key_line(text, shown) == "":
            continue  # OmegaConf refuses it otherwise: Hydra's own line
        if problem := family_problem(group, option, data) or _schema_line(group, option, data):
            return f"Invalid config: {shown}: {problem}"
    return None


def _hydra_leaves(data: dict, prefix: str = "hydra") -> list[str]:
    """Each plain value under a sweep file's ``hydra:`` as the override that sets it
    (``hydra.launcher.bogus=1``); ``hydra.sweeper.params`` left out (the axes:
    :func:`flopsweep.conf_files.sweep_file_problem`'s)."""
    from flopsweep.sweep_file_read import override_value

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


def file_pick(group: str, option: str) -> str:
    """A sweep file's pick ``override /GROUP: OPTION`` as the command line's override, which
    :func:`flopsweep.overrides.group_choice_problem` decides for both: ``backend=fsdp``; an option the
    grammar cannot read bare (``fsdр``, a Cyrillic ``р``; ``日本``) quoted, as the file's YAML reads it
    (text), so that its look-alike is named as on the command line; ``null`` (YAML's null) as ``null``."""
    from flopsweep.override_parsing import parsed_or_none

    pick = f"{group}={option}"
    if parsed_or_none(pick) is not None or "'" in option:
        return pick
    return f"{group}='{option}'"


def file_fix(line: str, group: str, keyword: str = "override ") -> str:
    """The command line's refusal of a pick of ``group`` (``... Fix: did you mean backend=fsdp?``) with its
    fix written as a sweep file's defaults entry (``Fix: did you mean - override /backend: fsdp?``), and a
    sweep of options as the file's axis; what precedes the fix is kept. ``keyword``: ``""`` for a group
    the primary config does not pick (``- /attention: sdpa``: no default to override)."""
    head, sep, fix = line.partition(". Fix: ")
    if not sep:
        return line
    fix = fix.replace(
        f"(several, one job each: -m {group}=a,b)",
        f"(several, one job each: {group}: a,b under hydra.sweeper.params)",
    )
    fix = re.sub(rf"(?<![\w./-]){re.escape(group)}=([^\s?,()]+)", rf"- {keyword}/{group}: \1", fix)
    return f"{head}{sep}{fix}"


def sweep_picks_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a sweep file's ``defaults: [override /GROUP: OPTION]`` naming no option of the group,
    or a key under its ``hydra:`` that the picked sweeper, launcher or Hydra's schema lacks
    (``hydra: {launcher: {bogus: 1}}``), each the command line's own line with the file named, else None.
    Hydra answered both with its multi-line errors (exit 1); ``model=llama-tny`` and
    ``hydra.launcher.bogus=1`` on the command line were one line each (exit 2)."""
    from flopsweep.hydra_keys import hydra_key_problem
    from flopsweep.override_parsing import override_key, overrides_of
    from flopsweep.overrides import group_choice_problem

    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return None  # conf_file_problem's line
    folder = os.path.join(os.path.normpath(conf), "sweep") + os.sep
    own = [o for o in overrides_of(argv) if override_key(o) in ("hydra/sweeper", "hydra/launcher")]
    for path, data in read.items():
        if not path.startswith(folder) or not isinstance(data, dict):
            continue
        shown = shown_path(path, conf)
        entries = data.get("defaults") if isinstance(data.get("defaults"), list) else []
        picks = []
        for entry in entries:
            for key, value in entry.items() if isinstance(entry, dict) else ():
                words = str(key).split()
                if not words or not (value is None or isinstance(value, str)):
                    continue  # a list, no group: sweep_file_defaults' line
                # - /GROUP: OPTION without override (a group the primary config does not pick: the
                # defaults check refuses the others) takes the same rule: /attention: null ran, exit 0
                if (len(words) == 2 and words[0] == "override") or (
                    len(words) == 1 and words[0].startswith("/")
                ):
                    keyword = "override " if len(words) == 2 else ""
                    option = "null" if value is None else value
                    picks.append((words[-1].partition("@")[0].lstrip("/"), option, keyword))
        for group, option, keyword in picks:
            if (problem := group_choice_problem([file_pick(group, option)])) is not None:
                return f"Invalid config: {shown} (defaults: {keyword}/{group}: {option}): " + file_fix(
                    problem.removeprefix("Invalid config: "), group, keyword
                )
        hydra = data.get("hydra")
        if not isinstance(hydra, dict):
            continue
        chosen = [f"{g}={o}" for g, o, _ in picks if g in ("hydra/sweeper", "hydra/launcher")] + own
        if problem := hydra_key_problem(chosen + _hydra_leaves(hydra)):
            return f"Invalid config: {shown} (hydra:): {problem.removeprefix('Invalid config: ')}"
    return None
