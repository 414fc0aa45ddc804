"""A sweep file's defaults list (``+sweep=NAME``: ``conf/sweep/NAME.yaml``) and the pool's values under its
``hydra.launcher``, checked before Hydra composes it, as the command line's own picks and values are.

Hydra answered a misspelt group (``- override /modle: gpt-tiny``, ``/hydra.launcher``) with "Could not
override 'modle'. No match in the defaults list." (exit 1); a pick of a group the primary config picks
already, without ``override`` (``- /model: gpt-tiny``, or ``overide``, a keyword it skips), with "Multiple
values for model" (exit 1; with ``model=`` on the command line the file's pick was dropped silently); a
group without its leading ``/`` with its search path (it is read under ``sweep/``); an entry that is a
number, empty or of two picks, or an option that is a number, with a 50-line ``ValueError`` traceback;
and a group picked twice by keeping the first pick silently. Session 37: a pick written as one text
(``- override /model:gpt-125m``, ``- override /model/gpt-125m``) or a misspelt sweep file (``- smok``) was
Hydra's "Could not load" and its search path; an option's path (``- /model/gpt-125m``) and a list of
options (``override /model: [a, b]``) merged files into a run silently; a package (``/model@foo``,
``@_global_``) and a path with an empty, ``.`` or ``..`` part (``/model/``, ``//model``) were Hydra's
"Could not override". :func:`defaults_problem` refuses each in one line naming the file, the entry and a
fix that this check passes. :func:`pool_problem` checks the pool's ``slots``, ``devices``, ``timeout_min``
and ``grace_s`` of a file that picks ``hydra/launcher: pool`` (or runs under the command line's) with the
command line's own check (:func:`flopsweep.pool.cpu_pool_problem`), the file's text read as text (a
``slots: "0,1"`` is one text, :func:`flopsweep.pool.text_list_problem`): the launcher refused them at the
sweep's start, exit 1, without naming the file. Torch-free.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from flopsweep.conf_files import ConfFileProblem, read_selected, selected_files, shown_path
from flopsweep.override_parsing import set_key, split_override
from flopsweep.override_schema import CONF

KEYWORDS = ("override", "optional")
"""The words Hydra reads before a group in a defaults entry (``override /model``); it skips any other."""

HOW = "one - override /GROUP: OPTION line each (as conf/sweep/smoke.yaml)"
"""The fix of a defaults entry that names no group to pick."""

POOL_KEYS = ("slots", "devices", "timeout_min", "grace_s")
"""The pool launcher's keys under ``hydra.launcher`` (``conf/hydra/launcher/pool.yaml``) checked here."""


def _sweep_files(argv: list[str], conf: str) -> tuple[dict[str, object], list[tuple[str, dict]]]:
    """The files the command line selects (none where one is refused: ``conf_file_problem``'s line), and
    ``(path, plain data)`` of each sweep file (under ``conf/sweep/``) among them that is a mapping."""
    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return {}, []
    folder = os.path.join(os.path.normpath(conf), "sweep") + os.sep
    return read, [(p, d) for p, d in read.items() if p.startswith(folder) and isinstance(d, dict)]


def _primary_picks(argv: list[str], read: dict[str, object], conf: str) -> dict[str, str]:
    """``{group: option}`` the primary config's defaults list picks (``model: gpt-tiny``), with ``sweep``
    (the command line's ``+sweep=NAME``) and Hydra's own groups (``hydra/launcher``: its config picks
    each); keys with a keyword (``override hydra/sweeper``) read as Hydra's group."""
    files = selected_files(argv, conf)
    data = read.get(os.path.normpath(files[0])) if files else None
    defaults = data.get("defaults") if isinstance(data, dict) else None
    picks = {f"hydra/{g}": "" for g in hydra_groups()}
    for entry in defaults if isinstance(defaults, list) else []:
        for key, value in entry.items() if isinstance(entry, dict) else ():
            if words := str(key).split():
                picks[words[-1].lstrip("/").partition("@")[0]] = str(value)
    picks["sweep"] = next((split_override(a)[2] for a in argv if set_key(a) == "sweep"), "")
    return picks


