"""Command-line overrides that Hydra's override grammar cannot read, or reads as a sweep without
``-m``: one line each, before Hydra starts (``run.py``'s :func:`refusal`, exit 2).

Hydra would refuse them too, in four to six lines (``LexerNoViableAltException: tag=ünï`` with a
caret, ``See https://hydra.cc/...``, ``Set the environment variable HYDRA_FULL_ERROR=1``; or
"Ambiguous value for argument" with three numbered choices), exit 1, and without naming which fix
fits. Torch-free: this runs before anything heavy is imported.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable

from flopsweep.config import typed_form
from flopsweep.flags import is_multirun
from flopsweep.override_lookalike import meant_override
from flopsweep.override_parsing import overrides_of, parsed_overrides
from flopsweep.override_schema import empty_choice_line, quoted_refusal
from flopsweep.overrides import CONF

GRAMMAR_PAGE = "https://hydra.cc/docs/advanced/override_grammar/basic/"
"""Hydra's page on the override grammar (quoting, lists, sweeps)."""


def given_keys(argv: list[str]) -> set[str]:
    """The keys the command line ``argv`` gives a value (``+``, ``++`` and ``~`` dropped)."""
    return {o.partition("=")[0].lstrip("+~") for o in overrides_of(argv)}


def _quoted(key: str, value: str) -> str:
    """``KEY=VALUE`` with the value quoted for Hydra (a quote the value lacks) and the whole
    override in single quotes for a POSIX shell, e.g. ``'tag="ünï"'``."""
    inner = '"' if '"' not in value else "'"
    text = f"{key}={inner}{value}{inner}"
    return "'" + text.replace("'", "'\\''") + "'" if inner == '"' else '"' + text + '"'


def _reason(override: str, message: str) -> str:
    """What Hydra's parser found, in a few words: the character its lexer stopped at (it marks
    it with a caret under the override), else its parser's first line."""
    lines = [line for line in message.splitlines() if line.strip()]
    if lines and lines[0].startswith("LexerNoViableAltException:") and len(lines) > 1:
        at = lines[1].index("^") - len("LexerNoViableAltException: ") if "^" in lines[1] else -1
        if 0 <= at < len(override):
            return f"character {at + 1}, {override[at]!r}, cannot stand there unquoted"
    for line in lines:
        if line.startswith(("Error parsing override", "See https://")):
            continue
        return line.strip()
    return "not in Hydra's override grammar"


_KEY = re.compile(r"[+~]{0,2}[A-Za-z_][\w./@-]*", re.ASCII)
"""A key as Hydra's grammar takes it (``+``/``++``/``~`` first, a package after ``@``)."""

_DIGIT_FIRST = re.compile(r"(?:^|\.)\d+[A-Za-z_]")
"""A part of a dotted key that begins with digits then a letter (``optim.1r``): the grammar reads a part as
a name or a whole number, so quoting the value never helps (it had quoted it again and again, to a
RecursionError)."""

_PAIRS = (("[", "]"), ("{", "}"), ("(", ")"))


def is_list_key(key: str) -> bool:
    """Whether ``key`` (dotted) is a list of :class:`flopsweep.config.RunConfig` (``plan_clusters``,
    ``space.backends``): its value quoted whole would be one string, which the key refuses."""
    import dataclasses

    from flopsweep.config import RunConfig

    node: object = RunConfig
    for part in key.split("."):
        fields = {f.name: f for f in dataclasses.fields(node)} if dataclasses.is_dataclass(node) else {}
        if part not in fields:
            return False
        f = fields[part]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        node = default if dataclasses.is_dataclass(default) else type(default)
    return node is list


