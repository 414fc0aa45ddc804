"""A set-up the OOM killer ended is not run again by the later rounds of its sweep (session 40).

With ``repeats=3``, gpt-1.3b on a 24 GiB CPU machine (estimated 19.7 GiB of ~21 free) was killed by
the kernel's OOM killer (``WorkerKilled``, SIGKILL) after about 4 minutes in round 0, and again in
round 1, before round 2 tried a third time: the same set-up on the same machine meets the same
killer. :func:`killed_round_line` finds the earlier round's record in the sweep's folder, and the
job is recorded ``invalid`` (``error.type`` :data:`ERROR_TYPE`, phase ``config``) before any worker
starts, with that one line. ``resume=true`` keeps those records (:func:`kept_on_resume`): the killed round
is not run again (session 41: it was, once, before the later rounds were skipped), said in one line for
the set-up, and its later rounds keep their ``invalid`` records without a line of their own. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

ERROR_TYPE = "KilledInEarlierRound"
"""``error.type`` of a round not run because an earlier round of its set-up was killed by SIGKILL."""

KILLED_TYPE = "WorkerKilled"
"""``error.type`` of a run a rank of which was killed by a signal (:mod:`flopsweep.outcome`)."""

MOST_RECORDS = 4096
"""The most records of the sweep's folder read for one job (each bounded by :func:`read_json`)."""


def _round_free_key(config: Mapping[str, Any]) -> str | None:
    """The job key of ``config`` whatever its round (``repeat`` left out): rounds of one set-up share it."""
    from flopsweep.identity import job_key

    return job_key({"config": {k: v for k, v in config.items() if k != "repeat"}})