def _primary_overrides(argv: list[str], read: dict[str, object], conf: str) -> dict[str, str]:
    """``{group: option}`` the primary config's defaults list picks with ``override`` (``override
    hydra/sweeper: basic_batched``): Hydra keeps the first override of a group it reads, the primary
    config's, so a sweep file's override of the same group is dropped."""
    files = selected_files(argv, conf)
    data = read.get(os.path.normpath(files[0])) if files else None
    defaults = data.get("defaults") if isinstance(data, dict) else None
    found: dict[str, str] = {}
    for entry in defaults if isinstance(defaults, list) else []:
        for key, value in entry.items() if isinstance(entry, dict) else ():
            words = str(key).split()
            if len(words) > 1 and words[0] == "override":
                found.setdefault(words[-1].lstrip("/").partition("@")[0], str(value))
    return found


def dropped_override_problem(
    entry: object, overridden: dict[str, str], argv: list[str], conf: str = CONF
) -> str | None:
    """Why a sweep file's ``override /GROUP: OPTION`` of a group the primary config overrides itself
    (``overridden``: :func:`_primary_overrides`; ``conf/config.yaml``'s ``override hydra/sweeper:
    basic_batched``) is refused, else None: Hydra keeps the first override it reads, the primary
    config's, so the file's was dropped silently (``- override /hydra/sweeper: tune`` ran the basic
    sweeper, exit 0). Passes where the option is the primary config's, or the command line picks the
    group (``hydra/sweeper=tune``: the command line's pick wins over both, the fix this line gives)."""
    if not isinstance(entry, dict) or len(entry) != 1:
        return None
    ((key, value),) = entry.items()
    words = str(key).split()
    name = words[-1].lstrip("/").partition("@")[0] if words else ""
    if "override" not in words or name not in overridden or not isinstance(value, str):
        return None
    from flopsweep.override_parsing import given_keys

    given = given_keys(argv)
    if value == overridden[name] or name in given:
        return None
    files = selected_files(argv, conf)
    primary = shown_path(files[0], conf) if files else "the primary config"
    return (
        f"(defaults: {entry_text(entry)}): {primary} overrides {name} itself "
        f"({overridden[name]}), and Hydra keeps the first override it reads, so this one is dropped and "
        f"{overridden[name]} runs. Fix: {_command_line_pick(name, value, argv)}."
    )


def _command_line_pick(name: str, value: str, argv: list[str]) -> str:
    """The fix of a pick of ``name`` that a sweep file cannot make: the command line's own."""
    sweep = next((split_override(a)[2] for a in argv if set_key(a) == "sweep"), "NAME")
    return f"drop this line and pick it on the command line, -m +sweep={sweep} {name}={value} (its pick wins)"


@functools.lru_cache(maxsize=1)
def hydra_groups() -> tuple[str, ...]:
    """Hydra's own groups under ``hydra/`` (``launcher``, ``sweeper``, ``job_logging``, ...), as its
    config loader lists them; () when they cannot be listed."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra._internal.utils import create_config_search_path

        loader = ConfigLoaderImpl(config_search_path=create_config_search_path(CONF))
        return tuple(loader.list_groups("hydra"))
    except Exception:  # noqa: BLE001 - a courtesy before Hydra starts: Hydra names what this cannot
        return ()


def _is_group(name: str, conf: str) -> bool:
    if name.startswith("hydra/") and name.removeprefix("hydra/") in hydra_groups():
        return True
    return bool(name) and name != "hydra" and os.path.isdir(os.path.join(conf, name))


def _groups(conf: str) -> list[str]:
    """Every group a defaults entry may name: the folders of ``conf`` (``batch/auto`` too) and Hydra's."""
    found = [f"hydra/{g}" for g in hydra_groups()]
    for root, folders, _ in os.walk(conf, followlinks=True):
        rel = os.path.relpath(root, conf)
        found += [os.path.normpath(os.path.join(rel, f)) for f in folders if rel.split(os.sep)[0] != "hydra"]
    return sorted(set(found) - {"hydra"})


