"""The "did you mean" of a key no schema has (``backend.zero_stag=2``, ``precison=bf16``, ``nproc=2``),
torch-free: :func:`unknown_key_problem` returns one line naming only keys that the same command line
may set, so that the suggested fix is not refused in turn.

The candidates, by where the typo is:

- a top-level name (``precison``): the config groups (``conf/<group>/``) and the top-level keys of
  :class:`flopsweep.config.RunConfig`, ranked before any nested key; a nested key is named only when
  no top-level name is near, by its last part (``n_layer`` -> ``model.n_layer``);
- a key below a section (``fault.kil``, ``optim.lrr``): the keys of that section, matched on the last
  part, never the section itself (a section takes no value);
- a key of an option group (``backend.*``, ``attention.*``, ...): the keys of the options the command
  line picks (else conf/config.yaml's defaults); a near key of another option only is named with the
  option it belongs to and the choice that adds it (``It is a key of backend=deepspeed, not of
  backend=single: pick backend=deepspeed (or zero1, zero2, zero3) to set it``), never bare.

The structured config refuses every key it does not know (``+key`` too:
:func:`flopsweep.checks._reject_unknown_keys`), so no fix adds a new key with ``+``.
"""

from __future__ import annotations

import difflib

CUTOFF = 0.6
"""``difflib`` similarity (0..1) at which a name is near a typo (``difflib.get_close_matches``' default)."""
MIN_PREFIX = 3
"""A typo of at least this many characters that begins a candidate (all but its last character) is
near it too (``nproc`` -> ``nproc_per_node``, whose similarity is 0.53; ``kil`` -> ``kind``, 0.57)."""


def _score(name: str, candidate: str) -> float:
    """How near ``candidate`` is to ``name``: ``difflib``'s ratio, or :data:`CUTOFF` where the ratio is
    lower but ``name`` has at least :data:`MIN_PREFIX` characters and all of them but perhaps the last
    begin ``candidate`` (``nproc`` -> ``nproc_per_node``, ``kil`` -> ``kind``), or where the two differ in one
    character once folded (``tI`` -> ``tp``: a 2-letter name one letter off has a ratio of 0.5); case aside
    (``Fault.Kind``); 1 where the two are equal once folded (:func:`flopsweep.lookalike.fold_name`: a
    look-alike, and ``O``/``l``/``I`` read as digits: ``mode1`` -> ``model``)."""
    from flopsweep.lookalike import fold_name

    folded, other = fold_name(name), fold_name(candidate)
    if folded == other:  # mode1, modeI -> model; 1r -> lr (row #841's folding)
        return 1.0
    name, candidate = name.lower(), candidate.lower()
    ratio = difflib.SequenceMatcher(None, name, candidate).ratio()
    if len(name) >= MIN_PREFIX and candidate.startswith(name[:-1]):
        ratio = max(ratio, CUTOFF)
    if len(folded) == len(other) and sum(a != b for a, b in zip(folded, other, strict=True)) == 1:
        ratio = max(ratio, CUTOFF)  # one character off: tI -> tp (difflib: 0.5, under CUTOFF for 2 letters)
    return ratio


def ranked(name: str, candidates, n: int = 3) -> list[str]:
    """Up to ``n`` of ``candidates`` at least :data:`CUTOFF` near ``name`` (:func:`_score`), nearest
    first (ties in the candidates' order), less :data:`flopsweep.override_schema.NEVER_SUGGESTED`."""
    from flopsweep.override_schema import NEVER_SUGGESTED

    unique = [str(c) for c in dict.fromkeys(candidates) if str(c) not in NEVER_SUGGESTED]
    scored = sorted((-_score(name, c), i, c) for i, c in enumerate(unique))
    return [c for s, _, c in scored if -s >= CUTOFF][:n]


def _sections(known: frozenset[str]) -> set[str]:
    """The keys of ``known`` that hold keys (``steps``, ``predict``, ``backend``)."""
    return {k.rpartition(".")[0] for k in known if "." in k}


def _groups() -> list[str]:
    """The option groups a command line picks with ``GROUP=OPTION`` (``precision``, ``backend``), sorted
    (``sweep`` is picked with ``+sweep=``, so it is left out)."""
    from flopsweep.options import GROUP_BASES

    return sorted(GROUP_BASES)


def _valid_keys(parsed: list, group: str) -> set[str] | None:
    """The keys of ``group`` (``backend.zero_stage``) that every option the command line picks for it
    has (else conf/config.yaml's default; :func:`flopsweep.override_schema.key_schemas`); None for a group a
    ``+sweep`` file may pick (its options are not known here)."""
    from flopsweep.override_schema import key_schemas, schema_keys

    if any(o.key_or_group == "sweep" for o in parsed):
        return None
    sets = [schema_keys(schema, f"{group}.") for schema, _ in key_schemas(parsed, f"{group}.x")]
    return set.intersection(*sets) if sets else None


