"""``conf/config.yaml``'s defaults list and top-level keys, entry by entry, checked before Hydra reads them
(session 37; the checkout's root config, damaged by an edit). Torch-free.

Hydra answered each with its own output: a typo of a Hydra option (``- override hydra/sweeper:
basic_batchd``, ``hydra/job_logging: flopswep``) with its 12-15 line "Could not find" block and search path;
a number where an option's name belongs (``- backend: 3``) with a 33-line ``ValueError`` traceback; a typo of
``_self_`` (``- _selff_``) with "Overrides must be at the end of the defaults list"; a misspelt keyword
(``- overide hydra/sweeper: ...``) or a group picked twice with "Multiple values for ..."; a misspelt key
beside ``defaults:`` (``defualts:``) with "Key 'defualts' not in 'RunConfig'"; a missing ``_self_`` with a
Python warning. :func:`root_entries_problem` names the file, the entry and the fix (the spelling meant, or
``git checkout conf/config.yaml``) in one line.
"""

from __future__ import annotations

import os

from flopsweep.conf_files import ConfFileProblem, checked_yaml, shown_path
from flopsweep.override_parsing import overrides_of, set_key
from flopsweep.override_schema import CONF, near_names, option_files

ROOT_NAMES = ("_self_", "base_config")
"""The bare names of ``conf/config.yaml``'s defaults list: the file's own values and the schema
(:class:`flopsweep.config.RunConfig`, stored as ``base_config``)."""

ROOT_KEYS = ("defaults", "hydra")
"""The top-level keys of ``conf/config.yaml`` besides :class:`flopsweep.config.RunConfig`'s fields."""

DAMAGED = "the checkout's root config is damaged"
"""What a refusal of ``conf/config.yaml`` says of it (:func:`flopsweep.start_checks.root_problem`'s too)."""


def _listed(options: list[str], most: int = 6) -> str:
    """``a, b, c`` of ``options``, at most ``most`` of them, then ``...``."""
    return ", ".join(options[:most]) + (", ..." if len(options) > most else "")


def _default(group: str, options: list[str]) -> str:
    """The option a fix writes for ``group``: its schema's default where it is an option (``backend``:
    ``single``, as the shipped conf/config.yaml picks), else the first option."""
    from flopsweep.options import GROUP_BASES

    try:
        name = getattr(GROUP_BASES[group](), "name", None) if group in GROUP_BASES else None
    except TypeError:  # a schema with required fields
        name = None
    return name if name in options else options[0] if options else "OPTION"


def _kind(value: object) -> str:
    """How a refusal names a value that is no option's name: ``a number``, ``null``, ``a list``."""
    if value is None:
        return "null (no option)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    return "a list" if isinstance(value, list) else "a mapping" if isinstance(value, dict) else "no text"


def hydra_options(group: str, conf: str = CONF) -> list[str]:
    """The options of the Hydra group ``group`` (``sweeper``): conf/'s files of ``hydra/GROUP`` first, then
    Hydra's and its plug-ins' (:func:`flopsweep.overrides.hydra_group_options`, about a second, asked only
    when ``conf`` has none of the name sought: the caller asks after a miss)."""
    from flopsweep.overrides import hydra_group_options

    own = option_files(f"hydra/{group}", conf) if os.path.isdir(os.path.join(conf, "hydra", group)) else []
    return list(dict.fromkeys([*own, *(n for n in hydra_group_options(f"hydra/{group}") if n != "_self_")]))


def _is_hydra_group(group: str, conf: str) -> bool:
    from flopsweep.sweep_file_defaults import hydra_groups

    return os.path.isdir(os.path.join(conf, "hydra", group)) or group in hydra_groups()


def _groups(conf: str) -> list[str]:
    """The names a root defaults entry may pick: conf/'s option groups and Hydra's (``hydra/sweeper``)."""
    from flopsweep.sweep_file_defaults import hydra_groups

    own = sorted(
        g for g in os.listdir(conf) if os.path.isdir(os.path.join(conf, g)) and g not in ("hydra", "sweep")
    )
    return own + [f"hydra/{g}" for g in hydra_groups()]


def picked_elsewhere(argv: list[str], group: str, conf: str = CONF) -> bool:
    """Whether the command line picks an option of ``group`` (``model``, ``hydra/sweeper``) itself
    (``model=gpt-tiny``, a sweep over several) or through a ``+sweep=`` file's ``override /group: option``:
    conf/config.yaml's choice is then never read."""
    from flopsweep.conf_files import read_selected

    keys = {set_key(a) for a in overrides_of(argv)}
    if group in keys:
        return True
    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return False  # conf_file_problem's line
    for path, data in read.items():
        if os.path.normpath(path) == os.path.normpath(os.path.join(conf, "config.yaml")):
            continue
        for entry in (data.get("defaults") if isinstance(data, dict) else None) or []:
            for key in entry if isinstance(entry, dict) else ():
                words = str(key).split()
                if (
                    len(words) == 2
                    and words[0] == "override"
                    and words[1].strip("/").partition("@")[0] == group
                ):
                    return True
    return False