def entry_text(entry: object) -> str:
    """A defaults entry as the file writes it: ``override /model: gpt-tiny``, ``_self_``, ``3``."""
    from flopsweep.sweep_file_read import yaml_value

    if isinstance(entry, dict) and len(entry) == 1:
        ((key, value),) = entry.items()
        return f"{key}: {yaml_value(value)}"
    if isinstance(entry, dict) and entry:  # in the file's order (YAML's writer sorts the keys)
        return "{" + ", ".join(entry_text({k: v}) for k, v in entry.items()) + "}"
    return yaml_value(entry)


class Picks(dict):
    """The groups the primary config and Hydra pick already (``{group: option}``, :func:`_primary_picks`),
    with what a pick's fix needs besides: ``overridden``, the groups the primary config overrides itself
    (:func:`_primary_overrides`), and ``argv``, the command line. :func:`_fix` reads them where the
    message is made; a plain dict is a primary config that overrides nothing."""

    def __init__(self, picks: dict[str, str], overridden: dict[str, str], argv: list[str]) -> None:
        super().__init__(picks)
        self.overridden, self.argv = dict(overridden), list(argv)


def _option_text(name: str, value: object, picks: dict[str, str]) -> str:
    """The option a pick's fix writes for ``value`` of ``name``, as YAML: null (no option, #426) the
    primary config's pick; a look-alike its ASCII option (#425)."""
    from flopsweep.sweep_file_read import yaml_value

    if value is None and name in picks:
        value = picks[name] or "NAME"
    elif isinstance(value, str):
        value = _ascii_option(name, value)
    return yaml_value(value)


def _pick(name: str, value: object, picks: dict[str, str]) -> str:
    """The entry a fix writes for ``value`` of the group ``name``: ``override /model: gpt-tiny`` for a
    group the primary config picks, ``/attention: sdpa`` for one it does not; the command line's sweep
    group (``sweep``) is read in by name (``- smoke``)."""
    from flopsweep.sweep_file_read import yaml_value

    if name == "sweep":
        return f"- {yaml_value(value)}"
    return f"- {'override ' if name in picks else ''}/{name}: {_option_text(name, value, picks)}"


def _fix(name: str, value: object, picks: dict[str, str], *, ask: bool = False) -> str:
    """A fix that is one pick of ``value`` for ``name``: :func:`_pick`'s entry (``ask``: ``did you mean
    ENTRY?``), or where the primary config overrides ``name`` itself with another option and the command
    line does not pick it (``picks``' :class:`Picks`), the command line's pick (:func:`_command_line_pick`,
    ``ask``: with its full stop): Hydra would drop the file's override (:func:`dropped_override_problem`),
    so the fix printed is the one accepted."""
    from flopsweep.override_parsing import given_keys

    if isinstance(picks, Picks) and name in picks and name in picks.overridden:
        option = _option_text(name, value, picks)
        if option != picks.overridden[name] and name not in given_keys(picks.argv):
            return _command_line_pick(name, option, picks.argv) + ("." if ask else "")
    pick = _pick(name, value, picks)
    return f"did you mean {pick}?" if ask else pick


def _ascii_option(group: str, option: str) -> str:
    """``option``, or the ASCII option of ``group`` it looks like (``fsdр``, a Cyrillic ``р``: ``fsdp``,
    :func:`flopsweep.lookalike.ascii_lookalike`), so that a fix never carries a look-alike (#425)."""
    from flopsweep.lookalike import ascii_lookalike
    from flopsweep.override_schema import option_files

    alike = ascii_lookalike(option, option_files(group))
    return alike[0] if alike else option


def _kind(value: object) -> str:
    """What a YAML value is, for a line: ``a mapping``, ``a list``, ``a boolean``, ``a number``."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, int | float) else f"a {type(value).__name__}"


def _split_path(path: str, conf: str) -> tuple[str, str] | None:
    """``(group, option)`` of a config's path (``model/gpt-125m``, ``batch/auto/max16``): the first group of
    ``conf`` or Hydra's (:func:`_is_group`) it starts with and the rest, else None."""
    parts = path.strip("/").split("/")
    for cut in range(1, len(parts)):
        group = "/".join(parts[:cut])
        if _is_group(group, conf):
            return group, "/".join(parts[cut:])
    return None


