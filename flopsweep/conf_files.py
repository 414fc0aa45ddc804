"""The ``conf/`` files a command line selects, checked before Hydra reads them: bounded in bytes and in the
values their anchors and aliases expand to, and the sweep axes they add (``hydra.sweeper.params``).

Hydra reads a config file with PyYAML and builds an OmegaConf node for every value, once per alias: a
file of 6 levels of 10 aliases each (a "billion laughs" file, ~1 KiB) became a million nodes, ran for
12 minutes at 5.9 GB and printed OmegaConf's internals when stopped. :func:`conf_file_problem` composes
each selected file with PyYAML's composer (which keeps an alias as a reference to its anchor's node,
nothing copied) and counts the values the file expands to, each node once (:func:`expanded_size`); a
file over :data:`MAX_YAML_NODES`, over :data:`flopsweep.override_schema.MAX_YAML_BYTES`, or whose alias
refers to the node that holds it, is refused in one line. Which files: the primary config
(``conf/config.yaml``, or ``--config-name``'s), each ``group=option`` of the command line (a sweep of
options too; ``+sweep=NAME`` is ``conf/sweep/NAME.yaml``), and the files their defaults lists name.

:func:`sweep_params` gives the ``hydra.sweeper.params`` of those files as overrides, so that ``run.py``
checks a sweep file's axes as it checks the command line's (``sweep_file_problem``). Torch-free.
"""

from __future__ import annotations

import copy
import functools
import os
import stat

import yaml

from flopsweep.override_parsing import overrides_of
from flopsweep.override_schema import CONF, MAX_YAML_BYTES, SAFE_LOADER

MAX_YAML_NODES = 100_000
"""The most values (mappings, lists and scalars, each alias counted as the copy Hydra makes of it) a
config file of ``conf/`` may expand to; the checkout's own files have under 200 each."""

MAX_YAML_DEPTH = 64
"""The most mappings and lists a config file may nest (conf/'s own nest 3 deep). OmegaConf builds each
level through about ten Python calls, so a few hundred levels overflowed its stack with a traceback;
PyYAML's C loader composes any depth."""

MAX_CONF_FILES = 200
"""The most config files one command line's check reads (its defaults lists followed)."""


class ConfFileProblem(ValueError):
    """A config file refused: ``str()`` is the one line (``Invalid config: conf/...: why. Fix: ...``)."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def expanded_size(root: yaml.Node, bound: int = MAX_YAML_NODES) -> int:
    """The number of values ``root`` (a composed YAML node, ``yaml.compose``) stands for once each alias is
    a copy of its anchor's node, as OmegaConf builds it: 1 per scalar, 1 plus its keys' and values' sizes
    per mapping, 1 plus its items' per list. Each node is visited once (a shared node's size is
    remembered), so a file of nested aliases costs its size in the file, not its expansion. Capped at
    ``bound + 1``; a node inside itself (``a: &a [*a]``, which never ends) is ``bound + 1``. No recursion
    (a deeply nested file cannot overflow the stack here)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the nodes whose children are being counted: the path from the root
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, counted = stack.pop()
        key = id(node)
        if counted:
            open_nodes.discard(key)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in _children(node)), bound + 1)
            continue
        if key in sizes:
            continue
        if key in open_nodes:  # reached from inside itself
            return bound + 1
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def nesting_depth(root: yaml.Node, bound: int = MAX_YAML_DEPTH) -> int:
    """How many mappings and lists deep ``root`` (a composed YAML node) nests, capped at ``bound + 1``: a
    scalar is 0, ``[[1]]`` is 2; an alias counts as the copy of its anchor (a node inside itself is
    ``bound + 1``). No recursion; a node is walked again only when reached deeper than before."""
    reached: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    deepest = 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, yaml.ScalarNode) or reached.get(id(node), -1) >= depth:
            continue
        reached[id(node)] = depth
        deepest = max(deepest, depth + 1)
        if deepest > bound:
            return bound + 1
        stack.extend((c, depth + 1) for c in _children(node))
    return deepest


