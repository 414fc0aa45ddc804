"""A command line's sweep files as plain data, and a plain value written back, torch-free: the files it
selects (:func:`selected_data`, :func:`sweep_files`, :func:`file_text`), a mapping's plain values by dotted
key (:func:`plain_leaves`), and a value as a YAML file writes it (:func:`yaml_value`) or as Hydra's override
grammar does (:func:`override_value`).

Imported by the sweep file's checks (:mod:`flopsweep.sweep_file_keys`, :mod:`flopsweep.sweep_file_hydra`)
and, for the value writers, by :mod:`flopsweep.mapping_overrides`, :mod:`flopsweep.option_file_keys` and
:mod:`flopsweep.sweep_file_defaults`; it imports none of them.
"""

from __future__ import annotations

import math
import os

import yaml

from flopsweep.conf_files import ConfFileProblem, read_bounded, read_selected


def selected_data(argv: list[str], conf: str) -> dict[str, object]:
    """The files the command line selects and their plain data (:func:`flopsweep.conf_files.read_selected`),
    none where one is refused (``conf_file_problem``'s line)."""
    try:
        return read_selected(argv, conf)
    except ConfFileProblem:
        return {}


def sweep_files(read: dict[str, object], conf: str) -> list[tuple[str, object]]:
    """``(path, plain data)`` of each sweep file (under ``conf/sweep/``) among ``read``."""
    folder = os.path.join(os.path.normpath(conf), "sweep") + os.sep
    return [(path, data) for path, data in read.items() if path.startswith(folder)]


def file_text(path: str) -> str:
    """The text of the file at ``path``, read within :func:`flopsweep.conf_files.read_bounded`'s bound
    (bytes not UTF-8 replaced); ``""`` where it cannot be read."""
    try:
        return read_bounded(path).decode("utf-8", errors="replace")
    except OSError:
        return ""


def plain_leaves(data: dict, prefix: str, sections: set[str]) -> list[tuple[str, object]]:
    """``(dotted key, value)`` of each plain value of ``data``: a mapping under a section of the schema
    (``steps: {measure: 3}``) or a config group (``backend: {zero_stage: 2}``) is read key by key."""
    out = []
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and value and full in sections:
            out += plain_leaves(value, f"{full}.", sections)
        else:
            out.append((full, value))
    return out


def yaml_value(value: object) -> str:
    """``value`` as the file wrote it, for a line (``[fsdp, ddp]``, ``-5``, ``'x'``), shortened."""
    from flopsweep.config import cut

    # allow_unicode: fsdр as written, not "fsd\u0440" (a control character is still escaped)
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16, allow_unicode=True)
    return cut(text.strip().removesuffix("\n..."))


def override_value(value: object) -> str:
    """``value`` (plain YAML data) as Hydra's override grammar writes it: ``null``, ``true``, ``-5``,
    ``1e+20``, ``nan``, ``'text'`` (quoted, so that ``auto`` and ``3`` stay text), ``[a,b]``,
    ``{k:v}``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # inf, -inf: the grammar's own words
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{override_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if "'" not in text and not text.endswith("\\"):
        return f"'{text}'"
    if '"' not in text and not text.endswith("\\"):
        return f'"{text}"'
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