def _option(group: str, option: str, conf: str) -> str:
    """``option``, or the nearest option file of ``group`` of ``conf`` when it names none (Hydra's own
    groups' options, from its plug-ins too, are kept as written)."""
    from flopsweep.override_schema import near_names, option_files

    if group.startswith("hydra/") or not option_files(group, conf) or option in option_files(group, conf):
        return option
    near = near_names(option, option_files(group, conf), n=1)
    return near[0] if near else option


def _clean_path(path: str) -> str:
    """A group's path without its empty, ``.`` and ``..`` parts (``model/`` -> ``model``)."""
    return "/".join(p for p in path.split("/") if p not in ("", ".", ".."))


def text_entry_problem(entry: str, picks: dict[str, str], conf: str = CONF) -> str | None:
    """Why a defaults entry that is one text cannot stand there, else None. Hydra reads such an entry as
    the name of a config file (``- smoke``: ``sweep/smoke.yaml``; ``- /model/gpt-125m``:
    ``model/gpt-125m.yaml``), so a pick written without the space after its colon (``override
    /model:gpt-125m``) or as a path (``override /model/gpt-125m``) was Hydra's "Could not load
    'sweep/override /model:gpt-125m'" and its search path (exit 1), a sweep file misspelt (``- smok``)
    the same, and a group's option named by its path (``- /model/gpt-125m``) was merged as a config of its
    own, the primary config's pick kept (the job refused the mixed model). ``_self_``, a file of
    ``sweep/`` and an absolute path under no group of ``conf`` (a structured config's) pass."""
    from flopsweep.override_schema import near_names, option_files

    said, text = f"(defaults: {entry})", entry.strip()
    if text == "_self_" or (not text.startswith("/") and os.path.isfile(_sweep_file(text, conf))):
        return None
    words = text.split()
    body = "".join(words[1:] if words and words[0] in KEYWORDS else words)
    group, colon, option = body.partition(":")
    split = (_clean_path(group), option.strip()) if colon else _split_path(_clean_path(body), conf)
    if colon and split is not None and not _is_group(split[0], conf):  # override /modle:gpt-tiny
        near = near_names(split[0], _groups(conf), n=1)
        split = (near[0], split[1]) if near else None
    shown = text.lstrip("/") if text.startswith("/") else f"sweep/{text}"
    loaded = f"which Hydra reads as the name of a config file (Could not load '{shown}')"
    if split is None and (colon or len(words) > 1):
        return f"{said}: is one text, {loaded}. Fix: {HOW}."
    if split is not None and split[1] and _is_group(split[0], conf):
        group, option = split
        fix = _fix(group, _option(group, option, conf), picks)
        loads = group.startswith("hydra/") or os.path.isfile(os.path.join(conf, group, f"{option}.yaml"))
        if text.startswith("/") and len(words) == 1 and not colon and loads:
            return (
                f"{said}: loads {group}/{option}.yaml as a config of its own, not as the pick of {group}, so "
                f"the primary config's {group} stays picked and the two mix. Fix: {fix}."
            )
        how = "as a path" if not colon else "in quotes" if ": " in text else "without a space after its colon"
        return f"{said}: is one text, a pick written {how}, {loaded}. Fix: {fix}."
    if text.startswith("/") or "@" in text:
        return None  # a structured config's path, or a package: Hydra's
    from flopsweep.lookalike import ascii_lookalike

    names = ["_self_", *option_files("sweep", conf)]
    alike = ascii_lookalike(text, names)  # smоke, a Cyrillic о: named as the pick's line names it
    near = [alike[0]] if alike else near_names(text, names, n=1)  # _selff_: did you mean _self_?
    note = f"; {alike[1]}" if alike else ""
    fix = f"did you mean - {near[0]}?" if near else f"name a file of conf/sweep/, or write {HOW}."
    return (
        f"{said}: names no sweep file (no conf/sweep/{text}.yaml; Hydra: Could not load 'sweep/{text}'"
        f"{note}). Fix: {fix}"
    )


