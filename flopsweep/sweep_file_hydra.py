"""A sweep file's ``hydra:`` block, checked before Hydra composes it, torch-free: where its jobs write
(:data:`OUTPUT_KEYS`: ``hydra.run.dir``, ``hydra.sweep.dir``, ...) and log (:data:`LOG_KEYS`), each with the
command line's own check of that key and the file named in the line (:func:`output_dir_problem`).

Imported by ``run.py`` (its checks before Hydra); it reads the files with :mod:`flopsweep.sweep_file_read`
and never imports :mod:`flopsweep.sweep_file_keys` (the file's other keys and values).
"""

from __future__ import annotations

from flopsweep.conf_files import shown_path
from flopsweep.override_schema import CONF
from flopsweep.sweep_file_read import override_value, plain_leaves, selected_data, sweep_files

OUTPUT_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.output_subdir")
"""The keys of a sweep file's ``hydra:`` block that say where a run writes, checked as the command line's
(:func:`output_dir_problem`)."""


def _hydra_value(data: object, key: str) -> object:
    """The value of ``key`` (``hydra.sweep.dir``) in a file's plain ``data``; None where it is not set."""
    for part in key.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def output_dir_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a selected sweep file's ``hydra.run.dir``, ``hydra.sweep.dir``, ``hydra.sweep.subdir``
    or ``hydra.output_subdir`` (:data:`OUTPUT_KEYS`) that the command line's own check refuses
    (:func:`flopsweep.command_line_checks.output_dir_problem`: inside ``conf/``, ``sweep/``, the package or
    ``hydra_plugins``; a link or a file; ``''``, the current folder; a leading ``~``, which Hydra does not
    expand (:func:`flopsweep.folders.home_tilde_problem`: it made a folder named ``~`` here);
    ``${hydra:...}`` in a sweep's folder, a traceback in Hydra's launcher; a subdir out of the sweep's
    folder), with the file named, else None. A key the command line gives itself replaces the file's and is
    not checked here. The callback's lock refused a folder inside a config folder only after Hydra composed
    every job (and not ``''`` or ``${hydra:...}``)."""
    from flopsweep.command_line_checks import output_dir_problem as checked
    from flopsweep.flags import is_multirun
    from flopsweep.folders import home_tilde_problem
    from flopsweep.override_parsing import given_keys

    given = given_keys(argv)
    for path, data in sweep_files(selected_data(argv, conf), conf):
        for key in ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir"):
            parent, _, leaf = key.rpartition(".")
            if key not in given and isinstance(where := _hydra_value(data, parent), dict) and leaf in where:
                if where[leaf] is None:  # a bare ~ or an empty value: Hydra's traceback (a null folder)
                    return (
                        f"Invalid config: {shown_path(path, conf)}: {key} is null (YAML reads a bare ~ or an "
                        "empty value as null), and Hydra needs a folder. Fix: write the folder out, e.g. "
                        f'{leaf}: "${{oc.env:HOME}}/runs" in the file, or drop {leaf} from it'
                    )
        own = [
            f"{key}={value}"
            for key in OUTPUT_KEYS
            if key not in given and (value := _hydra_value(data, key)) is not None
        ]
        multirun = ["-m"] if is_multirun(argv) else []
        # a ~ first: the check below makes (and removes) the folder, here a folder named ~
        if own and (problem := home_tilde_problem(own, in_file=True) or checked([*multirun, *own])):
            said = problem.removeprefix("Invalid config: ").replace(
                "Fix: drop the override", "Fix: drop it from the file"
            )
            return f"Invalid config: {shown_path(path, conf)}: {said}"
        if problem := _job_log_problem(argv, data, given, multirun):
            return f"Invalid config: {shown_path(path, conf)}: {problem.removeprefix('Invalid config: ')}"
    return None


LOG_KEYS = ("hydra.job.name", "hydra.job_logging")
"""A sweep file's ``hydra:`` keys that say where the job's log goes (:mod:`flopsweep.job_log`)."""


def _job_log_problem(argv: list[str], data: object, given: set[str], multirun: list[str]) -> str | None:
    """The command line's line (:func:`flopsweep.job_log.job_log_problem`) for a sweep file's
    ``hydra.job.name`` or ``hydra.job_logging`` file name (:data:`LOG_KEYS`) that the command line does not
    give itself, its folder the command line's ``hydra.run.dir``/``hydra.sweep.dir``, else the file's; the
    fix then drops the key from the file. Else None."""
    from flopsweep.job_log import job_log_problem
    from flopsweep.override_parsing import override_key, overrides_of

    def own(keys: tuple[str, ...]) -> list[str]:
        found = [(k, _unless_given(k, _hydra_value(data, k), given)) for k in keys if k not in given]
        return [f"{k}={override_value(v)}" for k, v in found if v is not None]

    places = ("hydra.run.dir", "hydra.sweep.dir", "hydra.job.chdir")
    where = [o for o in overrides_of(argv) if override_key(o) in places] + own(places)
    logs = own(LOG_KEYS)
    problem = job_log_problem([*multirun, *where, *logs]) if logs else None
    if (
        problem is None
    ):  # each key of its hydra.job_logging, as logging takes it (+: the file adds what it sets)
        from flopsweep.job_log_keys import job_logging_key_problem

        mapping = _unless_given("hydra.job_logging", _hydra_value(data, "hydra.job_logging"), given)
        top = "hydra.job_logging."
        leaves = plain_leaves(mapping, top, _all_sections(mapping, top)) if isinstance(mapping, dict) else []
        own = frozenset(k.removeprefix(top) for k, _ in leaves)  # the file's keys: set without a +
        problem = job_logging_key_problem([f"++{k}={override_value(v)}" for k, v in leaves], also=own)
    return problem.replace("Fix: drop the override", "Fix: drop it from the file") if problem else None


def _all_sections(data: dict, prefix: str) -> set[str]:
    """Every key of ``data`` that holds a mapping, dotted after ``prefix``: :func:`plain_leaves` reads
    each."""
    out = set()
    for key, value in data.items():
        if isinstance(value, dict):
            out |= {f"{prefix}{key}", *_all_sections(value, f"{prefix}{key}.")}
    return out


def _unless_given(key: str, value: object, given: set[str]) -> object:
    """``value`` (the file's ``key``) less each part the command line sets itself (``given``): the command
    line's ``hydra.job_logging.handlers.file.filename=...`` replaces the file's, so the file's is not
    checked (a copy; a mapping left empty is None)."""
    import copy

    below = [g.removeprefix(key + ".").split(".") for g in given if g.startswith(key + ".")]
    if not below or not isinstance(value, dict):
        return value
    value = copy.deepcopy(value)
    for parts in below:
        node = value
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    return value or None
