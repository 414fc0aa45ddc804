"""``hydra.job.name`` as a plain file name: the job's log is ``<run folder>/<hydra.job.name>.log``
(``conf/hydra/job_logging/flopsweep.yaml``), so a name with a path in it wrote the log outside the run's
folder (``../x``) or lost it (``/tmp/x/f``). Torch-free; read by the checks before Hydra
(:mod:`flopsweep.job_log`) and by the callback's folder check (:func:`flopsweep.folders.log_link_problem`).
"""

from __future__ import annotations

JOB_NAME_KEY = "hydra.job.name"
NAME_MAX = 255
"""The longest file name (bytes) Linux file systems take: ``<hydra.job.name>.log`` must fit it."""


def plain_name(name: str) -> str:
    """The last plain part of ``name`` (``../esc2`` -> ``esc2``), for a fix; ``myjob`` when none."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..") and p.isprintable()]
    return parts[-1] if parts else "myjob"


def job_name_problem(name: str, key: str = JOB_NAME_KEY) -> str | None:
    """One line refusing ``name`` as ``hydra.job.name`` when it is no plain file name, else None: empty,
    ``.`` or ``..``, holding a ``/`` or a control character, or longer than :data:`NAME_MAX` bytes with
    ``.log``. The job's log is ``<run folder>/<name>.log``: ``../x`` put it outside the run's folder,
    ``/tmp/x/f`` lost it (exit 0 both)."""
    bad = (
        not name
        or name in (".", "..")
        or "/" in name
        or any(not c.isprintable() for c in name)
        or len(f"{name}.log".encode(errors="replace")) > NAME_MAX
    )
    if not bad:
        return None
    fix = "drop the override (the log is run.log)"
    if name and (plain := plain_name(name)) != name:
        fix += f", or give a plain name such as {key}={plain}"
    return (
        f"Invalid config: {key}={name}: the job's log is <run folder>/<{key}>.log, so the name must be "
        f"a plain file name (not empty, no '/', not '..', no control character, at most {NAME_MAX - 4} "
        f"bytes); this one would write the log outside the run's folder or lose it. Fix: {fix}."
    )