def shown_path(path: str, conf: str) -> str:
    """``path`` as a refusal names it: relative to the config folder ``conf``, under that folder's own
    name (``conf/model/x.yaml``), never an absolute path of this machine; a file of a folder of ``conf``
    that is a link to a folder beside ``conf`` (``conf/sweep`` -> ``../sweep``, where users write their
    sweep files) by the path the user knows, ``sweep/x.yaml``."""
    rel = os.path.relpath(path, conf)
    top, _, rest = rel.partition(os.sep)
    link = os.path.join(conf, top)
    if rest and os.path.islink(link):
        root = os.path.dirname(os.path.realpath(conf))
        target = os.path.realpath(link)
        if os.path.dirname(target) == root:  # a folder of the checkout, beside conf/
            return os.path.join(os.path.basename(target), rest)
    return os.path.join(os.path.basename(conf), rel)


def read_bounded(path: str) -> bytes:
    """At most ``MAX_YAML_BYTES + 1`` bytes of ``path`` (a link followed, as Hydra does; a FIFO or device
    never read: ``O_NONBLOCK``, then ``fstat``).

    Raises:
        OSError: it cannot be opened or is not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        chunks, size = [], 0
        while size <= MAX_YAML_BYTES and (chunk := os.read(fd, MAX_YAML_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _not_yaml(shown: str, exc: Exception) -> str:
    """The line refusing a file that is not UTF-8 YAML text: PyYAML's reason and where (line and column,
    1-based), the bytes not shown (a binary file's would garble the terminal)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    if isinstance(exc, yaml.reader.ReaderError):
        char = exc.character  # the code point refused (the text is decoded already)
        char = ord(char) if isinstance(char, str) else char
        return (
            f"Invalid config: {shown}: holds a control character YAML does not allow (U+{char:04X} at "
            f"offset {exc.position}). Fix: write the file as UTF-8 YAML text, a mapping of keys (e.g. "
            "conf/sweep/smoke.yaml)."
        )
    problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
    return (
        f"Invalid config: {shown}: is not YAML ({problem}{where}). Fix: correct the YAML there (a config "
        "file is a mapping of keys, e.g. conf/sweep/smoke.yaml)."
    )


def _python_reason(text: str, exc: Exception) -> Exception:
    """The error PyYAML's pure-Python parser gives for ``text``, which names what it found (``expected
    ',' or ']', but got ':'``) where libyaml's says only what it missed; ``exc`` where it gives none."""
    try:
        yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError) as python_exc:
        return python_exc
    except RecursionError:
        pass
    return exc


def checked_yaml(path: str, conf: str = CONF) -> object:
    """The plain data of the config file ``path`` (PyYAML's safe loader,
    :data:`~flopsweep.override_schema.SAFE_LOADER`), once its bounds are checked; None
    for a file that cannot be read (Hydra's own message says so) or holds no value.

    Raises:
        ConfFileProblem: not UTF-8, or not YAML (PyYAML's reason, line and column: Hydra printed a
            traceback, or a ``UnicodeDecodeError`` of a check that read it); over :data:`MAX_YAML_BYTES`
            bytes; anchors and aliases that expand to more than
            :data:`MAX_YAML_NODES` values, or an alias inside its own anchor; nested deeper than Python's
            recursion limit.
    """
    shown = shown_path(path, conf)
    try:
        data = read_bounded(path)
    except OSError:
        return None
    if len(data) > PARSE_CACHE_MAX_BYTES:
        return _parsed_yaml.__wrapped__(shown, data)
    return copy.deepcopy(_parsed_yaml(shown, data))


PARSE_CACHE_MAX_BYTES = 65536
"""The largest file whose parse :func:`checked_yaml` keeps (conf/'s own are a few KiB): the checks before
Hydra read each selected file dozens of times a start."""


