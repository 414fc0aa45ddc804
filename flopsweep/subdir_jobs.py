"""A ``hydra.sweep.subdir`` that varies with some of a sweep's axes but not all, so that two jobs share one
folder: ``-m seed=0,1 steps.measure=2,3 'hydra.sweep.subdir=${seed}'`` ran jobs 0 and 2 in ``.../0``, and
job 2 stopped on ``.../0/metrics.json already exists`` (exit 1) after job 0's whole run (session 38).

Decided by composing the subdir for each job of the basic sweeper (every combination of the axes' values,
``repeats=`` as its ``repeat=range(0,R)``), not by its pattern: :func:`shared_subdir`. Torch-free.
"""

from __future__ import annotations

import itertools
import os
import re

from flopsweep.override_multirun import MAX_SWEEP_JOBS
from flopsweep.override_parsing import overrides_of, split_override
from flopsweep.override_schema import CONF

PER_JOB = ("hydra.job.num", "hydra.job.id", "hydra.job.override_dirname", "hydra.overrides")
"""Hydra's keys whose value differs from job to job of a multirun (``hydra.overrides.task`` too)."""

ONCE_A_SWEEP = ("now", "oc.env", "flopsweep_uid")
"""The resolvers whose value is the same for every job of a sweep: ``${now:...}`` is kept once resolved
(Hydra registers it with ``use_cache=True``), the environment and the sweep's id do not change."""

INNERMOST = re.compile(r"\$\{([^${}]*)\}")
"""An interpolation with none inside it: ``${now:%H}``, ``${seed}``."""


def expanded(value: str, argv: list[str], rounds: int = 8, conf: str = CONF) -> str:
    """The subdir ``value`` with each ``${KEY}`` the command line ``argv`` or a selected sweep file
    (:func:`file_values`; the command line's wins) sets to one value (no sweep, no ``hydra.*`` key)
    replaced by that value as written, as Hydra resolves it: with ``tag='${seed}'`` (or a file's
    ``tag: ${seed}``), ``${tag}`` is ``${seed}`` (it was taken for one folder for every job). At most
    ``rounds`` rounds (a loop of keys is left as it is); a key no file nor the command line sets is taken
    as it is (the same in every job)."""
    from flopsweep.override_parsing import parsed_or_none, typed_values

    typed = {
        key: text
        for key, text in typed_values([*file_values(argv, conf), *overrides_of(argv)]).items()
        if not key.startswith("hydra")
        and (parsed := parsed_or_none(f"{key}={text}")) is not None
        and not parsed.is_sweep_override()
    }

    def one(match: re.Match) -> str:
        return typed.get(match.group(1).strip(), match.group(0))

    for _ in range(rounds):
        value, before = INNERMOST.sub(one, value), value
        if value == before:
            break
    return value


def file_values(argv: list[str], conf: str = CONF) -> list[str]:
    """The plain values of each sweep file ``argv`` selects (``+sweep=mine``), as overrides in the order
    Hydra merges them (:func:`flopsweep.sweep_file_keys.file_overrides`: ``tag='${seed}'``); empty where
    the files cannot be read (their own check's line)."""
    from flopsweep.conf_files import ConfFileProblem, read_selected, sweep_params
    from flopsweep.sweep_file_keys import file_overrides

    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return []
    folder = os.path.join(os.path.normpath(conf), "sweep") + os.sep
    swept = {o.partition("=")[0] for _, o in sweep_params(argv, conf)}  # an axis of the file wins
    return [
        o
        for path in read
        if path.startswith(folder)
        for o in file_overrides(path, conf)
        if o.partition("=")[0] not in swept
    ]