def _fix(key: str, value: str) -> str:
    """The fix for an override the grammar refuses: a key of the grammar's characters, a quote or
    bracket closed, each element of a list quoted (``'plan_clusters=["H100:8@٢.5"]'``: a list still, where the
    whole value quoted is one string that ``plan_clusters`` refuses), else the value quoted as one string (the
    outer quotes are the shell's)."""
    if not _KEY.fullmatch(key):
        return (
            "a key is ASCII letters, digits and _ . / @ - (no space, nothing else); "
            "write KEY=VALUE, e.g. tag=mine"
        )
    quote = value[:1]
    if quote in ("'", '"') and (len(value) == 1 or not value.endswith(quote)):  # a quote left open
        shell = '"' if quote == "'" else "'"
        return f"close the quote: {shell}{key}={value}{quote}{shell}"
    for opening, closing in _PAIRS:
        if value.count(opening) > value.count(closing):
            return (
                f"close the {opening}: {key}={value}{closing * (value.count(opening) - value.count(closing))}"
            )
    if fix := _tag_fix(key, value):
        return fix
    inside = value[1:-1]
    if (
        value.startswith("[")
        and value.endswith("]")
        and not any(c in inside for c in "[]{}()'\"")
        and is_list_key(key.lstrip("+~"))
    ):
        each = ",".join(f'"{e.strip()}"' for e in inside.split(","))  # a list stays a list
        return f"quote each element, '{key}=[{each}]' (the outer quotes are the shell's)"
    return f"quote the value as one string, {_quoted(key, value)} (the outer quotes are the shell's)"


def _tag_fix(key: str, value: str) -> str | None:
    """The fix for ``tag(a,1,2)``: Hydra's ``tag()`` labels a sweep, its last argument
    (``tag(a,choice(1,2))``), and every other argument is a label (a string). The sweepers here ignore
    the labels, so the values alone sweep the same (``KEY=1,2``) and ``tag=a`` labels each run's record;
    the value quoted whole would be one string, which a number key refuses. None for any other value."""
    inner = value.strip()
    if not (inner.startswith("tag(") and inner.endswith(")")):
        return None
    parts = split_choices(inner[4:-1])
    if not parts or len(parts) < 2:
        return None
    labels, values = [], []
    for part in (p.strip() for p in parts):
        (values if values or not part.isidentifier() else labels).append(part)
    if not labels or not values:
        return None
    swept = ",".join(values)
    sweep = values[0] if len(values) == 1 and "(" in values[0] else f"choice({swept})"
    return (
        f"tag() labels a sweep, its last argument, and the sweepers here ignore the label: "
        f"{key}={swept} tag={'_'.join(labels)} sweeps the same values and labels each run's record "
        f"(the sweep in tag() is written {key}=tag({','.join(labels)},{sweep}))"
    )


def control_character_problem(argv: list[str]) -> str | None:
    """One line for an override holding a control or invisible character (ESC, a line break, a tab,
    a bidirectional mark, a no-break space: any that :func:`flopsweep.text.printable` escapes), else
    None. Such a character is never meant (a pasted colour code, a line break inside quotes); the
    grammar refuses some, and its fix then closed the ``[`` of ``\\x1b[31m``. The line shows it
    escaped (``run.py`` prints every refusal through :func:`~flopsweep.text.printable`)."""
    for override in overrides_of(argv):
        at = next((i for i, c in enumerate(override) if not c.isprintable() and c != " "), None)
        if at is None:
            continue
        key = override.partition("=")[0]
        part = "key" if at < len(key) else "value"
        what, why, fix = character_said(override[at])
        return (
            f"Invalid config: {override}: its {part} holds {what} (character {at + 1}), {why}. "
            f"Fix: {fix} from the {part}."
        )
    return None


def character_said(char: str) -> tuple[str, str, str]:
    """What an unprintable character is, why it is refused and what to do, for
    :func:`control_character_problem`'s line: a tab or line break is no terminal command (``which a
    terminal would obey`` was said of a tab too); ESC and the other C0/C1 controls are; a bidirectional
    mark, a zero-width or a no-break space is invisible. ``char``: one character."""
    import unicodedata

    shown = char.encode("unicode_escape").decode()
    if char == "\t":
        return f"a tab, {shown}", "which is part of no key or value (a pasted tab)", "remove it"
    if char in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029":
        return f"a line break, {shown}", "which is part of no key or value (a pasted line)", "remove it"
    if unicodedata.category(char) == "Cc":
        return (
            f"a control character, {shown}",
            "which a terminal would obey",
            "remove it (and any escape sequence it starts)",
        )
    name = unicodedata.name(char, "unnamed")
    return f"an invisible character, {shown}, {name}", "which looks like nothing or a space", "remove it"


def split_choices(value: str) -> list[str] | None:
    """``value`` split at its top-level commas (outside brackets and quotes), or None when a bracket or
    quote is left open."""
    items, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(value):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(value[start:i])
            start = i + 1
    if quote or depth:
        return None
    return [*items, value[start:]]