@functools.lru_cache(maxsize=256)
def _parsed_yaml(shown: str, data: bytes) -> object:
    """:func:`checked_yaml` of the bytes ``data`` of the file shown as ``shown``: the same bytes give the
    same value (kept, and copied for each caller); a refusal raises :class:`ConfFileProblem` (not kept)."""
    if len(data) > MAX_YAML_BYTES:
        raise ConfFileProblem(
            f"Invalid config: {shown}: is over the bound of {MAX_YAML_BYTES} bytes for a config file "
            "(conf/'s own are a few KiB). Fix: split it, or sweep ranges (range(a,b)) instead of listing "
            "values."
        )
    try:
        text = data.decode("utf-8")  # as Hydra reads it (PyYAML would take UTF-16 after a BOM)
    except UnicodeDecodeError as exc:
        raise ConfFileProblem(
            f"Invalid config: {shown}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}). Fix: write the file as UTF-8 YAML text, a mapping of keys (e.g. "
            "conf/sweep/smoke.yaml)."
        ) from None
    try:
        root = yaml.compose(text, Loader=SAFE_LOADER)
    except RecursionError:
        raise ConfFileProblem(
            f"Invalid config: {shown}: its values are nested too deep to read. Fix: flatten the nesting "
            "(a config file needs a few levels)."
        ) from None
    except (yaml.YAMLError, ValueError) as exc:
        raise ConfFileProblem(_not_yaml(shown, _python_reason(text, exc))) from None
    if root is None:
        return None
    if nesting_depth(root) > MAX_YAML_DEPTH:
        raise ConfFileProblem(
            f"Invalid config: {shown}: its values are nested too deep to read (over {MAX_YAML_DEPTH} "
            "levels). Fix: flatten the nesting (a config file needs a few levels)."
        )
    if expanded_size(root) > MAX_YAML_NODES:
        raise ConfFileProblem(
            f"Invalid config: {shown}: its anchors and aliases (&name, *name) expand to more than "
            f"{MAX_YAML_NODES} values, or an alias lies inside its own anchor (Hydra builds a copy of the "
            "anchor for every alias: a few nested aliases make millions). Fix: write each value out once, "
            f"without aliases of aliases, in at most {MAX_YAML_NODES} values."
        )
    try:
        return yaml.load(text, Loader=SAFE_LOADER)
    except (yaml.YAMLError, ValueError) as exc:  # a constructor's: a bad !!int, a merge of a list of scalars
        raise ConfFileProblem(_not_yaml(shown, exc)) from None
    except RecursionError:
        return None


def _default_files(data: object, path: str, conf: str) -> list[str]:
    """The files of ``conf`` that the defaults list of ``data`` (the file ``path``'s) names: ``group:
    option`` and ``override /group: option`` entries (a list of options too), a group relative to the
    file's own unless written with a leading ``/``, and a bare ``option`` of the file's own group."""
    defaults = data.get("defaults") if isinstance(data, dict) else None
    if not isinstance(defaults, list):
        return []
    own = os.path.relpath(os.path.dirname(path), conf)
    own = "" if own == "." else own
    out = []
    for entry in defaults:
        if isinstance(entry, str):
            pairs = [(own, entry)]
        elif isinstance(entry, dict):
            pairs = []
            for key, value in entry.items():
                words = str(key).split()
                group = words[-1].partition("@")[0] if words else ""
                group = group[1:] if group.startswith("/") else os.path.join(own, group)
                pairs += [
                    (group, str(v)) for v in (value if isinstance(value, list) else [value]) if v is not None
                ]
        else:
            continue
        out += [os.path.join(conf, group, f"{option}.yaml") for group, option in pairs if option != "_self_"]
    return out


def selected_files(argv: list[str], conf: str = CONF) -> list[str]:
    """The config files of ``conf`` that the command line ``argv`` selects directly: the primary config
    (``--config-name NAME``/``-cn NAME``, else ``config.yaml``) and each ``group=option`` (each option of
    a sweep over them, a ``glob()`` matched), existing files only."""
    name = "config"
    for i, arg in enumerate(argv):
        if arg in ("-cn", "--config-name") and i + 1 < len(argv):
            name = argv[i + 1]
        elif arg.startswith("--config-name="):
            name = arg.partition("=")[2]
    files = [os.path.join(conf, f"{name.removesuffix('.yaml')}.yaml")]
    return [f for f in files + _group_files(argv, conf) if os.path.isfile(f)]