def sweep_axes(argv: list[str], conf: str = CONF) -> list[tuple[str, list[str]]] | None:
    """``(key, values as text)`` of each axis of the basic sweep ``argv``: a ``+sweep=`` file's
    ``hydra.sweeper.params`` the command line does not give, the command line's ``hydra.sweeper.params.KEY``
    and sweep overrides, ``repeat`` for ``repeats=R`` over 1 (``0..R-1``). None where an axis cannot be
    listed here (a key's ``glob()``, an ``interval()``) or the grammar refuses one (its own line)."""
    from flopsweep.conf_files import sweep_params
    from flopsweep.override_parsing import parsed_or_none
    from flopsweep.override_schema import listed_values

    typed = []
    for text in overrides_of(argv):
        _, key, value = split_override(text)
        typed.append(f"{key.removeprefix('hydra.sweeper.params.')}={value}")
    given = {t.partition("=")[0] for t in typed}
    if "repeats" not in given and (rounds := file_repeats(argv, conf)) is not None:
        typed.insert(0, f"repeats={rounds}")  # a sweep file's repeats: 2, which the sweeper reads as well
    axes: dict[str, list[str]] = {}
    for text in [o for _, o in sweep_params(argv, conf) if o.partition("=")[0] not in given] + typed:
        key, _, value = text.partition("=")
        if key == "repeats":
            count = int(value) if value.strip().isdigit() else 1
            if count > 1:
                axes["repeat"] = [str(k) for k in range(count)]
            continue
        if (parsed := parsed_or_none(text)) is None:
            return None
        if parsed.is_sweep_override():
            if (values := listed_values(parsed)) is None:
                return None
            axes[key] = values
    return list(axes.items())


def file_repeats(argv: list[str], conf: str) -> str | None:
    """The ``repeats`` the primary config or a ``+sweep=`` file sets at its top (``repeats: 2``; the last
    file's), as text, else None: the sweeper reads it from the composed config, as the command line's
    (``repeats: 2`` with ``subdir: ${seed}`` ran job 0 in ``.../0``, and job 1 stopped on its record)."""
    from flopsweep.conf_files import ConfFileProblem, read_selected

    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return None
    tops = (os.path.join(conf, "config.yaml"), os.path.join(conf, "sweep", ""))
    found = [
        data["repeats"]
        for path, data in read.items()
        if (path == os.path.normpath(tops[0]) or path.startswith(tops[1]))
        and isinstance(data, dict)
        and "repeats" in data
    ]
    return str(found[-1]) if found else None


def _token(key: str, job: dict[str, str]) -> str | None:
    """What the interpolation ``${key}`` gives in ``job`` (``{axis: value}``): the value itself for an
    axis, a token naming the axes it depends on for a node above or below one (``${model.n_layer}`` of
    ``model=a,b``: the choice), ``""`` for a key no axis sets (the same in every job); None for
    :data:`PER_JOB` keys (every job its own)."""
    if any(key == k or key.startswith(k + ".") for k in PER_JOB):
        return None
    key = key.removeprefix("hydra.runtime.choices.")
    if key in job:
        return job[key]
    deps = sorted(a for a in job if a.startswith(key + ".") or key.startswith(a + "."))
    return "\0" + "\0".join(f"{a}={job[a]}" for a in deps) + "\0" if deps else ""


def job_subdir(value: str, job: dict[str, str]) -> str | None:
    """The subdir ``value`` (as written) composed for one job (``{axis: value}``), normalised as a folder
    (``a/./b`` is ``a/b``), each interpolation as :func:`_token` gives it; None where it cannot be told
    here (another resolver) or differs for every job (:data:`PER_JOB`)."""
    while (match := INNERMOST.search(value)) is not None:
        body = match.group(1).strip()
        resolver, colon, args = body.partition(":")
        if colon and resolver == "oc.select":
            body, colon = args.split(",")[0].strip(), ""
        if colon and resolver.strip() not in ONCE_A_SWEEP:
            return None
        token = f"\0{body}\0" if colon else _token(body, job)
        if token is None:
            return None
        value = value[: match.start()] + token + value[match.end() :]
    return os.path.normpath(value)


def shared_subdir(value: str, axes: list[tuple[str, list[str]]]) -> tuple[str, dict, dict] | None:
    """The folder and the first two jobs (``{axis: value}`` each, in the basic sweeper's order) whose
    composed subdirs (:func:`job_subdir`) are that same folder, else None (each its own, or not told here;
    at most :data:`MAX_SWEEP_JOBS` jobs composed)."""
    keys = [k for k, _ in axes]
    seen: dict[str, dict] = {}
    for values in itertools.islice(itertools.product(*(v for _, v in axes)), MAX_SWEEP_JOBS):
        job = dict(zip(keys, values, strict=True))
        if (folder := job_subdir(value, job)) is None:
            return None
        if folder in seen:
            return folder, seen[folder], job
        seen[folder] = job
    return None