def _empty_choice(key: str, value: str) -> str | None:
    """The reason and fix for a sweep list with an empty choice (``model=gpt-tiny,``), else None."""
    items = split_choices(value)
    if not items or len(items) < 2 or all(i.strip() for i in items):
        return None
    kept = [i.strip() for i in items if i.strip()]
    if not kept:
        return None
    where = ["two commas in a row", "a leading comma"][not items[0].strip()]
    where = "a trailing comma" if not items[-1].strip() else where
    return f"{where} {'leave' if 'two' in where else 'leaves'} an empty choice. Fix: {key}={','.join(kept)}"


def _cleaned_list(key: str, value: str) -> tuple[str, str, str | None] | None:
    """The override meant by a list with an empty item (``plan_clusters=[H100:8,]``: a trailing comma,
    which the grammar refuses), look-alikes of its ASCII punctuation folded too (``[H100：8,]``), with
    the reason and the fix's words (None: a "did you mean"); None when the cleaned override does not
    parse either. The advice to quote the value made a string the list key refused in turn."""
    from flopsweep.lookalike import drop_empty_items
    from flopsweep.override_parsing import parsed_or_none

    cleaned = drop_empty_items(value)
    if cleaned == value:
        return None
    kinds = [
        name
        for name, pattern in (
            ("a trailing comma", r",\s*[\]})]"),
            ("a leading comma", r"[\[{(]\s*,"),
            ("two commas in a row", r",\s*,"),
        )
        if re.search(pattern, value)
    ]
    where = kinds[0] if len(kinds) == 1 else "extra commas"
    verb = "leave" if where[0] in "te" else "leaves"  # two commas, extra commas: plural
    why = f"{where} {verb} {'an empty item' if len(kinds) == 1 else 'empty items'} in the list"
    fixed = f"{key}={cleaned}"
    if parsed_or_none(fixed) is None:  # a look-alike beside the comma, or another fault
        folded = meant_override(fixed)
        return None if folded is None else (folded[0], f"{folded[1]}; {why}", None)
    drop = {"two commas in a row": "a comma", "extra commas": "the extra commas"}.get(
        where, where.replace("a ", "the ", 1)
    )
    return fixed, why, f"drop {drop}"


def needs_multirun(override: str) -> bool:
    """Whether ``override`` runs only under ``-m``: ``repeats=`` above 1 (its rounds are jobs of a
    sweep, ``command_line_checks.repeats_problem``), a ``hydra/sweeper`` other than :data:`DEFAULT_SWEEPER`
    (:func:`sweeper_without_m_problem`), a sweep of several values (:func:`sweep_without_m_problem`)."""
    key, _, value = override.partition("=")
    key, value = key.lstrip("+"), value.strip().strip("'\"")
    if key == "repeats":
        return value.isascii() and value.isdigit() and int(value) > 1
    if key in ("hydra/sweeper", "hydra/launcher"):
        return value != (DEFAULT_SWEEPER if key == "hydra/sweeper" else DEFAULT_LAUNCHER)
    items = split_choices(value)
    return bool(items and len(items) > 1) or value.startswith(("range(", "glob("))