def _entry(entry: object) -> str:
    from flopsweep.sweep_file_defaults import entry_text

    return entry_text(entry)


def _bare_problem(name: str, conf: str) -> tuple[str, str] | None:
    """``(why, fix)`` for a bare name of the root defaults list that is neither ``_self_``, ``base_config``
    nor a file of ``conf`` (``_selff_``), else None."""
    if name in ROOT_NAMES or os.path.isfile(os.path.join(conf, f"{name}.yaml")):
        return None
    near = near_names(name, ROOT_NAMES, n=1)
    why = (
        f"its defaults list names {name}, which is no config (neither {' nor '.join(ROOT_NAMES)} nor a file "
        f"{os.path.basename(conf)}/{name}.yaml)"
    )
    return why, f"did you mean {near[0]}? Write - {near[0]} there" if near else ""


def _option_problem(
    group: str, key: str, value: object, argv: list[str], conf: str
) -> tuple[str, str] | None:
    """``(why, fix)`` for the option ``value`` that the entry ``key: value`` picks of ``group`` (``backend``,
    ``hydra/sweeper``), else None: a number, list or mapping (Hydra's traceback), null or a list for one of
    flopsweep's groups, or a name of no option. A command line that picks the group itself (where Hydra never
    reads this choice) leaves null, a list and a missing name alone."""
    from flopsweep.options import GROUP_BASES

    if isinstance(value, str) and os.path.isfile(os.path.join(conf, group, f"{value}.yaml")):
        return None
    hydra = group.startswith("hydra/")
    if not hydra and not os.path.isdir(os.path.join(conf, group)):
        return None  # a config folder without the group (a test's): Hydra's own choices
    options = option_files(group, conf) if os.path.isdir(os.path.join(conf, group)) else []
    example = f"{key}: {_default(group, options)}"
    if (
        value is not None
        and not isinstance(value, str | list)
        or isinstance(value, list)
        and not all(isinstance(v, str) for v in value)
    ):
        return (
            f"its defaults list picks {_entry({key: value})}: an option is the name of a file of {group}/, "
            f"not {_kind(value)} (its options: {_listed(options)})",
            f"write {example} there",
        )
    if value is None or isinstance(value, list):
        if hydra or group not in GROUP_BASES or picked_elsewhere(argv, group, conf):
            return None  # Hydra's own: a list of options, or none
        return (
            f"its defaults list picks {_entry({key: value})}: a run takes one option of {group}, not "
            f"{_kind(value)} (its options: {_listed(options)})",
            f"write {example} there",
        )
    if value in options or os.path.isfile(os.path.join(conf, group, f"{value}.yaml")):
        return None
    if hydra:
        if value in hydra_options(group.removeprefix("hydra/"), conf):
            return None
        own = group == "hydra/sweeper" and options  # flopsweep's sweepers alone (Hydra's basic is refused)
        options = options if own else [n for n in hydra_options(group[6:], conf) if not n.endswith("_base")]
    if picked_elsewhere(argv, group, conf):
        return None
    near = near_names(value, options, n=1)
    shown = f"{group}/{value}.yaml" if not hydra else f"option {value} of {group}"
    why = f"its defaults list picks {_entry({key: value})}, and there is no {shown}"
    if not hydra:  # said as before (session 36, #343)
        why = (
            f"its defaults list picks {group}: {value}, and there is no "
            f"{shown_path(os.path.join(conf, group, value + '.yaml'), conf)}"
        )
        return why, f"write {group}: {near[0]} there" if near else ""
    why += f" (its options: {_listed(options)})"
    return why, f"did you mean {key}: {near[0]}? Write that there" if near else ""


def _after_problem(text: str, after: dict) -> tuple[str, str]:
    """``(why, fix)`` for the entry ``text`` below the override entry ``after`` (Hydra: "Overrides must be
    at the end of the defaults list")."""
    return (
        f"its defaults list holds {text} after {_entry(after)}, and Hydra reads overrides only at the end of "
        "the list",
        f"move {text} above the override entries",
    )