def _other_option(parsed: list, key: str) -> str:
    """Where ``key`` (``backend.zero_stage``) of another option than the picked one comes from, as a
    sentence: ``It is a key of backend=deepspeed, not of backend=single: pick backend=deepspeed (or
    zero1, zero2, zero3) to set it``."""
    from flopsweep.options import owners
    from flopsweep.override_schema import key_schemas, kinds_said, option_kind, picks

    group, _, rest = key.partition(".")
    own = owners(group, rest.partition(".")[0])
    names = kinds_said(group, own) or f"another {group} option"
    others = [o for _, o in key_schemas(parsed, f"{group}.x") if option_kind(group, o) not in own]
    pick = picks(group, own, near=others[0] if others else None) if own else f"{group}=..."
    return f"It is a key of {names}, not of {group}={','.join(others)}: pick {pick} to set it"


def _foreign(parsed: list, key: str) -> bool:
    """Whether ``key`` of an option group is a key of no option the command line picks for it."""
    from flopsweep.options import GROUP_BASES

    group = key.partition(".")[0]
    if "." not in key or group not in GROUP_BASES:
        return False
    valid = _valid_keys(parsed, group)
    return valid is not None and key not in valid


def _runnable(name: str, value: str | None, parsed: list) -> str:
    """``name`` as the "did you mean" writes it: bare, or, where ``name=value`` needs other overrides on
    this command line's options (:func:`flopsweep.key_needs.needed`: ``nproc_per_node=2`` on
    ``backend=single``), the whole line to write, those first (``backend=ddp nproc_per_node=2``), with
    what it replaces of the command line (``in place of backend=single``)."""
    from flopsweep.key_needs import degree_line, given_values, needed, still_meets

    if value is None:
        return name
    given = given_values(parsed)
    first = value.split(",")[0].strip() if "[" not in value else value
    if name == "parallel.ep" and first.isdigit() and int(first) > 1 and given.get("model") != "hf":
        head, _, note = str(degree_line("ep", int(first), given)).partition(" (")  # the MoE example's degree
        meets = still_meets(name, first, given)
        needs = " ".join(head.split()[:-1]) + "".join(f"; {n}" for n in (note.removesuffix(")"), meets) if n)
        return f"{head} ({name}={value} alone is refused: it needs {needs})"
    extra = needed(name, first, given)
    note = still_meets(name, first, given)
    if not extra:
        return f"{name} ({note})" if note else name
    replaced = [f"{k}={given[k]}" for k in (e.partition("=")[0] for e in extra) if k in given]
    instead = f" in place of {' '.join(replaced)}" if replaced else ""
    needs = " ".join(extra) + (f"; {note}" if note else "")
    return f"{' '.join(extra)} {name}={value}{instead} ({name}={value} alone is refused: it needs {needs})"


def suggestion(key: str, parsed: list | None = None, value: str | None = None) -> str:
    """The fix of the unknown ``key`` (``did you mean ...?``), one clause ending in a full stop, from
    the keys the command line ``parsed`` (Hydra's parsed overrides) may set. With the ``value`` typed,
    a key whose value needs another option (:func:`flopsweep.key_needs.needed`) is named in the line
    that runs as written: ``nproc=2``: ``did you mean backend=ddp nproc_per_node=2?``."""
    from flopsweep.override_schema import known_keys

    known = known_keys()
    parsed = parsed or []
    parent, _, leaf = key.rpartition(".")
    if not parent:
        close = ranked(key, _groups() + sorted(k for k in known if "." not in k))
        if not close:  # n_layer -> model.n_layer: a nested key by its last part
            sections = _sections(known)
            by_leaf: dict[str, str] = {}
            for k in sorted(
                sorted(k for k in known if "." in k and k not in sections), key=lambda k: _foreign(parsed, k)
            ):
                by_leaf.setdefault(k.rpartition(".")[2], k)  # a key of a picked option first
            close = [by_leaf[name] for name in ranked(key, list(by_leaf))]
    else:
        children = sorted(k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == parent)
        close = [f"{parent}.{c}" for c in ranked(leaf, children)]
    names = [k for k in close if not _foreign(parsed, k)]
    if names and value is not None:  # a key that runs bare first; one needing more only as the nearest
        names = names[:1] + [k for k in names[1:] if _runnable(k, value, parsed) == k]
    tail = " docs/reference/overrides.md lists every key."
    if close and close[0] not in names:  # the nearest is another option's key: say whose
        also = f"; or {' or '.join(_runnable(n, value, parsed) for n in names)}" if names else ""
        return f"did you mean {close[0]}? {_other_option(parsed, close[0])}{also}.{tail}"
    if names:
        return f"did you mean {' or '.join(_runnable(n, value, parsed) for n in names)}?{tail}"
    scope = f"the keys of {parent}" if parent else "the groups and top-level keys"
    return f"see docs/reference/overrides.md for every key; none of {scope} is near {leaf or key}."