def runnable_line(argv: list[str], override: str, meant: str) -> tuple[str, str]:
    """The fix that replaces ``override`` of ``argv`` by ``meant`` (the ASCII override a look-alike
    stands for), as a "did you mean": ``meant`` alone where the command line then passes the checks
    that ``meant`` meets, else the whole corrected command line with what ``meant`` needs beside it
    (:func:`flopsweep.key_needs.needed`: ``fault.rаnk=1`` -> ``flopsweep backend=ddp fault.kind=raise
    nproc_per_node=2 fault.rank=1``; ``-m`` for :func:`needs_multirun`: ``repeats=２`` -> ``flopsweep -m
    repeats=2``), with why (``(fault.rank=1 alone is refused: it needs ...)``); every other look-alike
    of the line is folded in it too. Returns ``(line, note)``."""
    from flopsweep.cli import COMMAND
    from flopsweep.key_needs import given_values, needed, still_meets
    from flopsweep.override_parsing import parsed_all_or_none

    folds = {override: meant}  # every look-alike of the line, so that the fix meets none again
    for text in overrides_of(argv):
        if text != override and not text.isascii() and (other := meant_override(text)):
            folds[text] = other[0]
    line = [folds.get(a, a) for a in argv]
    parsed = []
    for text in overrides_of(line):
        parsed += parsed_all_or_none([text]) or []  # None: another override's own line comes later
    given = given_values(parsed)
    needs, meets = [], []
    for new in folds.values():
        key, eq, value = new.partition("=")
        key = key.lstrip("+")
        first = value.split(",")[0].strip() if "[" not in value else value
        for extra in needed(key, first, given) if "/" not in key and eq else []:
            if extra not in line:  # in place of the command line's value of its key
                line = [a for a in line if a.partition("=")[0].lstrip("+") != extra.partition("=")[0]]
                line.insert(line.index(new), extra)
                needs.append(extra)
        if needs_multirun(new) and not is_multirun(line):
            line.insert(0, "-m")
            needs.append("-m")
        if note := still_meets(key, first, given):
            meets.append(note)
    said = "".join(f"; {m}" for m in meets)
    if not needs and len(folds) == 1:
        return meant, f" ({said[2:]})" if said else ""
    if not needs:
        return f"{COMMAND} {' '.join(line)}", f" ({said[2:]})" if said else ""
    return f"{COMMAND} {' '.join(line)}", f" ({meant} alone is refused: it needs {' '.join(needs)}{said})"


def syntax_problem(argv: list[str], recheck: Callable[[list[str]], str | None] | None = None) -> str | None:
    """One line for the first override Hydra's grammar cannot parse, else None. ``recheck`` (``run.py``'s
    :func:`refusal`) checks a look-alike's corrected line: where another check refuses it still (a
    choice of the command line's own, ``repeats=２ plan=true``), its line follows the fix (``then: ...``).

    The classes: an empty choice in a list (``model=gpt-tiny,``, ``a,,b``: the fix drops it), a
    non-ASCII character outside quotes (``tag=ünïcødé``, ``tag=日本``), a quote or
    bracket left open (``tag="abc``, ``model.n_layer=[2``), a stray ``)`` or a second ``=``
    (``model.n_layer=2=3``), a space in a key (``'a b=3'``), a look-alike of an ASCII letter in a key
    or a group's option (``model=llama-tinу``, a Cyrillic ``у``: the fix is the ASCII override,
    :func:`flopsweep.override_lookalike.meant_override`). The fix closes what is open, or quotes
    the value for Hydra (the outer quotes are the shell's), which a string key takes as written; a
    number, list or sweep is written in the grammar (:data:`GRAMMAR_PAGE`).
    """
    from flopsweep.config import invalid_line
    from flopsweep.override_parsing import override_parser

    for override in overrides_of(argv):
        try:
            override_parser().parse_overrides([override])
        except Exception as exc:  # noqa: BLE001 - hydra's OverrideParseException, or a lexer error
            key, _, value = override.partition("=")
            if _KEY.fullmatch(key) and (empty := empty_choice_line(key, value) or _empty_choice(key, value)):
                return f"Invalid config: {override}: {empty}"
            folded = meant_override(override)
            meant = (*folded, None) if folded else _cleaned_list(key, value) if _KEY.fullmatch(key) else None
            if meant:
                line, note = runnable_line(argv, override, meant[0])
                fixed = line.split()[1:] if " " in line else [meant[0] if a == override else a for a in argv]
                if recheck is not None and (again := recheck(fixed)):
                    note += f" (then: {again.removeprefix('Invalid config: ')})"
                fix = f"did you mean {line}?" if meant[2] is None else f"{meant[2]}: {line}"
                return invalid_line(
                    override, f"Hydra's override grammar cannot read it ({meant[1]})", fix + note
                )
            unread = f"Hydra's override grammar cannot read it ({_reason(override, str(exc))})"
            if _KEY.fullmatch(key) and _DIGIT_FIRST.search(key.lstrip("+~")):  # optim.1r: no quote helps
                from flopsweep.overrides import unknown_key_problem

                named = key.lstrip("+~")
                return unknown_key_problem(named, value) or invalid_line(
                    override, unread, "begin each part of the key with a letter or _, e.g. optim.lr"
                )
            fix = _fix(key, value)
            again = quoted_refusal(argv, override, recheck) if fix.startswith("quote the") else None
            if fix.startswith("quote each") and recheck is not None:  # never a fix refused again
                each = fix.split("'")[1]  # plan_clusters=["H100:8❌8"]: its size has no x
                line = recheck([each if a == override else a for a in argv])
                again = line if line and line.startswith(f"Invalid config: {key.lstrip('+~')}=") else None
            return again or invalid_line(override, unread, f"{fix}; the grammar: {GRAMMAR_PAGE}")
    return None