def _pick_problem(entry: dict, seen: dict[str, dict], after: dict | None, argv: list[str], conf: str):
    """``(why, fix)`` for one ``GROUP: OPTION`` entry of the root defaults list, else None; ``seen``: the
    groups picked by the entries before it (filled here), ``after``: the first ``override`` entry before
    it."""
    from flopsweep.options import GROUP_BASES
    from flopsweep.sweep_file_defaults import KEYWORDS

    if len(entry) != 1 or not isinstance(next(iter(entry)), str):
        return f"its defaults list holds {_entry(entry)}, not one GROUP: OPTION pick", "one pick a line"
    ((key, value),) = entry.items()
    *words, name = key.split() or [""]
    group = name.strip("/").partition("@")[0]
    hydra = group.startswith("hydra/")
    if bad := next((w for w in words if w not in KEYWORDS), None):
        near = near_names(bad, KEYWORDS, n=1)
        meant = " ".join([near[0] if w == bad else w for w in words] + [name]) if near else None
        return (
            f"its defaults list holds {_entry(entry)}: {bad} is no keyword of a defaults entry (override, "
            f'optional), and Hydra reads it as a second pick of {group} ("Multiple values for {group}")',
            f"did you mean {meant}: {value}? Write that there" if meant else "",
        )
    known = (
        _is_hydra_group(group.removeprefix("hydra/"), conf)
        if hydra
        else os.path.isdir(os.path.join(conf, group)) or group in GROUP_BASES  # a test's conf/ lacks some
    )
    if not known:
        near = near_names(group, _groups(conf), n=1)
        fix = f"did you mean {' '.join([*words, near[0]])}: {value}? Write that there" if near else ""
        return (
            f"its defaults list picks {group}, which is no config group (no folder {group}/ in conf/ or "
            "Hydra's)",
            fix,
        )
    if hydra and "override" not in words:
        return (
            f"its defaults list picks {_entry(entry)} without override, and Hydra's own config picks {group} "
            f'already ("Multiple values for {group}")',
            f"write override {name}: {value} there",
        )
    if not hydra and "override" in words:
        return (
            f"its defaults list holds {_entry(entry)}, and no entry before it picks {group}, so there is "
            f"none to override (Hydra: Could not override '{group}')",
            f"write {group}: {value} there",
        )
    picked = name.strip("/")  # a group picked again into another package (model@extra) is another pick
    if picked in seen:
        return (
            f"its defaults list picks {group} twice ({_entry(seen[picked])}, then {_entry(entry)}): Hydra's "
            f'"Multiple values for {group}"',
            "keep one of them",
        )
    seen[picked] = entry
    if after is not None and "override" not in words:
        return _after_problem(_entry(entry), after)
    if "optional" in words and isinstance(value, str):
        return None  # Hydra skips an optional pick that has no file
    return _option_problem(group, key, value, argv, conf)


def _keys_problem(data: dict) -> tuple[str, str] | None:
    """``(why, fix)`` for a top-level key of the root config that is neither ``defaults``, ``hydra`` nor a
    field of :class:`flopsweep.config.RunConfig` (``defualts:``: Hydra's "Key 'defualts' not in
    'RunConfig'"), else None."""
    import dataclasses

    from flopsweep.config import RunConfig

    known = [*ROOT_KEYS, *(f.name for f in dataclasses.fields(RunConfig))]
    for key in data:
        if key in known:
            continue
        near = near_names(str(key), known, n=1)
        why = f"its top-level key {key} is no key of the root config (RunConfig's, defaults or hydra)"
        if near == ["defaults"] and "defaults" in data:
            return (
                f"{why}: a second defaults list, misspelt",
                f"merge its entries into defaults: and drop {key}",
            )
        return why, f"did you mean {near[0]}? Write that there" if near else f"drop {key}"
    return None


def root_entries_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a top-level key or a defaults entry of ``conf/config.yaml`` that Hydra would refuse with
    its own output (module docstring), else None: ``Invalid config: conf/config.yaml: its defaults list picks
    hydra/sweeper: basic_batchd, ...: the checkout's root config is damaged. Fix: did you mean override
    hydra/sweeper: basic_batched? Write that there, or restore it from the checkout: git checkout
    conf/config.yaml.`` None for another primary config (``--config-name``) or one this cannot read (not
    YAML, no defaults list: :func:`flopsweep.conf_files.root_config_problem`'s)."""
    from flopsweep.options import GROUP_BASES

    if any(a in ("-cn", "--config-name") or a.startswith("--config-name=") for a in argv):
        return None
    path = os.path.join(conf, "config.yaml")
    try:
        data = checked_yaml(path, conf)
    except ConfFileProblem:
        return None
    if not isinstance(data, dict) or not any(os.path.isdir(os.path.join(conf, g)) for g in GROUP_BASES):
        return None  # a config folder of no option groups (a test's) has nothing to pick
    found = _keys_problem(data)
    entries = data.get("defaults")
    seen: dict[str, dict] = {}
    after: dict | None = None
    for entry in entries if isinstance(entries, list) and not found else []:
        if isinstance(entry, str):
            found = _bare_problem(entry, conf)
            if found is None and after is not None and entry != "_self_":
                found = _after_problem(entry, after)
        elif isinstance(entry, dict):
            found = _pick_problem(entry, seen, after, argv, conf)
            if after is None and any(str(k).split()[:1] == ["override"] for k in entry):
                after = entry
        else:
            found = (f"its defaults list holds {_kind(entry)}, not a GROUP: OPTION pick or _self_", "")
        if found:
            break
    if not found and isinstance(entries, list) and entries and "_self_" not in entries:
        found = (
            "its defaults list has no _self_ (Hydra warns of it at every start)",
            "add - _self_ as its last entry",
        )
    if not found:
        return None
    why, fix = found
    restore = f"restore it from the checkout: git checkout {shown_path(path, conf)}"
    fix = f"{fix}, or {restore}" if fix else restore
    return f"Invalid config: {shown_path(path, conf)}: {why}: {DAMAGED}. Fix: {fix}."