def _killed_by_sigkill(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is of a run a rank of which the SIGKILL ended, not one its own fault injected."""
    error = record.get("error") if isinstance(record.get("error"), dict) else {}
    message = str(error.get("message") or "")
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    injected = isinstance(config.get("fault"), dict) and config["fault"].get("kind") not in (None, "none")
    return error.get("type") == KILLED_TYPE and "SIGKILL" in message and not injected


def killed_round_line(config: Mapping[str, Any], sweep_dir: str | Path | None) -> str | None:
    """The line that skips this round, or None to run it.

    Args:
        config: the job's config as JSON (``json.loads(json.dumps(asdict(cfg)))``); its ``repeat`` is
            the round (0 first).
        sweep_dir: ``hydra.sweep.dir`` (None: a single run, never skipped).

    Returns:
        ``round 2 of this set-up is not run: in round 0 (.../0/metrics.json) rank 0 was killed by
        SIGKILL (...; a kill -9 reads the same, ...); if it was the OOM killer, ... Fix: ...`` when a
        record under ``sweep_dir`` (:func:`flopsweep.tree.find`, no link followed, each read bounded)
        of an earlier round of the same set-up (:func:`_round_free_key`) is a
        ``WorkerKilled`` SIGKILL; None otherwise (round 0, no sweep, no such record).
    """
    from flopsweep.record import METRICS_FILE
    from flopsweep.safe_read import RecordError, read_json
    from flopsweep.tree import find

    repeat = config.get("repeat")
    if sweep_dir is None or not isinstance(repeat, int) or repeat < 1:
        return None
    key = _round_free_key(config)
    for path in sorted(find(Path(sweep_dir), METRICS_FILE, {}, limit=MOST_RECORDS)):
        try:
            record = read_json(path)
            theirs = record.get("config") if isinstance(record.get("config"), dict) else {}
            earlier = isinstance(theirs.get("repeat"), int) and theirs["repeat"] < repeat
            if earlier and _killed_by_sigkill(record) and _round_free_key(theirs) == key:
                return _line(repeat, theirs["repeat"], path, record)
        except (RecordError, OSError, ValueError):
            continue  # an unreadable or foreign record decides nothing
    return None


SIGKILL_WHY = (
    "was killed by SIGKILL (often the kernel's OOM killer: check host memory; a kill -9 reads the same, "
    "the record cannot tell them apart)"
)
"""What a record of a rank ended by SIGKILL tells (session 41, #943): a signal, not who sent it. The
lines said "the same set-up on this machine would be killed again after the same wait", a guess about a
kill -9 stated as a fact."""

AGAIN = "if it was the OOM killer, the same set-up here meets it again after the same wait"
"""Why such a set-up is not run again, as a condition (:data:`SIGKILL_WHY`)."""


def _who(record: Mapping[str, Any]) -> str:
    """``rank 0`` where the record's ``error.message`` names the rank (``rank 0 was killed by SIGKILL``), else
    ``a rank``."""
    import re

    error = record.get("error") if isinstance(record.get("error"), dict) else {}
    found = re.match(r"rank (\d+) was killed", str(error.get("message") or ""))
    return f"rank {found.group(1)}" if found else "a rank"


def _line(repeat: int, killed: int, path: Path, record: Mapping[str, Any]) -> str:
    """The one line of :func:`killed_round_line`."""
    from flopsweep.text import printable

    return (
        f"round {repeat} of this set-up is not run: in round {killed} ({printable(str(path))}) "
        f"{_who(record)} {SIGKILL_WHY}; {AGAIN}. Fix: run a smaller model or batch.micro_batch_size "
        "in a new hydra.sweep.dir (plan=true shows its estimate first)"
    )


def kept_on_resume(path: Path, config: Mapping[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    """What ``resume=true`` keeps of a round of a repeated sweep (``repeats`` over 1) instead of running it:
    its record at ``path`` when made by the same job (:func:`flopsweep.identity.same_job`) and either
    killed by SIGKILL (not an injected ``fault.kind=kill``; the line that says the round is not run again,
    once for its set-up) or a later round skipped for such a kill (:data:`ERROR_TYPE`; no line: its set-up's
    killed round says it). None: the round runs as ``resume=true`` runs any other (an
    unreadable record). A job outside rounds (a single run, a sweep without ``repeats``) killed by SIGKILL
    is kept too, its line naming the folder to remove to run it again (session 41, #921); one killed before
    it wrote a record has none here and runs again. Was: the killed round (or job) ran once more, about 4
    minutes before the OOM killer ended it again. ``config``: the job's config as JSON."""
    from flopsweep.identity import same_job
    from flopsweep.safe_read import RecordError, read_json

    repeats = config.get("repeats")
    rounds = isinstance(repeats, int) and repeats > 1
    try:
        record = read_json(Path(path))
        if not isinstance(record, dict) or not same_job(record, config):
            return None
        error = record.get("error") if isinstance(record.get("error"), dict) else {}
    except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if _killed_by_sigkill(record):
        return record, _kept_line(config.get("repeat"), path, record) if rounds else _kept_job_line(
            path, record
        )
    return (record, None) if rounds and error.get("type") == ERROR_TYPE else None


def _kept_job_line(path: Path, record: Mapping[str, Any]) -> str:
    """The one line of :func:`kept_on_resume` for a job outside rounds that SIGKILL ended: why it is not
    run again, and the folder to remove (``rm -r``, its own ``metrics.json`` and files) to run it as it is
    (no key forces one job of a sweep to run again). The folder key is the command's
    (:func:`flopsweep.free_folder.folder_key`: ``hydra.run.dir`` for a single run)."""
    import shlex

    from flopsweep.free_folder import folder_key
    from flopsweep.text import printable

    folder = printable(shlex.quote(str(path.parent)))
    return (
        f"this job is not run again (resume=true): its record ({printable(str(path))}) says its "
        f"{_who(record)} {SIGKILL_WHY}; {AGAIN}. Fix: run a smaller model or batch.micro_batch_size in a "
        f"new {folder_key()} (plan=true shows its estimate first), or to run it as it is: "
        f"rm -r {folder} and resume=true again"
    )


def _kept_line(repeat: object, path: Path, record: Mapping[str, Any]) -> str:
    """The one line of :func:`kept_on_resume` for the killed round."""
    from flopsweep.text import printable

    return (
        f"round {repeat} of this set-up is not run again (resume=true): its record "
        f"({printable(str(path))}) says its {_who(record)} {SIGKILL_WHY}; {AGAIN}; its later rounds are not "
        "run either. Fix: run a smaller model or batch.micro_batch_size in a new hydra.sweep.dir (plan=true "
        "shows its estimate first)"
    )