def sweep_without_m_problem(argv: list[str]) -> str | None:
    """One line for a sweep override (``backend=ddp,fsdp``, ``tag=a,b``, ``seed=range(3)``) on a
    command line without ``-m``/``--multirun``, else None: several values are several jobs.

    Hydra's own "Ambiguous value" block lists three ways out; the line names the key, the value and
    the two that fit: ``-m`` for one job each, or one quoted string (a group option or a number
    never is one). Keys under ``hydra.`` are Hydra's own and left to it.
    """
    from flopsweep.decimal_comma import decimal_comma
    from flopsweep.flags import one_value, prints_only

    if is_multirun(argv):
        return None
    if (parsed := parsed_overrides(argv)) is None:  # syntax_problem's
        return None
    for o in parsed:
        if not o.is_sweep_override() or o.key_or_group.startswith("hydra"):
            continue
        override = o.input_line or f"{o.key_or_group}=..."
        key, _, value = override.partition("=")
        name = key.lstrip("+~")
        fix = f"add -m (flopsweep -m {override} ...)"
        if prints_only(argv):  # -m --cfg is refused: one value prints one job's config
            one = [one_value(a) if a in overrides_of(argv) else a for a in argv]
            fix = f"one value prints one job's config: flopsweep {' '.join(one)}"
        values = list(getattr(o.value(), "list", None) or [])
        group = "." not in name and os.path.isdir(os.path.join(CONF, name))
        if values and not group and not all(isinstance(v, int | float | bool) for v in values):
            fix += f", or, for {name} as one string, quote it: {_quoted(key, value)}"
        elif comma := decimal_comma(name, value, overrides_of(argv)):
            fix += f", or, if {value} is a decimal comma, write it with a point: {name}={comma}"
        return (
            f"Invalid config: {override}: several values are a sweep, one job each, and this command "
            f"line has no -m. Fix: {fix}."
        )
    return None


DEFAULT_SWEEPER = "basic_batched"
"""``conf/config.yaml``'s ``hydra/sweeper`` choice: Hydra's basic sweeper, flopsweep's batch size."""


DEFAULT_LAUNCHER = "basic"
"""Hydra's own launcher, conf/config.yaml's (it picks none): jobs one after another in this process."""


def sweeper_without_m_problem(argv: list[str]) -> str | None:
    """One line for a ``hydra/sweeper=`` choice other than :data:`DEFAULT_SWEEPER`, or a
    ``hydra/launcher=`` other than :data:`DEFAULT_LAUNCHER`, on a command line without
    ``-m``/``--multirun``, else None: Hydra runs one plain job and never starts a sweeper or a launcher
    (``flopsweep hydra/sweeper=tune device=cpu`` ran one job, exit 0, nothing tuned;
    ``hydra/launcher=slurm`` without ``-m`` ended in submitit's traceback). A command line that only
    prints (``--cfg job``, :func:`flopsweep.flags.prints_only`) is left alone: ``-m --cfg`` is refused."""
    from flopsweep.flags import prints_only
    from flopsweep.pool import cpu_pool_problem

    if is_multirun(argv) or prints_only(argv):
        return None
    for override in overrides_of(argv):
        key, eq, value = override.partition("=")
        choice = value.strip().strip("'\"")
        name = key.lstrip("+~")
        default = {"hydra/sweeper": DEFAULT_SWEEPER, "hydra/launcher": DEFAULT_LAUNCHER}.get(name)
        if eq and default is not None and not key.startswith("~") and choice != default:
            what = name.rpartition("/")[2]
            added = override
            if choice == "pool" and cpu_pool_problem(["-m", *argv]):  # device=cpu: no GPU to count
                added, what_else = f"{override} hydra.launcher.slots=[0,1]", " and the pool's devices"
            else:
                what_else = ""
            return (
                f"Invalid config: {override}: a {what} runs only under -m (without it Hydra runs one plain "
                f"job and the {what} never starts). Fix: add -m{what_else} (flopsweep -m {added} ...)."
            )
    return None


