"""A ``hydra.sweep.subdir`` that is the same for every job of a sweep, refused before Hydra starts (sessions
36-37). Torch-free.

Each job of a multirun writes into ``hydra.sweep.dir/hydra.sweep.subdir``; the default,
``${hydra.job.num}``, differs from job to job. A subdir that does not (``x``, ``.``, ``${now:%H}``, resolved
once for the sweep, ``${tag}`` where no axis sets ``tag``) put every job in one folder: job 0 ran, and job 1
stopped on ``.../x/metrics.json already exists`` (exit 1), after job 0's whole run. The subdir is the command
line's, else a ``+sweep=`` file's ``hydra: {sweep: {subdir: ...}}``, else conf/config.yaml's; each source is
named in the refusal (:func:`fixed_subdir_problem`).
"""

from __future__ import annotations

import math
import os
import re

from flopsweep.override_parsing import override_key, overrides_of, split_override, typed_values
from flopsweep.override_schema import CONF
from flopsweep.subdir_jobs import INNERMOST, ONCE_A_SWEEP, PER_JOB

DEFAULT_SUBDIR = "${hydra.job.num}"
"""conf/config.yaml's ``hydra.sweep.subdir``: the job's number."""

ABSOLUTE_KEYS = tuple(
    f"hydra{sep}{key}"
    for sep in ".:"
    for key in ("sweep.dir", "run.dir", "runtime.output_dir", "runtime.cwd")
)
"""Hydra's keys whose value is a folder (absolute once resolved): a subdir naming one leaves the sweep's.
``hydra.runtime.choices.*`` are option names, not folders (``${hydra.runtime.choices.model}/${seed}`` was
refused as outside the sweep's folder, session 38)."""

_ENV = re.compile(r"\$\{oc\.env:([^,}]*)(?:,([^}]*))?\}")
"""``${oc.env:NAME}`` or ``${oc.env:NAME,default}``, which a subdir reads from this environment."""


def escapes(value: str) -> bool:
    """Whether the subdir ``value`` names a folder outside the sweep's once interpolated: absolute or
    with a ``..`` part after ``${oc.env:...}`` is read from this environment (``${oc.env:HOME}`` is
    ``/root``), or naming one of :data:`ABSOLUTE_KEYS` (``${hydra.sweep.dir}/x`` nests the sweep in
    itself). Other interpolations are taken as one relative name."""
    text = value.replace(" ", "")
    if any("${" + key in text for key in ABSOLUTE_KEYS):
        return True
    text = _ENV.sub(lambda m: os.environ.get(m.group(1).strip(), m.group(2) or ""), text)
    text = INNERMOST.sub("x", text)
    return os.path.isabs(text) or ".." in text.split("/")


def job_count(argv: list[str], conf: str = CONF) -> int:
    """How many jobs the multirun ``argv`` runs, at least: its axes' product (a ``+sweep=`` file's
    ``hydra.sweeper.params`` too, unless the command line gives the key) times ``repeats=`` (a sweep
    file's ``repeats:`` where the command line gives none: :func:`flopsweep.subdir_jobs.file_repeats`);
    2 for a sweeper other than the basic one (its trials are jobs); 1 where the grammar refuses a value."""
    from flopsweep.conf_files import sweep_params
    from flopsweep.override_multirun import DEFAULT_SWEEPER, axis_length
    from flopsweep.override_parsing import parsed_all_or_none

    overrides = overrides_of(argv)
    given = {override_key(o) for o in overrides}
    axes = [o for _, o in sweep_params(argv, conf) if override_key(o) not in given]
    if (parsed := parsed_all_or_none([*axes, *overrides])) is None:  # the grammar's own line
        return 1
    if any(o.key_or_group == "hydra/sweeper" and str(o.value()) != DEFAULT_SWEEPER for o in parsed):
        return 2
    repeats = next((o.value() for o in parsed if o.key_or_group == "repeats"), None)
    if repeats is None:  # a sweep file's repeats: 2 (the sweeper reads the composed config's)
        from flopsweep.subdir_jobs import file_repeats

        text = file_repeats(argv, conf) or "1"
        repeats = int(text) if text.isdigit() else 1
    total = math.prod(axis_length(o) for o in parsed if o.is_sweep_override())
    return total * (repeats if isinstance(repeats, int) and repeats > 0 else 1)