def _sweep_file(name: str, conf: str) -> str:
    return os.path.join(conf, "sweep", f"{name}.yaml")


def entry_problem(entry: object, picks: dict[str, str], conf: str = CONF) -> str | None:
    """Why one entry of a sweep file's defaults list cannot stand there (``(defaults: ENTRY): why. Fix:
    ...``), else None. ``picks``: the groups the primary config and Hydra pick already
    (:func:`_primary_picks`). An entry of one text is :func:`text_entry_problem`'s; a pick's own parts are
    :func:`_pick_problem`'s."""
    said = f"(defaults: {entry_text(entry)})"
    if isinstance(entry, str):
        return text_entry_problem(entry, picks, conf)
    if not isinstance(entry, dict):
        what = "nothing" if entry is None else _kind(entry)
        return f"{said}: an entry is a pick of a group's option or _self_, not {what}. Fix: {HOW}."
    if len(entry) != 1:
        shown = ", ".join(entry_text({k: v}) for k, v in entry.items())
        why = "names no group" if not entry else f"holds {len(entry)} picks in one entry ({shown})"
        return f"{said}: {why}. Fix: {HOW}."
    ((key, value),) = entry.items()
    if not isinstance(key, str):
        return f"{said}: {key!r} is no group (a key is text). Fix: {HOW}."
    if not key.split():
        return f"{said}: names no group. Fix: {HOW}."
    return _pick_problem(said, key, value, picks, conf)


def _form_problem(said: str, group: str, value: object, picks: dict[str, str], conf: str) -> str | None:
    """A group's path with an empty, ``.`` or ``..`` part (``/model/``: Hydra's "Could not override
    'model/'"; ``//model``: "... '/model'")."""
    from flopsweep.override_schema import near_names

    path = group.partition("@")[0].removeprefix("/")
    if path and all(part not in ("", ".", "..") for part in path.split("/")):
        return None
    clean = _clean_path(path)
    near = [clean] if _is_group(clean, conf) else near_names(clean, _groups(conf), n=1)
    option = value if isinstance(value, str) else picks.get(near[0] if near else "") or "NAME"
    fix = _fix(near[0], option, picks) if near else HOW
    return (
        f"{said}: {group.partition('@')[0]} is no group's path (folders of conf/ joined by single /, with no "
        f"empty, . or .. part). Fix: {fix}."
    )


def _pick_problem(said: str, key: str, value: object, picks: dict[str, str], conf: str) -> str | None:
    """Why the pick ``key: value`` (``override /model: gpt-tiny``) cannot stand in a sweep file's defaults
    list, else None: its keyword, its leading ``/``, its path, its group, its package, its option."""
    from flopsweep.lookalike import ascii_lookalike
    from flopsweep.override_schema import near_names

    *words, group = key.split()
    name, _, package = group.lstrip("/").partition("@")
    if problem := _form_problem(said, group, value, picks, conf):
        return problem
    keyword = next((w for w in words if w not in KEYWORDS), None)
    if keyword is not None:
        fix = _fix(name, value, picks) if _is_group(name, conf) else HOW
        return (
            f"{said}: {keyword} is no keyword of a defaults entry (override, optional), and Hydra skips it "
            f"(a pick of {name} without override). Fix: {fix}."
        )
    if not group.startswith("/"):
        if os.path.isdir(os.path.join(conf, "sweep", name)):
            return None  # a group of the file's own folder
        if _is_group(name, conf):
            return (
                f"{said}: a group without a leading / is read under the file's own (sweep/{name}, no such "
                f"group). Fix: {_fix(name, value, picks)}."
            )
    if not _is_group(name, conf):
        dotted = name.replace(".", "/")
        near = [dotted] if _is_group(dotted, conf) else near_names(name, _groups(conf), n=1)
        fix = _fix(near[0], value, picks, ask=True) if near else f"name a group of {conf}/ ({HOW})"
        alike = ascii_lookalike(name, _groups(conf))  # /bаckend, a Cyrillic а: the command line's note
        note = f"; {alike[1]}" if alike else ""
        return f"{said}: {name} is no config group (no folder {name}/ in conf/ or Hydra's{note}). Fix: {fix}"
    example = picks.get(name) or "NAME"
    if "@" in group:
        where = "the config's root" if package in ("", "_global_", "_here_") else package
        hydra = f" (Hydra: Could not override '{name}@{package}')" if "override" in words else ""
        return (
            f"{said}: a package (@{package}) moves the keys of {name} to {where}, and each group's keys stay "
            f"at its own key, {name.replace('/', '.')}{hydra}. "
            f"Fix: {_fix(name, value if isinstance(value, str) else example, picks)}."
        )
    if problem := _option_problem(said, name, value, picks):
        return problem
    return _override_problem(said, words, group, name, value, picks)