MAX_SWEEP_JOBS = 10_000
"""The most jobs a command line's sweep may expand to (its axes' product, times ``repeats=``): a typo
such as ``seed=range(0,100000)`` beside another axis made Hydra's basic sweeper build every
combination in memory (99,900,000 for two ranges) before the first job, for minutes, silently."""


def axis_length(override: object) -> int:
    """How many values a sweep override expands to, without expanding a range: a choice's count, a
    range's arithmetic length, a group glob's matching options; 1 for what this cannot tell
    (a key's glob, an interval: Hydra's)."""
    from hydra.core.override_parser.types import ChoiceSweep, Glob, RangeSweep

    from flopsweep.overrides import listed_values

    value = override.value()  # type: ignore[attr-defined]
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        if not step:
            return 1
        return max(0, math.ceil((stop - start) / step))
    if isinstance(value, Glob):  # None: a key's glob, Hydra's to expand; [] a group glob matching nothing
        listed = listed_values(override)
        return 1 if listed is None else len(listed)
    return 1


def sweep_size_problem(argv: list[str]) -> str | None:
    """One line for a command-line sweep of more than :data:`MAX_SWEEP_JOBS` jobs (the product of its
    axes' lengths times ``repeats=``), naming the largest axis, or of no job (an axis that lists no
    value: ``range(0,0)``, ``range(5,1)``, a group's ``glob()`` that matches no option; Hydra launched 0
    jobs and the summary said ``0 ok``, exit 0) or of a ``range()`` of step 0 (a traceback from
    Hydra's range or Python's), else None. An Optuna study draws
    ``n_trials`` points from its ranges and is left out. The axes of a ``+sweep=`` file's
    ``hydra.sweeper.params`` are counted by :func:`flopsweep.conf_files.sweep_file_problem`, which puts
    them before the command line's and calls this. A ``repeats=`` outside 1..``MAX_REPEATS`` is not
    counted: ``command_line_checks.repeats_problem`` refuses it in its own line."""
    from hydra.core.override_parser.types import RangeSweep

    from flopsweep.override_parsing import parsed_all_or_none

    if not is_multirun(argv):
        return None
    overrides = overrides_of(argv)
    if any(
        o.partition("=")[2].strip().startswith("optuna") for o in overrides if o.startswith("hydra/sweeper=")
    ):
        return None
    if (parsed := parsed_all_or_none(overrides)) is None:  # syntax_problem's
        return None
    if still := next((o for o in parsed if isinstance(o.value(), RangeSweep) and not o.value().step), None):
        line = still.input_line or still.key_or_group
        return (
            f"Invalid config: {line}: a range() of step 0 never reaches its end (Hydra and Python refuse it "
            f"in a traceback). Fix: give a step that is not 0 (range(start,stop,step), step 1 by default), "
            f"or list the values ({still.key_or_group}=1,2,3)."
        )
    axes = {o.input_line or o.key_or_group: axis_length(o) for o in parsed if o.is_sweep_override()}
    repeats = next(
        (o.value() for o in parsed if o.key_or_group == "repeats" and not o.is_sweep_override()), 1
    )
    if empty := next((axis for axis, n in axes.items() if n == 0), None):  # Hydra: "Launching 0 jobs"
        return (
            f"Invalid config: {empty}: lists no value, so the sweep would run no job. Fix: give "
            f"{empty.partition('=')[0]} at least one value (range(a,b) stops before b: range(1,4) is 1, "
            "2, 3; a glob must match an option)."
        )
    from flopsweep.limits import MAX_REPEATS

    # a repeats= out of 1..MAX_REPEATS is command_line_checks.repeats_problem's line (the bound comes first)
    counted = isinstance(repeats, int) and not isinstance(repeats, bool) and 1 <= repeats <= MAX_REPEATS
    total = math.prod(axes.values()) * (repeats if counted else 1)
    if total <= MAX_SWEEP_JOBS or not axes:
        return None
    widest = max(axes, key=axes.__getitem__)
    shown = " x ".join(f"{n}" for n in axes.values())
    return (
        f"Invalid config: {widest}: the sweep would run {total} jobs ({shown}"
        f"{f' x repeats={repeats}' if counted and repeats > 1 else ''}), over the bound of "
        f"{MAX_SWEEP_JOBS}. Fix: give {widest.partition('=')[0]} fewer values, or split the sweep into "
        f"parts of at most {MAX_SWEEP_JOBS} jobs (one hydra.sweep.dir each)."
    )