def swept_keys(argv: list[str], conf: str = CONF) -> set[str] | None:
    """The keys the sweep ``argv`` sets to another value from job to job: the command line's sweep axes
    (``seed=0,1``, ``model=a,b``), a ``+sweep=`` file's ``hydra.sweeper.params``, the command line's
    ``hydra.sweeper.params.KEY``, and ``repeat`` for ``repeats=`` over 1 (a sweep file's too); None under a
    sweeper other than
    the basic one, whose trials may set any key."""
    from flopsweep.conf_files import sweep_params
    from flopsweep.override_multirun import DEFAULT_SWEEPER
    from flopsweep.override_parsing import parsed_or_none

    if any(sweeper != DEFAULT_SWEEPER for sweeper in _file_sweepers(argv, conf)):
        return None
    keys: set[str] = {override_key(o) for _, o in sweep_params(argv, conf)}
    for text in overrides_of(argv):
        _, key, value = split_override(text)
        if key == "hydra/sweeper" and value.strip() != DEFAULT_SWEEPER:
            return None
        if key.startswith("hydra.sweeper.params."):
            keys.add(key.removeprefix("hydra.sweeper.params."))
        elif key == "repeats" and value.strip() not in ("", "1"):
            keys.add("repeat")
        elif (parsed := parsed_or_none(text)) is not None and parsed.is_sweep_override():
            keys.add(key)
    if not any(override_key(o) == "repeats" for o in overrides_of(argv)):
        from flopsweep.subdir_jobs import file_repeats

        if (rounds := file_repeats(argv, conf)) is not None and rounds.strip() not in ("", "1"):
            keys.add("repeat")  # a sweep file's repeats: 2
    return keys


def _file_sweepers(argv: list[str], conf: str) -> list[str]:
    """The ``hydra/sweeper`` options the selected files' defaults lists pick (``- override /hydra/sweeper:
    tune`` of a sweep file, conf/config.yaml's ``basic_batched``)."""
    from flopsweep.conf_files import ConfFileProblem, read_selected

    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return []
    return [
        str(value)
        for data in read.values()
        for entry in ((data.get("defaults") if isinstance(data, dict) else None) or [])
        if isinstance(entry, dict)
        for key, value in entry.items()
        if str(key).split()[-1:] and str(key).split()[-1].strip("/") == "hydra/sweeper"
    ]


def _varies(key: str, swept: set[str] | None) -> bool | None:
    """Whether the value of the config key ``key`` differs from job to job (None: cannot tell)."""
    if any(key == k or key.startswith(k + ".") for k in PER_JOB):
        return True
    if key.startswith("hydra.runtime.choices."):  # the option of a group: varies where it is an axis
        key = key.removeprefix("hydra.runtime.choices.")
    elif key.startswith("hydra."):
        return False  # hydra.job.name, hydra.runtime.output_dir's parts, hydra.sweep.dir: the sweep's
    if swept is None:
        return None
    return any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in swept)


def subdir_kind(value: str, swept: set[str] | None) -> str | None:
    """``"fixed"`` when ``value`` (a subdir as written) is the same for every job (a plain path;
    interpolations only of :data:`ONCE_A_SWEEP` resolvers and of keys no axis sets), ``"varies"`` when an
    interpolation of it differs from job to job (:data:`PER_JOB`, a swept key), else None (another
    resolver, another sweeper: left to the jobs)."""
    unknown = False
    while (match := INNERMOST.search(value)) is not None:
        body = match.group(1).strip()
        resolver, colon, args = body.partition(":")
        if colon and resolver == "oc.select":
            body, colon = args.split(",")[0].strip(), ""
        if colon:
            varies = False if resolver.strip() in ONCE_A_SWEEP else None
        else:
            varies = _varies(body, swept)
        if varies:
            return "varies"
        unknown = unknown or varies is None
        value = value[: match.start()] + "_" + value[match.end() :]
    return None if unknown else "fixed"


def _subdir_source(argv: list[str], conf: str) -> tuple[str | None, bool, str] | None:
    """``(file shown, whether it is a sweep file, subdir)`` of the sweep's ``hydra.sweep.subdir``: the
    command line's (file None), else the last selected sweep file's that sets it, else the primary
    config's; None when none does."""
    from flopsweep.conf_files import ConfFileProblem, read_selected, selected_files, shown_path

    if (given := typed_values(overrides_of(argv)).get("hydra.sweep.subdir")) is not None:
        return None, False, given
    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return None  # conf_file_problem's line
    files = selected_files(argv, conf)
    primary = os.path.normpath(files[0]) if files else None
    sweep = os.path.join(os.path.normpath(conf), "sweep") + os.sep
    order = [p for p in read if p.startswith(sweep)][::-1] + ([primary] if primary in read else [])
    for path in order:
        data = read[path]
        for part in ("hydra", "sweep"):
            data = data.get(part) if isinstance(data, dict) else None
        if isinstance(data, dict) and "subdir" in data and data["subdir"] is not None:
            return shown_path(path, conf), path.startswith(sweep), str(data["subdir"])
    return None