def _group_files(overrides: list[str], conf: str) -> list[str]:
    """The files of each ``group=option`` among ``overrides`` (each option of a sweep, a ``glob()``
    matched), existing or not."""
    from flopsweep.override_parsing import parsed_or_none
    from flopsweep.override_schema import listed_values

    files = []
    for text in overrides_of(overrides):
        if (o := parsed_or_none(text)) is None:  # the grammar's own line (syntax_problem)
            continue
        group = o.key_or_group
        if o.is_delete() or not os.path.isdir(os.path.join(conf, group)):
            continue
        try:
            options = listed_values(o) or []
        except Exception:  # noqa: BLE001 - a value the group's own check refuses
            options = []
        files += [os.path.join(conf, group, f"{option}.yaml") for option in options]
    return files


def read_selected(argv: list[str], conf: str = CONF) -> dict[str, object]:
    """Each config file the command line selects (:func:`selected_files`) and the files their defaults
    lists name, in turn (at most :data:`MAX_CONF_FILES`), checked (:func:`checked_yaml`): the path and
    its plain data.

    Raises:
        ConfFileProblem: the first file refused.
    """
    queue = selected_files(argv, conf)
    read: dict[str, object] = {}
    while queue and len(read) < MAX_CONF_FILES:
        path = os.path.normpath(queue.pop(0))
        if path in read or not os.path.isfile(path):
            continue
        read[path] = data = checked_yaml(path, conf)
        queue += _default_files(data, path, conf) + _group_files(
            [o for _, o in params_of(path, data, conf)], conf
        )
    return read


def conf_file_problem(argv: list[str], conf: str = CONF) -> str | None:
    """The one line refusing a config file the command line selects (:func:`read_selected`), else None."""
    try:
        read_selected(argv, conf)
    except ConfFileProblem as exc:
        return str(exc)
    return None


def sweep_params(argv: list[str], conf: str = CONF) -> list[tuple[str, str]]:
    """The sweep axes of the selected files' ``hydra.sweeper.params`` (``seed: range(0,4)``), as Hydra's
    basic sweeper writes them (``f"{key}={value}"``): ``(the file as shown, "seed=range(0,4)")``, in the
    files' order. Files that :func:`conf_file_problem` refuses give none."""
    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return []
    return [pair for path, data in read.items() for pair in params_of(path, data, conf)]


def params_of(path: str, data: object, conf: str) -> list[tuple[str, str]]:
    """``(shown path, "KEY=VALUE")`` of each ``hydra.sweeper.params`` entry of one parsed file ``data``
    (``path`` under ``conf``); empty when it has none."""
    hydra = data.get("hydra") if isinstance(data, dict) else None
    sweeper = hydra.get("sweeper") if isinstance(hydra, dict) else None
    params = sweeper.get("params") if isinstance(sweeper, dict) else None
    if not isinstance(params, dict):
        return []
    return [(shown_path(path, conf), f"{key}={value}") for key, value in params.items()]


def _file_picks(argv: list[str], conf: str) -> list[tuple[str, str]]:
    """``(group, option)`` for each ``override /group: option`` of the defaults lists of the files the
    command line selects: the options a ``+sweep=`` file puts in place of ``conf/config.yaml``'s."""
    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return []
    return picks_of(read, conf)


def picks_of(read: dict[str, object], conf: str = CONF) -> list[tuple[str, str]]:
    """``(group, option)`` of each ``override /group: option`` in the defaults lists of ``read`` (the
    files :func:`read_selected` returns): :func:`_file_picks` of files already read."""
    out = []
    for data in read.values():
        for entry in (data.get("defaults") if isinstance(data, dict) else None) or []:
            if not isinstance(entry, dict):
                continue
            for key, value in entry.items():
                words = str(key).split()
                if len(words) == 2 and words[0] == "override" and isinstance(value, str):
                    group = words[1].partition("@")[0].lstrip("/")
                    if os.path.isdir(os.path.join(conf, group)) and not group.startswith("hydra"):
                        out.append((group, value))
    return out