def sweep_function_problem(argv: list[str]) -> str | None:
    """One line for a sweep function the chosen sweeper cannot expand, else None (each a key's
    override of ``-m``):

    - ``glob()`` of a key that is no config group (``seed=glob(*)``): a glob picks a group's option
      files, so Hydra expanded it to no value, launched 0 jobs and the summary said ``0 ok``, exit 0;
    - ``interval()`` under any sweeper but Optuna's (``hydra/sweeper=optuna_objective``): the basic,
      batched and tune sweepers list values, and Hydra stopped with "BasicSweeper does not support
      sweep type : INTERVAL_SWEEP" in a traceback, exit 1.

    A ``+sweep=`` file or another ``--config-name`` may pick another sweeper: an interval is then left
    to Hydra. ``range()`` and choice values are checked as values (:func:`flopsweep.overrides.type_problem`,
    :func:`flopsweep.value_sets.value_set_problem`: ``seed=range(1.5,3.5,0.5)`` is no whole number)."""
    from hydra.core.override_parser.types import Glob, IntervalSweep

    from flopsweep.override_parsing import parsed_or_none

    if not is_multirun(argv):
        return None  # sweep_without_m_problem's
    overrides = overrides_of(argv)
    given = {k.lstrip("+"): v.strip().strip("'\"") for k, _, v in (o.partition("=") for o in overrides)}
    other_config = "sweep" in given or any(a.startswith(("-cn", "--config-name")) for a in argv)
    optuna = given.get("hydra/sweeper", "").startswith("optuna")
    for text in overrides:
        if (o := parsed_or_none(text)) is None:  # syntax_problem's
            continue
        key, value = o.key_or_group, o.value()
        is_group = "/" in key or ("." not in key and os.path.isdir(os.path.join(CONF, key)))
        if isinstance(value, Glob) and not is_group and not key.startswith("hydra"):
            return (
                f"Invalid config: {text}: glob() picks the option files of a config group, and {key} is a "
                f"key, so the sweep would run no job. Fix: list its values, e.g. {key}=1,2,3 or "
                f"{key}=range(1,4) (a glob fits a group: precision=glob(fp*))."
            )
        if isinstance(value, IntervalSweep) and not optuna and not other_config:
            return (
                f"Invalid config: {text}: interval() is a range for Optuna to sample, and the "
                f"{given.get('hydra/sweeper', 'basic_batched')} sweeper runs listed values only. Fix: list "
                f"values, e.g. {key}={typed_form(float(value.start))},{typed_form(float(value.end))} (its "
                "ends), or add "
                "hydra/sweeper=optuna_objective."
            )
    return None


def config_name_problem(argv: list[str], conf: str | None = None) -> str | None:
    """One line for ``--config-name NAME`` (``-cn NAME``, ``--config-name=NAME``) that names no file of
    conf/ (``conf/NAME.yaml``), else None: Hydra's "Cannot find primary config", its search path and
    the full-error hint were 9 lines, exit 1. conf/ is the only folder of configs
    (:func:`flopsweep.flags.flag_problem` refuses ``--config-path`` and ``--config-dir`` naming another)."""
    folder = conf or CONF
    for i, arg in enumerate(argv):
        if arg in ("-cn", "--config-name"):
            name = argv[i + 1] if i + 1 < len(argv) else ""
            shown = f"{arg} {name}"
        elif arg.startswith("--config-name="):
            name, shown = arg.partition("=")[2], arg
        else:
            continue
        stem = name.removesuffix(".yaml")
        if stem and os.path.isfile(os.path.join(folder, f"{stem}.yaml")):
            continue
        names = sorted(f.removesuffix(".yaml") for f in os.listdir(folder) if f.endswith(".yaml"))
        return (
            f"Invalid config: {shown.strip()}: names no primary config (conf/{stem or '?'}.yaml does not "
            "exist). Fix: drop it (conf/config.yaml is the config), or name one of conf/: "
            f"{', '.join(names)}."
        )
    return None
