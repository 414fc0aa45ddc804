"""Write the generated references ``docs/reference/overrides.md``, ``docs/reference/records.md`` and
``docs/reference/plan.md`` (the columns of ``plan.csv``: :mod:`flopsweep.reference_plan`).

Usage (torch-free; from a checkout, which holds ``conf/`` and ``docs/``)::

    python -m flopsweep.reference            # write docs/reference/*.md
    python -m flopsweep.reference --check    # exit 1 naming each stale file; write nothing
    python -m flopsweep.reference --output-dir DIR   # write (or --check) DIR/*.md instead

``overrides.md`` is made from the config schemas: :class:`flopsweep.config.RunConfig` and its nested
dataclasses, the option schemas of :data:`flopsweep.options.OPTION_SCHEMAS` (the model families'
``CONFIG`` among them), each field's docstring (the string literal after it, read from the source
file with :mod:`ast`; a subclass's wins over its base's) and the option files ``conf/<group>/*.yaml``
(their leading comment and the keys they set). ``records.md`` is made from the record's specs:
:data:`flopsweep.record.METRIC_SPECS`, :data:`flopsweep.columns.SETUP_SPECS`,
:data:`flopsweep.column_spec.COLUMN_SPECS`, :class:`flopsweep.wire.ErrorInfo` and ``RankFigures``
(``Attributes:`` of their docstrings), :class:`flopsweep.steptime.Prediction`,
:data:`flopsweep.degrees.DEGREE_SPECS`, and, for the
sections that no spec declares (``run``, ``system``, nested keys), the tables of
:mod:`flopsweep.reference_records`. A key that the code declares but
no docstring or table describes stops the generator (:class:`ReferenceError`), naming it.

Files are written with :func:`flopsweep.files.replace_text` (a new file renamed into place) and
read with :func:`flopsweep.safe_read.read_regular` (no link followed, size-capped).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import sys
import typing
from pathlib import Path
from typing import Any

import yaml

from flopsweep import config, options
from flopsweep.files import RecordUnwritable, replace_text
from flopsweep.reference_plan import plan_md
from flopsweep.reference_records import records_md
from flopsweep.reference_text import (
    HEADER,
    REPO,
    ReferenceError,
    code,
    describe,
    documented,
    field_defaults,
    field_docs,
    field_types,
    markdown,
    read_text,
    table,
    type_name,
    yaml_value,
)

CONF = REPO / "conf"
OUT = REPO / "docs" / "reference"
GROUPS = tuple(options.GROUP_BASES)
"""The config groups picked as ``group=option`` (``conf/<group>/*.yaml``), in the config's order."""


# --- overrides.md -----------------------------------------------------------------------------------


def _sections() -> tuple[list[tuple[str, type]], list[tuple[str, type]]]:
    """RunConfig's fields: ``(nested sub-configs, other keys)`` as ``(name, class)``; nested ones
    are the dataclass-typed fields (the groups among them)."""
    hints = typing.get_type_hints(config.RunConfig)
    nested, plain = [], []
    for f in dataclasses.fields(config.RunConfig):
        (nested if dataclasses.is_dataclass(hints[f.name]) else plain).append((f.name, hints[f.name]))
    return nested, plain


def _option_names(group: str, schema: type) -> list[str]:
    return [name for name, cls in options.OPTION_SCHEMAS.get(group, {}).items() if cls is schema]


def group_rows(group: str, base: type) -> list[list[str]]:
    """One row per key of the group: the base's keys (every option), then each option schema's own;
    a default that an option schema changes is shown beside the base's (``4 (auto: 1)``)."""
    schemas = [base, *dict.fromkeys(options.OPTION_SCHEMAS.get(group, {}).values())]
    name_key = options.GROUP_KEY.get(group, "name")
    rows: list[list[str]] = []
    seen: set[str] = set()
    for schema in schemas:
        docs, hints, defaults = field_docs(schema), field_types(schema), field_defaults(schema)
        for key in hints:
            if key in seen:
                continue
            seen.add(key)
            holders = [s for s in schemas if key in field_types(s)]
            default = code(yaml_value(defaults.get(key)))
            if key not in ("name", name_key):
                changed = [
                    f"{'/'.join(_option_names(group, s))}: {code(yaml_value(field_defaults(s).get(key)))}"
                    for s in holders[1:]
                    if field_defaults(s).get(key) != defaults.get(key)
                ]
                default += f" ({'; '.join(changed)})" if changed else ""
            owners = (
                "all" if schema is base else ", ".join(n for s in holders for n in _option_names(group, s))
            )
            rows.append(
                [
                    code(f"{group}.{key}"),
                    type_name(hints[key]),
                    default,
                    owners,
                    documented(schema, key, docs),
                ]
            )
    return rows


def plain_rows(prefix: str, cls: type) -> list[list[str]]:
    """One row per key of a sub-config without options (``steps``, ``optim``, ...) or, with an empty
    prefix, per top-level key of :class:`RunConfig` that is no sub-config."""
    docs, hints, defaults = field_docs(cls), field_types(cls), field_defaults(cls)
    nested = {name for name, _ in _sections()[0]} if cls is config.RunConfig else set()
    return [
        [
            code(f"{prefix}{key}"),
            type_name(hint),
            code(yaml_value(defaults.get(key))),
            documented(cls, key, docs),
        ]
        for key, hint in hints.items()
        if key not in nested
    ]


def option_file(path: Path) -> tuple[str, dict[str, Any], str]:
    """``(description, keys set, schema)`` of an option file: its leading comment's first sentence,
    its keys other than ``defaults`` and ``name``, and what it extends (``base_llama``, ``deepspeed``)."""
    text = read_text(path)
    comment = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            comment.append(line.lstrip("#").strip())
    data = yaml.safe_load(text) or {}
    extends = [
        str(d).split("/")[-1].split("@")[0]
        for d in data.get("defaults", [])
        if isinstance(d, str) and d != "_self_"
    ]
    sets = {k: v for k, v in data.items() if k not in ("defaults", "name")}
    return " ".join(comment), sets, ", ".join(extends)


def option_files(group: str) -> list[tuple[str, Path]]:
    """``(option, path)`` of ``conf/<group>/*.yaml`` and one folder down (``batch=auto/max16``),
    sorted by option."""
    folder = CONF / group
    found = [(p.stem, p) for p in folder.glob("*.yaml")]
    found += [(f"{p.parent.name}/{p.stem}", p) for p in folder.glob("*/*.yaml")]
    return sorted(found)


WIDE_OPTIONS = 3
"""Options that set more keys than this (the model sizes) get one column per key."""


def option_table(group: str) -> list[str]:
    """The options of ``group``: what each extends, the keys it sets (one column per key when they
    are many) and its leading comment."""
    files = [(option, *option_file(path)) for option, path in option_files(group)]
    keys = list(dict.fromkeys(k for _, _, sets, _ in files for k in sets))
    wide = len(keys) > WIDE_OPTIONS
    rows = []
    for option, comment, sets, extends in files:
        if wide:
            shown = [yaml_value(sets[k]) if k in sets else "" for k in keys]
        else:
            text = " ".join(f"{k}={yaml_value(v)}" for k, v in sets.items())
            shown = [code(text) if text else "-"]
        rows.append([code(f"{group}={option}"), extends or "-", *shown, comment or "-"])
    return table(["option", "extends", *(keys if wide else ["sets"]), "description"], rows)


def comment_rows(folder: str, prefix: str) -> list[list[str]]:
    """``(option, description)`` of the YAML files of ``conf/<folder>``: ``+sweep=NAME`` and the like."""
    return [[code(f"{prefix}{option}"), option_file(path)[0] or "-"] for option, path in option_files(folder)]


def overrides_md() -> str:
    """The text of ``docs/reference/overrides.md``."""
    nested, _ = _sections()
    groups = {name: cls for name, cls in nested if name in GROUPS}
    out = [
        HEADER.format(sources="flopsweep/config.py, flopsweep/options.py, flopsweep/models/*.py, conf/"),
        "",
        "# Override reference",
        "",
        "Every key of the run's config (`flopsweep.config.RunConfig`), as `flopsweep KEY=VALUE`",
        "sets it. A group (`model=`, `backend=`, ...) is picked as `group=option`, a file",
        "`conf/<group>/<option>.yaml`; an option with knobs of its own has its own schema",
        "(`flopsweep/options.py`, a model family's `CONFIG`), so a key of another option is an error,",
        "not a silent default. Descriptions are the first sentences of each field's docstring; `null`",
        "is unset; a default in brackets is an option's own.",
        "",
    ]
    for group in GROUPS:
        out += [
            f"## {group}",
            "",
            f"Pick with `{group}=OPTION`; its keys (`options`: the options that have it):",
            "",
        ]
        out += table(["key", "type", "default", "options", "description"], group_rows(group, groups[group]))
        out += ["", f"Options (`conf/{group}/`; `extends`: the schema or option it builds on):", ""]
        out += option_table(group)
        out.append("")
    for name, cls in nested:
        if name in GROUPS:
            continue
        doc = markdown((inspect.getdoc(cls) or "").split("\n\n")[0]) if cls.__doc__ else ""
        out += [f"## {name}", ""] + ([describe(doc, 0), ""] if doc else [])
        out += table(["key", "type", "default", "description"], plain_rows(f"{name}.", cls))
        out.append("")
    out += ["## Top-level keys", "", "Keys of the root config itself (`conf/config.yaml`):", ""]
    out += table(["key", "type", "default", "description"], plain_rows("", config.RunConfig))
    out += ["", "## Ready-made sweeps", "", "`flopsweep -m +sweep=NAME` (`conf/sweep/NAME.yaml`):", ""]
    out += table(["sweep", "description"], comment_rows("sweep", "+sweep="))
    out += ["", "## Sweepers", "", "`hydra/sweeper=NAME` (`conf/hydra/sweeper/NAME.yaml`):", ""]
    out += table(["sweeper", "description"], comment_rows("hydra/sweeper", "hydra/sweeper="))
    return "\n".join(out).rstrip("\n") + "\n"


# --- the command ------------------------------------------------------------------------------------

FILES = {"overrides.md": overrides_md, "records.md": records_md, "plan.md": plan_md}
"""The generated files under :data:`OUT`, by name, and what makes each."""


def generate(out: Path | None = None) -> dict[Path, str]:
    """``{path: text}`` of every generated file, under ``out`` (default :data:`OUT`)."""
    return {(out or OUT) / name: make() for name, make in FILES.items()}


def stale(texts: dict[Path, str]) -> list[str]:
    """One message per file whose committed text differs from ``texts`` (with a short diff)."""
    problems = []
    for path, text in texts.items():
        try:
            old = read_text(path) if path.exists() or path.is_symlink() else ""
        except ReferenceError:
            old = ""
        if old != text:
            diff = difflib.unified_diff(
                old.splitlines(), text.splitlines(), str(path), "generated", lineterm="", n=0
            )
            shown = "\n".join(list(diff)[:20])
            problems.append(f"{shown}\n{path} is stale: run python -m flopsweep.reference (and commit it)")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m flopsweep.reference", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 naming each stale file; write nothing")
    p.add_argument("--output-dir", type=Path, default=OUT, help="default: docs/reference of the checkout")
    args = p.parse_args(argv)
    try:
        texts = generate(args.output_dir)
    except ReferenceError as exc:
        print(f"reference: {exc}", file=sys.stderr)
        return 2
    if args.check:
        problems = stale(texts)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for path, text in texts.items():
        try:
            replace_text(path, text)
        except RecordUnwritable as exc:
            print(f"reference: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {path} ({text.count(chr(10))} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # a reader that goes away (| head -1), on either stream: exit quietly
    from flopsweep.streams import standard_streams

    standard_streams()
    sys.exit(main())