def sweep_file_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a sweep axis of a selected file's ``hydra.sweeper.params`` that the command line's
    own checks refuse, with the file named, else None (a command line without ``-m`` runs no sweep).

    Checked as if on the command line (before its own overrides, as Hydra's basic sweeper puts them; a
    key the command line gives itself replaces the file's; a key of an option read in the option the
    file's defaults pick, ``override /attention: blocksparse``, unless the command line picks one): the
    override grammar, the sweep's size with the
    command line's axes (:data:`flopsweep.override_multirun.MAX_SWEEP_JOBS`, an axis of no value), a
    group's options, each value's type and bounds (``model.seq_len: 1000000000000``). Each would otherwise
    surface only once Hydra had composed the config of every job of the batch (about 0.3 s a job) and the
    first job had started."""
    from flopsweep.command_line_checks import repeats_axis_problem
    from flopsweep.decimal_comma import decimal_comma_problem
    from flopsweep.flags import is_multirun
    from flopsweep.override_grammar import control_character_problem, syntax_problem
    from flopsweep.override_multirun import sweep_size_problem
    from flopsweep.override_parsing import given_keys, override_key
    from flopsweep.overrides import group_choice_problem, type_problem
    from flopsweep.sweep_file_fix import in_file_form

    if not is_multirun(argv):
        return None
    given = given_keys(argv)
    params = [(shown, o) for shown, o in sweep_params(argv, conf) if override_key(o) not in given]
    if not params:
        return None
    own = [o for _, o in params]
    picks = [
        f"{g}={o}" for g, o in _file_picks(argv, conf) if g not in given
    ]  # the schemas the axes are read in
    combined = picks + own + argv  # the command line's own overrides passed these checks already
    where = ", ".join(dict.fromkeys(shown for shown, _ in params))
    for check, given in (
        (control_character_problem, own),  # tag: "a\tb,c": a tab, as on the command line
        (params_digits_problem, own),  # steps.measure: ٢,٣: digits 0-9 (before the grammar's "quote it")
        (syntax_problem, own),
        (decimal_comma_problem, own),  # cost.usd_per_gpu_hour: 2,50: one price, not a sweep
        (repeats_axis_problem, own),  # the command line's repeats check (#404), then: no axis
        (group_choice_problem, own),
        (sweep_size_problem, combined),
        (type_problem, combined),
    ):
        if problem := check(given):
            line = (
                f"Invalid config: {where} (hydra.sweeper.params): {problem.removeprefix('Invalid config: ')}"
            )
            said = problem.removeprefix("Invalid config: ")
            axis = next(((p, o) for p, o in params if said.startswith(o.partition("=")[0] + "=")), None)
            return (
                in_file_form(line, axis[0], axis=axis[1]) if axis else line
            )  # the fix as the file writes it
    return None


def params_digits_problem(params: list[str]) -> str | None:
    """One line for the first axis of a sweep file's ``hydra.sweeper.params`` (``KEY=VALUE`` each) whose
    number is written in another script's digits (``steps.measure: ٢,٣``, ``seed: １,２``), as the command
    line's (:func:`flopsweep.foreign_digits.foreign_digits_problem`), the fix the axis to write in the file
    (``Fix: write steps.measure: 2,3 in hydra.sweeper.params.``); else None. Hydra's grammar had refused it
    with "quote the value", a string the key then refuses."""
    from flopsweep.foreign_digits import foreign_digits_problem

    for axis in params:
        if (line := foreign_digits_problem(["-m", axis])) is None:
            continue
        said, _, fix = line.partition(" Fix: write ")
        key, _, value = fix.removesuffix(".").partition("=")
        return f"{said} Fix: write {key}: {value} in hydra.sweeper.params." if key and value else line
    return None


LISTED_GROUPS = frozenset({"sweep", "hydra"})
"""The folders of ``conf/`` no listing of options reads whole (a sweep file is read when picked; Hydra's own
groups by Hydra): every other folder's files are read by :func:`flopsweep.override_schema.option_kind` or
:func:`flopsweep.model_identity.options` whatever the command line picks."""


def unreadable_option_lines(conf: str = CONF) -> list[str]:
    """One warning line for each option file of a group of ``conf`` (each folder but those of
    :data:`LISTED_GROUPS`, sub-folders too) that :func:`checked_yaml` refuses: ``conf/model/bad1.yaml: is
    not YAML (... at line 3, column 1); left out of the model options. Fix: correct the YAML there, or
    remove the file.``; empty when all read. ``run.py`` prints them before Hydra for a run that picks
    another option (one that picks the file is refused by :func:`conf_file_problem`): such a file stopped
    every run and plan with a YAML traceback that named no file (a listing of ``conf/model/`` read it)."""
    lines = []
    for group in sorted(os.listdir(conf)):
        folder = os.path.join(conf, group)
        if group in LISTED_GROUPS or not os.path.isdir(folder):
            continue
        for root, _, files in os.walk(folder):
            for name in sorted(f for f in files if f.endswith(".yaml")):
                try:
                    checked_yaml(os.path.join(root, name), conf)
                except ConfFileProblem as exc:
                    why = str(exc).removeprefix("Invalid config: ").partition(". Fix: ")[0]
                    lines.append(
                        f"flopsweep: warning: {why}; left out of the {group} options. Fix: correct the YAML "
                        "there, or remove the file."
                    )
    return lines


def root_config_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a damaged ``conf/config.yaml`` (the primary config, unless ``--config-name`` names
    another), else None: not YAML, not a mapping, or a defaults list that lacks ``base_config`` (the
    schema) or a ``GROUP: OPTION`` entry for a group of :data:`flopsweep.options.GROUP_BASES` that has a
    folder in ``conf`` (none for a folder of no such group). Its truncated
    form was blamed on the command line's ``model=llama-tiny`` ("a group added with +"), whose fix then
    stopped with OmegaConf's "Missing key defaults" traceback."""
    from flopsweep.options import GROUP_BASES

    groups = [g for g in GROUP_BASES if os.path.isdir(os.path.join(conf, g))]
    if not groups or any(a in ("-cn", "--config-name") or a.startswith("--config-name=") for a in argv):
        return None  # a config folder of no option groups (a test's) has nothing to pick
    path = os.path.join(conf, "config.yaml")
    shown = shown_path(path, conf)
    fix = f"Fix: restore it from the checkout: git checkout {shown} (or reinstall flopsweep)."
    try:
        data = checked_yaml(path, conf)
    except ConfFileProblem as exc:
        return f"{str(exc).partition('. Fix: ')[0]}: the checkout's root config is damaged. {fix}"
    defaults = data.get("defaults") if isinstance(data, dict) else None
    entries = defaults if isinstance(defaults, list) else []
    picked = {str(k) for e in entries if isinstance(e, dict) for k in e}
    missing = [g for g in groups if g not in picked]
    if "base_config" in entries and not missing:
        return None
    what = (
        "has no defaults list"
        if not isinstance(defaults, list)
        else "has no base_config in its defaults list"
        if "base_config" not in entries
        else "has a defaults list that picks no option of " + ", ".join(missing)
    )
    unpicked = ", ".join(missing) or "the schema"
    return (
        f"Invalid config: {shown}: {what} ({unpicked} unpicked): the checkout's root config is damaged. {fix}"
    )


@functools.lru_cache(maxsize=256)
def repeated_key_line(text: str, shown: str) -> str | None:
    """``Invalid config: SHOWN: found duplicate key K at line N. Fix: give each key once.`` when Hydra's
    reader (OmegaConf's, which refuses a key given twice) refuses ``text``, the YAML of the file shown as
    ``shown``; ``""`` when OmegaConf refuses it otherwise (Hydra reports that itself); None when it reads.
    Kept for the same arguments (the checks before Hydra ask it of each file several times a start)."""
    from omegaconf import OmegaConf

    try:
        OmegaConf.create(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        why = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        return f"Invalid config: {shown}: {why}{where}. Fix: give each key once."
    except Exception:  # noqa: BLE001 - OmegaConf's own; Hydra reports it
        return ""
    return None