def _option_problem(said: str, name: str, value: object, picks: dict[str, str]) -> str | None:
    """An option that is not one name: a list (Hydra merges each file in turn into one config: one job,
    the last file's keys winning), a number, a mapping; null passes (Hydra keeps the primary's pick)."""
    example = picks.get(name) or "NAME"
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        value = [_ascii_option(name, v) for v in value]
        if len(value) == 1:
            return f"{said}: an option is one name, not a list. Fix: {_fix(name, value[0], picks)}."
        return (
            f"{said}: a list of options merges their files into one config, in order ({value[-1]}'s keys "
            f"win), and runs one job, not one job each. Fix: pick one ({_pick(name, value[-1], picks)}), or "
            f"sweep them under hydra.sweeper.params ({name}: {','.join(value)})."
        )
    if value is not None and not isinstance(value, str):
        return (
            f"{said}: an option is the name of a file of {name}/, not {_kind(value)}. "
            f"Fix: {_fix(name, example, picks)}."
        )
    return None


def _override_problem(
    said: str, words: list[str], group: str, name: str, value: object, picks: dict[str, str]
) -> str | None:
    """``override`` of a group no default picks (or of ``sweep``), or a second pick without it."""
    if "override" in words and name == "sweep":
        return (
            f"{said}: the command line adds sweep (+sweep=...), and Hydra overrides only the primary "
            f"config's picks (Could not override 'sweep'); another sweep file is read in by its name. Fix: "
            f"{_fix(name, value, picks)}."
        )
    if "override" in words and name not in picks:
        return (
            f"{said}: no default picks {name}, so there is none to override (Hydra: Could not override "
            f"'{name}'). Fix: {_pick(name, value, {})}."
        )
    if "override" not in words and name in picks and group.startswith("/"):
        chosen = f"the command line picks {name}" if name == "sweep" else f"the primary config picks {name}"
        return (
            f'{said}: {chosen} already, and a second pick is Hydra\'s "Multiple values for {name}". '
            f"Fix: {_fix(name, value, picks)}."
        )
    return None


