"""Command-line overrides that Hydra's override grammar cannot read (:func:`syntax_problem`,
:func:`control_character_problem`) and a ``--config-name`` of no file (:func:`config_name_problem`): one
line each, before Hydra starts (``run.py``'s :func:`refusal`, exit 2). A sweep without ``-m``, its size
and its functions are :mod:`flopsweep.override_multirun`'s (split from here in session 42).

Hydra would refuse them too, in four to six lines (``LexerNoViableAltException: tag=ünï`` with a
caret, ``See https://hydra.cc/...``, ``Set the environment variable HYDRA_FULL_ERROR=1``; or
"Ambiguous value for argument" with three numbered choices), exit 1, and without naming which fix
fits. Torch-free: this runs before anything heavy is imported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from flopsweep.flags import is_multirun
from flopsweep.override_lookalike import meant_override
from flopsweep.override_multirun import needs_multirun, quoted_override, split_choices
from flopsweep.override_parsing import override_key, overrides_of, set_key, split_override
from flopsweep.override_schema import empty_choice_line, quoted_refusal
from flopsweep.overrides import CONF

GRAMMAR_PAGE = "https://hydra.cc/docs/advanced/override_grammar/basic/"
"""Hydra's page on the override grammar (quoting, lists, sweeps)."""


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
    return f"quote the value as one string, {quoted_override(key, value)} (the outer quotes are the shell's)"


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
        prefix, key, value = split_override(new)
        eq = "=" in new and "~" not in prefix  # a deletion (~key=value) needs no other key
        first = value.split(",")[0].strip() if "[" not in value else value
        for extra in needed(key, first, given) if "/" not in key and eq else []:
            if extra not in line:  # in place of the command line's value of its key
                line = [a for a in line if set_key(a) != override_key(extra)]
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