def fixed_subdir_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a ``hydra.sweep.subdir`` that is the same for every job (:func:`subdir_kind`: ``x``,
    ``.``, ``${now:%H}``, ``${tag}`` where no axis sets ``tag``) in a multirun of more than one job
    (:func:`job_count`), with its source named (the command line, a sweep file, conf/config.yaml), else
    None; a single-job multirun keeps a fixed subdir. The command line's fix is quoted, so that a shell
    leaves ``${...}`` to Hydra; ``.`` (the sweep's folder itself) gets the default, ``${hydra.job.num}``."""
    from flopsweep.flags import is_multirun

    if not is_multirun(argv) or (found := _subdir_source(argv, conf)) is None:
        return None
    from flopsweep.subdir_jobs import expanded

    shown, in_sweep_file, value = found
    decided = expanded(
        value, argv, conf=conf
    )  # tag='${seed}' 'hydra.sweep.subdir=${tag}': decided as ${seed}
    if escapes(decided):
        where = "" if shown is None else f"{shown}: "
        return (
            f"Invalid config: {where}hydra.sweep.subdir={value}: names a folder outside hydra.sweep.dir once "
            "interpolated (an absolute path, a '..', or a folder of Hydra's), so the summary and resume=true "
            f"lose each job's record. Fix: a relative name under the sweep's folder, e.g. "
            f"'hydra.sweep.subdir=job-{DEFAULT_SUBDIR}'."
        )
    if any(key in decided for key in PER_JOB):  # the default, ${hydra.job.num}: nothing more to read
        return None
    kind = subdir_kind(decided, swept_keys(argv, conf))
    if kind == "varies":
        return _shared_problem(argv, conf, found, decided)
    if kind != "fixed" or job_count(argv, conf) < 2:
        return None
    bare = "${" not in value and os.path.normpath(value) in (".", "")
    why = "every job of the sweep would write into one folder"
    if bare:
        why = f"is the sweep's folder itself, so {why}"
    elif "${now:" in value:
        why = f"is the same for every job (${{now:...}} is resolved once, as the sweep starts), so {why}"
    elif "${" in value:
        why = (
            f"is the same for every job (no part of it is {DEFAULT_SUBDIR} or a key the sweep varies), so "
            + why
        )
    return _line(found, why, bare)


def _shared_problem(
    argv: list[str], conf: str, found: tuple[str | None, bool, str], value: str
) -> str | None:
    """The line for a subdir that varies with some axes but gives two jobs one folder
    (:func:`flopsweep.subdir_jobs.shared_subdir`: ``${seed}`` with ``seed=0,1 steps.measure=2,3``);
    ``value``: the subdir of ``found`` with the command line's keys in it (:func:`expanded`)."""
    from flopsweep.subdir_jobs import shared_subdir, sweep_axes

    if (axes := sweep_axes(argv, conf)) is None or (pair := shared_subdir(value, axes)) is None:
        return None
    folder, *jobs = pair
    first, second = (" ".join(f"{k}={v}" for k, v in job.items()) for job in jobs)
    said = "" if "\0" in folder else f" ({folder} under hydra.sweep.dir)"
    why = (
        f"two jobs of the sweep would write into one folder{said}: {first} and {second}, so the second "
        "stops on the first's record"
    )
    return _line(found, why, False)


def _line(found: tuple[str | None, bool, str], why: str, bare: bool) -> str:
    """The refusal of the subdir ``found`` (:func:`_subdir_source`) for ``why``, its fix by its source:
    ``${hydra.job.num}`` in it (``.``: the default itself), accepted by :func:`fixed_subdir_problem`."""
    from flopsweep.root_defaults import DAMAGED

    shown, in_sweep_file, value = found
    meant = DEFAULT_SUBDIR if bare else f"{value}_{DEFAULT_SUBDIR}"
    if shown is None:
        fix = "give each job its own folder, e.g." if bare else f"include {DEFAULT_SUBDIR}, e.g."
        return f"Invalid config: hydra.sweep.subdir={value}: {why}. Fix: {fix} 'hydra.sweep.subdir={meant}'."
    fix = f"write subdir: {meant} under its hydra.sweep"
    if in_sweep_file:
        fix = (
            f"drop subdir from its hydra.sweep (the default, {DEFAULT_SUBDIR}, gives each job its own folder)"
            if bare
            else f"{fix}, or drop subdir there (the default is {DEFAULT_SUBDIR})"
        )
        return f"Invalid config: {shown}: hydra.sweep.subdir: {value}: {why}. Fix: {fix}."
    return (
        f"Invalid config: {shown}: hydra.sweep.subdir: {value}: {why}: {DAMAGED}. Fix: {fix}, or restore it "
        f"from the checkout: git checkout {shown}."
    )