def defaults_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line refusing an entry of a selected sweep file's defaults list (:func:`entry_problem`), or a
    group it picks twice (Hydra keeps the first pick and drops the other silently), with the file named
    (``Invalid config: sweep/NAME.yaml (defaults: ENTRY): why. Fix: ...``), else None."""
    read, files = _sweep_files(argv, conf)
    if not files:
        return None
    overridden = _primary_overrides(argv, read, conf)
    picks = Picks(_primary_picks(argv, read, conf), overridden, argv)
    for path, data in files:
        shown, entries = shown_path(path, conf), data.get("defaults")
        seen: dict[str, object] = {}
        for entry in entries if isinstance(entries, list) else []:
            if problem := entry_problem(entry, picks, conf):
                return f"Invalid config: {shown} {problem}"
            if problem := dropped_override_problem(entry, overridden, argv, conf):
                return f"Invalid config: {shown} {problem}"
            if isinstance(entry, str) and entry.strip() == "_self_" and "_self_" in seen:
                name = os.path.basename(path).removesuffix(".yaml")
                return (
                    f"Invalid config: {shown} (defaults: _self_): is listed twice (Hydra: Duplicate _self_ "
                    f"defined in sweep/{name}). Fix: keep one - _self_ line (last, for the file's values to "
                    "win over its picks)."
                )
            if isinstance(entry, str) and entry.strip() == "_self_":
                seen["_self_"] = entry
            if not isinstance(entry, dict):
                continue
            ((key, value),) = entry.items()
            name = str(key).split()[-1].lstrip("/")
            if name in seen:
                return (
                    f"Invalid config: {shown} (defaults: {entry_text(entry)}): picks {name} again (after "
                    f"{entry_text(seen[name])}); Hydra keeps the first pick and drops this one. Fix: keep "
                    f"one pick of {name}, and sweep several under hydra.sweeper.params ({name}: a,b)."
                )
            seen[name] = entry
    return None


def _as_text(value: str) -> str:
    """``value`` quoted for Hydra's grammar, so that it reads the file's text as text: ``"0,1"`` unquoted
    is a sweep to it (``ChoiceSweep(...)``), ``"[0,1]"`` a list."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def pool_problem(argv: list[str], detected: Callable[[], int] | None = None, conf: str = CONF) -> str | None:
    """One line for the pool's values a selected sweep file sets (``hydra: {launcher: {slots: abc}}``,
    ``timeout_min: -5``), or for the pool it picks (``- override /hydra/launcher: pool``) with no slots on
    ``device=cpu``, with the file named (the command line's own line:
    :func:`flopsweep.pool.cpu_pool_problem`), else None. Checked with the command line's overrides, which
    replace the file's values and passed the check already; the file's ``device:`` is read where the
    command line gives none."""
    from flopsweep.override_parsing import key_values, override_key, overrides_of
    from flopsweep.pool import cpu_pool_problem, text_list_problem
    from flopsweep.sweep_file_read import override_value

    given = key_values(overrides_of(argv))
    for path, data in _sweep_files(argv, conf)[1]:
        entries = data.get("defaults") if isinstance(data.get("defaults"), list) else []
        picked = [
            v
            for e in entries
            if isinstance(e, dict)
            for k, v in e.items()
            if str(k).split()[-1:] == ["/hydra/launcher"]
        ]
        launcher = given.get("hydra/launcher", picked[-1] if picked else None)
        hydra = data.get("hydra")
        values = hydra.get("launcher") if isinstance(hydra, dict) else None
        values = values if isinstance(values, dict) else {}
        mine = {k: v for k, v in values.items() if k in POOL_KEYS and f"hydra.launcher.{k}" not in given}
        own = [
            f"hydra.launcher.{k}={_as_text(v) if isinstance(v, str) else override_value(v)}"
            for k, v in mine.items()
        ]
        if "device" not in given and isinstance(data.get("device"), str):
            own.append(f"device={data['device']}")
        if launcher != "pool":
            continue
        for key in ("slots", "devices"):
            if error := text_list_problem(f"hydra.launcher.{key}", mine.get(key), in_file=True):
                return (
                    f"Invalid config: {shown_path(path, conf)}: {str(error).removeprefix('Invalid config: ')}"
                )
        rest = [a for a in argv if override_key(a) not in ("sweep", "hydra/launcher")]
        if problem := cpu_pool_problem(["hydra/launcher=pool", *own, *rest], detected=detected):
            if not own and not (picked and "hydra/launcher" not in given):
                return problem  # the command line's own line: the file sets nothing of the pool's
            return f"Invalid config: {shown_path(path, conf)}: {_in_file(problem, mine)}"
    return None


def _in_file(problem: str, mine: dict) -> str:
    """The pool's line without its head, its fix of a value the file sets (``set
    hydra.launcher.timeout_min=60``) written for the file too: ``write timeout_min: 60 under hydra:
    launcher: in the file, or set hydra.launcher.timeout_min=60 (the command line's replaces the file's)``."""
    said, sep, fix = problem.removeprefix("Invalid config: ").partition(". Fix: set hydra.launcher.")
    key, eq, value = fix.removesuffix(".").partition("=")
    if not sep or key not in mine or not eq or " " in value:
        return problem.removeprefix("Invalid config: ")
    return (
        f"{said}. Fix: write {key}: {value} under hydra: launcher: in the file, or set hydra.launcher.{key}="
        f"{value} (the command line's value replaces the file's)."
    )
