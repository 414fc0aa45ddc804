"""Hydra's override grammar, parsed once per override where a refusal is another check's to report.

Most of flopsweep's checks before Hydra read the command line's overrides with Hydra's own parser and
leave an override it refuses to :func:`flopsweep.override_grammar.syntax_problem`, whose one line comes
first: :func:`parsed_or_none` and :func:`parsed_all_or_none` give ``None`` for such an override. Torch-free;
Hydra is imported on the first call, not on import.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Override

ANY_ERROR: tuple[type[BaseException], ...] = (Exception,)
"""What the helpers swallow by default: any ``Exception`` the grammar raises (Hydra's
``OverrideParseException``, a ``HydraException`` of a bad sweep function, a lexer's ``ValueError``)."""


def is_override(word: str, *, deletions: bool = False) -> bool:
    """Whether ``word`` of a command line is an override: ``KEY=VALUE`` (``+KEY=``, ``++KEY=``,
    ``~KEY=VALUE``), and with ``deletions`` a bare ``~KEY`` too. Not a flag (it starts with ``-``: ``-m``,
    ``--cfg``) nor a flag's value (``--config-name NAME``: no ``=``). The one test of the checks before Hydra
    (:func:`overrides_of`, :mod:`flopsweep.flags`, :mod:`flopsweep.key_needs`)."""
    return not word.startswith("-") and ("=" in word or (deletions and word.startswith("~")))


PREFIX_CHARACTERS = "+~"
"""The characters of an override's prefix: Hydra's ``+`` (add), ``++`` (force add) and ``~`` (delete).
:func:`split_override` takes the whole leading run of them; a run Hydra refuses (``+++key``, ``+~key``) is
:func:`flopsweep.override_grammar.syntax_problem`'s to report."""


def split_override(word: str) -> tuple[str, str, str]:
    """``(prefix, key, value)`` of a command line's override as typed, unparsed: ``prefix`` the leading run
    of :data:`PREFIX_CHARACTERS` (``""``, ``"+"``, ``"++"``, ``"~"``), ``key`` the text after it up to the
    first ``=``, ``value`` the text after that ``=`` as typed (quotes and blanks kept), ``""`` where the word
    has no ``=`` (as for ``key=``: ``"=" in word`` tells them apart). ``"++model.n_layer=4"``:
    ``("++", "model.n_layer", "4")``; ``"a=b=c"``: ``("", "a", "b=c")``; ``"~seed"``: ``("~", "seed", "")``.
    Blanks inside the key are kept.
    For the sites that need the prefix or the value too; the key alone is :func:`override_key`."""
    rest = word.lstrip(PREFIX_CHARACTERS)
    key, _, value = rest.partition("=")
    return word[: len(word) - len(rest)], key, value


def override_key(word: str) -> str:
    """The key of a command line's override as typed: its ``++``, ``+`` or ``~`` dropped, the text before
    the first ``=`` (:func:`split_override`). ``"+fault.rank=1"``, ``"++fault.rank=1"``, ``"~fault.rank=1"``
    and ``"~fault.rank"`` (a deletion, no ``=``) all give ``"fault.rank"``; a word with no ``=`` gives the
    word less its prefix; a group's ``hydra/launcher=x`` gives ``"hydra/launcher"``. A deletion has a key
    too: the sites that want only the keys given a value use :func:`set_key`."""
    return split_override(word)[1]


def set_key(word: str) -> str:
    """The key that the override ``word`` gives a value (:func:`override_key`: ``+``/``++`` dropped), or
    ``""`` for a deletion (``~key``, ``~key=value``: it gives none) and for a word with no ``=``.
    ``"++seed=1"``: ``"seed"``; ``"~seed=1"``: ``""``."""
    prefix, key, _ = split_override(word)
    return "" if "~" in prefix or "=" not in word else key


def overrides_of(argv: list[str], *, deletions: bool = False) -> list[str]:
    """The overrides of a command line, in order (:func:`is_override`): ``KEY=VALUE``, and with ``deletions``
    a bare ``~KEY`` too; Hydra's flags (``-m``, ``--config-name NAME``, ``--cfg job``) and their values are
    left out."""
    return [a for a in argv if is_override(a, deletions=deletions)]


def typed_pairs(overrides: list[str]) -> list[tuple[str, str]]:
    """``(key, value as typed)`` of each override of ``overrides`` that sets a key, in order, unparsed:
    ``+``/``++`` stripped from the key, the value as written (quotes kept); deletions (``~KEY``, ``~KEY=V``),
    flags and a flag's value left out. ``["+a=1", "~b", "-m", "c='x'"]``: ``[("a", "1"), ("c", "'x'")]``."""
    split = [split_override(o) for o in overrides if "=" in o and not o.startswith("-")]
    return [(key, value) for prefix, key, value in split if "~" not in prefix]


def typed_overrides(overrides: list[str], key: str) -> list[str]:
    """Each override of ``overrides`` that sets ``key`` (``+`` or not), as typed but for its ``+``/``++``, in
    order: ``(["+fault.rank=1", "seed=0"], "fault.rank")``: ``["fault.rank=1"]``; ``[]`` where none does."""
    return [o.lstrip("+") for o in overrides if set_key(o) == key]


def parsed_overrides(argv: list[str]) -> list[Override] | None:
    """:func:`parsed_all_or_none` of the command line's overrides (:func:`overrides_of`): None where Hydra's
    grammar refuses one (:func:`flopsweep.override_grammar.syntax_problem` says why, first)."""
    return parsed_all_or_none(overrides_of(argv))


def sets_config_key(o: Override) -> bool:
    """Whether the parsed override ``o`` sets a key of the run's config as typed: no ``@package``, not a
    deletion (``~KEY``), and not under ``hydra`` (Hydra's own keys and groups), which the checks of a
    value's type, list or range leave to Hydra."""
    return o.package is None and not o.is_delete() and not o.key_or_group.startswith("hydra")


@functools.cache
def override_parser() -> OverridesParser:
    """Hydra's ``OverridesParser`` with its default sweep functions (``range``, ``choice``, ``glob``,
    ``interval``), made once: it keeps no state between parses."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


PARSE_CACHE_SIZE = 4096
"""How many parsed overrides :func:`parsed_or_none` keeps: the checks before Hydra parse each override of a
command line a dozen times or more (0.15 s a start on a 2-core machine before this cache)."""


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parsed(override: str) -> Override:
    """``override`` parsed by Hydra's grammar (raises as ``parse_override``); the same text gives the same
    ``Override``, which no caller changes."""
    return override_parser().parse_override(override)


def parsed_or_none(override: str, catch: tuple[type[BaseException], ...] = ANY_ERROR) -> Override | None:
    """``override`` (``KEY=VALUE``, ``+KEY=...``, ``~KEY``) as Hydra's grammar parses it
    (``OverridesParser.parse_override``, each text parsed once a process: :data:`PARSE_CACHE_SIZE`), or
    None when parsing raises one of ``catch`` (default :data:`ANY_ERROR`, any ``Exception``). Other
    exceptions propagate. Do not change the ``Override``: it is shared."""
    try:
        return _parsed(override)
    except catch:
        return None


def parsed_all_or_none(
    overrides: list[str], catch: tuple[type[BaseException], ...] = ANY_ERROR
) -> list[Override] | None:
    """Each of ``overrides`` parsed, in order (as :func:`parsed_or_none`: ``[]`` for ``[]``), or None when
    any one of them raises one of ``catch`` (default :data:`ANY_ERROR`, any ``Exception``; a refused
    override is a ``HydraException``, Hydra's ``OverridesParser.parse_overrides`` wraps it in an
    ``OverrideParseException``). Other exceptions propagate. Test the result with ``is None``: an empty
    list is a parse too."""
    out = []
    for override in overrides:
        parsed = parsed_or_none(override, catch)
        if parsed is None:
            return None
        out.append(parsed)
    return out


def typed_values(overrides: list[str]) -> dict[str, str]:
    """``{key: value as typed}`` of the command line's ``key=value`` overrides, unparsed: ``+`` and
    surrounding quotes and blanks stripped (``plan_gpu=' '`` is ``""``), deletions (``~key``) and flags
    left out, the last of a key winning. For the checks that read a value before Hydra composes."""
    return {key: value.strip().strip("'\"").strip() for key, value in typed_pairs(overrides)}


def given_keys(argv: list[str]) -> set[str]:
    """The keys the command line ``argv`` gives a value (``+``, ``++`` and ``~`` dropped)."""
    return {override_key(o) for o in overrides_of(argv)}


def key_values(overrides: list[str]) -> dict[str, str]:
    """``{key: value as typed}`` of each word of ``overrides`` (a job's overrides, a command line's):
    the key as :func:`override_key` gives it (``+``, ``++`` and ``~`` dropped: a deletion's value is
    there too), the value unparsed, quotes and blanks kept (``""`` for a word with no ``=``), the last
    of a key winning. ``["+a=1", "~b", "c='x'"]``: ``{"a": "1", "b": "", "c": "'x'"}``; the checks that
    want only the values set use :func:`typed_values`."""
    return {key: value for _, key, value in map(split_override, overrides)}
