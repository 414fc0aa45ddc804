"""Non-ASCII look-alikes (homoglyphs) of ASCII names: ``model=llama-tinу`` with a Cyrillic ``у``
(U+0443) reads as ``llama-tiny`` and is no option; the refusal names the character and the ASCII name
meant (:func:`ascii_lookalike`), so that a "did you mean" can name it. Torch-free, standard library
only.

A character folds to ASCII by Unicode's compatibility normalisation (``unicodedata.normalize("NFKC")``:
fullwidth ``ｔｉｎｙ``, ligatures, superscripts), then its canonical decomposition without the combining
marks (``é`` -> ``e``), then :data:`CONFUSABLES`: a short table of the Cyrillic, Greek and punctuation
letters that look like ASCII ones, after Unicode's confusables list (UTS #39, ``confusables.txt``), which
NFKC leaves alone. A name folds only when each character folds to one ASCII character; no
transliteration (Cyrillic ``у`` is ``y`` by its look, not ``u`` by its sound).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

CONFUSABLES = {
    # Cyrillic letters drawn like Latin ones (UTS #39 confusables.txt)
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "к": "k", "ӏ": "l",
    "м": "m", "п": "n", "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "ц": "u", "ѵ": "v",
    "ԝ": "w", "х": "x", "у": "y", "ү": "y",
    "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "I", "Ј": "J", "К": "K", "М": "M", "О": "O",
    "Р": "P", "Ѕ": "S", "Т": "T", "Х": "X", "Ү": "Y", "Ԝ": "W",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # dashes, dots and the like
    "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-", "⁃": "-", "˗": "-",
    "·": ".", "․": ".", "٫": ".", "ˍ": "_", "ı": "i", "ȷ": "j", "ℓ": "l",
    # signs drawn like letters: the multiplication sign of a size, H100:8×8, and its dingbats (H100:8✕8)
    "×": "x", "⨯": "x", "⨉": "x", "✕": "x", "✖": "x", "✗": "x", "✘": "x", "╳": "x",
}  # fmt: skip
"""Look-alikes NFKC does not fold, each to the ASCII character it is drawn like."""


def fold_char(c: str) -> str | None:
    """The one ASCII character ``c`` looks like (itself when ASCII), else None."""
    if c.isascii():
        return c
    if c in CONFUSABLES:
        return CONFUSABLES[c]
    for form in ("NFKC", "NFKD"):
        text = unicodedata.normalize(form, c)
        if form == "NFKD":
            text = "".join(x for x in text if not unicodedata.combining(x))
        text = "".join(CONFUSABLES.get(x, x) for x in text)
        if len(text) == 1 and text.isascii():
            return text
    return None


def ascii_fold(text: str) -> str | None:
    """``text`` with each non-ASCII character replaced by the ASCII one it looks like
    (:func:`fold_char`); None when one has none (``日本``)."""
    out = []
    for c in text:
        folded = fold_char(c)
        if folded is None:
            return None
        out.append(folded)
    return "".join(out)


def named(c: str) -> str:
    """``'у' (U+0443 CYRILLIC SMALL LETTER U)``: the character, its code point and Unicode name."""
    return f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')})"


def ascii_lookalike(text: str, names: Iterable[str]) -> tuple[str, str] | None:
    """The ASCII name of ``names`` that non-ASCII ``text`` looks like, and a note naming its first
    look-alike character: ``("llama-tiny", "'у' (U+0443 CYRILLIC SMALL LETTER U) looks like ASCII
    'y'")``; None when ``text`` is ASCII or folds to none of ``names`` (case kept, then ignored)."""
    if text.isascii():
        return None
    folded = ascii_fold(text)
    if folded is None:
        return None
    names = list(names)
    match = folded if folded in names else {n.lower(): n for n in names}.get(folded.lower())
    if match is None:
        return None
    first = next(c for c in text if not c.isascii())
    return match, f"{named(first)} looks like ASCII {fold_char(first)!r}"


_EMPTY_ITEMS = (
    (re.compile(r"\s*,\s*(?=[\]})])"), ""),  # [a,] -> [a]
    (re.compile(r"(?<=[\[{(])\s*,\s*"), ""),  # [,a] -> [a]
    (re.compile(r"\s*,(\s*,)+\s*"), ","),  # [a,,b] -> [a,b]
)


def drop_empty_items(text: str) -> str:
    """``text`` without the empty items of its brackets: a trailing comma (``[H100:8,]`` ->
    ``[H100:8]``), a leading one, two in a row. Commas inside quotes are kept."""
    if "'" in text or '"' in text:
        return text
    for pattern, replacement in _EMPTY_ITEMS:
        text = pattern.sub(replacement, text)
    return text


def list_text(text: str) -> str | None:
    """The list a value meant, where it reads as one only once cleaned: its quotes dropped, its
    look-alikes folded (:func:`ascii_fold`: ``：`` -> ``:``), its empty items dropped
    (:func:`drop_empty_items`): ``'"[H100：8,]"'`` -> ``[H100:8]``; None when ``text`` is no
    bracketed list or holds a character with no ASCII look-alike."""
    inner = text.strip().strip("'\"").strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        return None
    folded = ascii_fold(inner)
    return None if folded is None else drop_empty_items(folded)


def ascii_digits(text: str) -> str | None:
    """``text`` with each digit of another script written 0-9 (Arabic-Indic ``٣`` -> ``3``, fullwidth
    ``２`` -> ``2``: ``unicodedata.decimal``, as Python's ``int`` reads them), else None when it has none."""
    if not any(not c.isascii() and unicodedata.decimal(c, None) is not None for c in text):
        return None
    return "".join(
        str(unicodedata.decimal(c)) if not c.isascii() and unicodedata.decimal(c, None) is not None else c
        for c in text
    )


_DIGIT_LIKE = str.maketrans("oli", "011")
"""After lower case: the letters read as digits in names with digits (``H2OO``, ``llama3.2-lb``, ``A1OO``)."""
SEPARATORS = "-_.:"
"""What follows a stem in a longer name (``A100`` in ``A100-40GB``)."""


def fold_name(text: str) -> str:
    """``text`` as :func:`near_names` compares it: each digit of another script written 0-9
    (:func:`ascii_digits`), each look-alike folded (:func:`fold_char`, a character with none kept), lower
    case, then the letters ``o``, ``l`` and ``i`` as the digits ``0``, ``1``, ``1``: ``H2OO``, ``h200`` and
    ``H٢٠٠`` all fold to ``h200``, ``llama3.2-lb`` and ``llama3.2-1b`` to ``11ama3.2-1b``. One character
    for one, so that positions match."""
    text = ascii_digits(text) or text
    return "".join(fold_char(c) or c for c in text).lower().translate(_DIGIT_LIKE)


def near_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``candidates`` nearest ``name`` for a "did you mean", nearest first: those equal to it
    once folded (:func:`fold_name`: ``H2OO`` -> ``H200``), then ``difflib``'s nearest without regard to case
    (cutoff 0.6; the first of a case-only pair); only where none is, those it is the stem of once folded
    (``A1OO`` -> ``A100-40GB``, ``A100-80GB``), then ``difflib``'s nearest of the folded names. Empty when
    none is near (``zzqx``)."""
    import difflib

    names = [str(c) for c in candidates]
    key = fold_name(name)
    same = [c for c in names if fold_name(c) == key]
    lowered = {c.lower(): c for c in reversed(names)}
    near = same + [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=n)]
    if not near:
        folded = {fold_name(c): c for c in reversed(names)}
        stems = [
            c for c in names if len(key) > 1 and fold_name(c)[: len(key) + 1] in {key + s for s in SEPARATORS}
        ]
        near = stems + [folded[m] for m in difflib.get_close_matches(key, list(folded), n=n)]
    return list(dict.fromkeys(near))[:n]


def misread(text: str, names: Iterable[str]) -> tuple[str, str] | None:
    """The name of ``names`` that ``text`` misreads, where it differs from it in more than case: equal to it
    once folded (:func:`fold_name`), or a stem of it (``A1OO``: ``A100-40GB``, the first so named), and a
    note naming the first character misread: ``("H200", "'O' is a letter, not the digit '0'")``,
    ``("llama3.2-1b", "'l' is a letter, not the digit '1'")``, ``("H200", "'٢' (U+0662 ARABIC-INDIC DIGIT
    TWO) is not ASCII '2'")``; None otherwise (``h200`` for ``H200``: a case-only slip, said elsewhere)."""
    names = list(names)
    near = near_names(text, names, n=1)
    key = fold_name(text)
    if not near or not fold_name(near[0]).startswith(key) or text.lower() == near[0].lower():
        return None
    for typed, meant in zip(text, near[0], strict=False):
        if typed.lower() != meant.lower():
            if not typed.isascii():
                return near[0], f"{named(typed)} is not ASCII {meant!r}"
            if typed.isdigit() != meant.isdigit():  # O for 0, 1 for l
                kind = ("a digit", "the letter") if typed.isdigit() else ("a letter", "the digit")
                return near[0], f"{typed!r} is {kind[0]}, not {kind[1]} {meant!r}"
            return near[0], f"{named(typed)} is not {named(meant)}"  # I for l
    return None
