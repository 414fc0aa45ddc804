"""A number key given digits of another script (``steps.measure=٣``, ``model.seq_len="１２８"``): refused
before Hydra in one line naming the value to write in digits 0-9 (``run.py``'s refusal, exit 2). Torch-free.

Unquoted, Hydra's grammar refuses the character, and the fix used to be to quote it; quoted, the value is
text that OmegaConf's number node converts with ``int`` or ``float`` (``int("٣") == 3``), so the run took a
value the command line does not show. A string key (``tag=٣``) keeps its characters; ``plan_clusters``
refuses them in its own parser (:func:`flopsweep.clusters.parse_cluster`).
"""

from __future__ import annotations

from collections.abc import Callable

from flopsweep.override_parsing import split_override

POOL_NUMBER_KEYS = {
    "hydra.launcher.slots": "a count or device ids",
    "hydra.launcher.devices": "device ids",
    "hydra.launcher.timeout_min": "a number of minutes",
    "hydra.launcher.grace_s": "a number of seconds",
}
"""The pool launcher's keys that take numbers (``conf/hydra/launcher/pool.yaml``), no key of the job's
schema, and what each takes: ``hydra.launcher.slots=[٠]``'s grammar fix, quoting it, was refused again by
the pool (:func:`flopsweep.pool.pool_devices`), so its fix is the value in digits 0-9 (#429)."""


SPACE_NUMBER_KEYS = {
    "space.micro_batches": "micro batches",
    "space.layouts": "degrees (tp2, pp4)",
}
"""The ``space.*`` lists that hold numbers, and what: ``'space.micro_batches=[٢]'``'s grammar fix, quoting it
(``["٢"]``), planned micro batch 2 unsaid; ``space.layouts=[tp٢]`` alike (session 39, #532)."""


TEXT_NUMBER_KEYS = {
    "nproc_per_node": "a count of ranks (or auto)",
}
"""The job's keys held as text that take a whole number (``nproc_per_node: str``, ``auto`` or an
int): no number node in the schema, so ``nproc_per_node=２`` got the grammar's fix,
``'nproc_per_node="２"'``, where ``steps.measure=２`` got ``steps.measure=2``; each takes the value in
digits 0-9 as well (session 41, #942)."""


PARAMS = "hydra.sweeper.params."
"""The prefix of a sweep file's axis set on the command line (``hydra.sweeper.params.seed=1,2``)."""


def foreign_digits_problem(
    argv: list[str], recheck: Callable[[list[str]], str | None] | None = None
) -> str | None:
    """One line for the first override of ``argv`` whose key takes a number
    (:func:`flopsweep.override_schema.number_key`) and whose value, quoted or not, holds a digit of another
    script (:func:`flopsweep.lookalike.ascii_digits`), else None. The fix is the value in digits 0-9, quotes
    dropped (a number is never quoted), as :func:`flopsweep.override_grammar.runnable_line` writes it
    (``repeats=٢`` -> ``flopsweep -m repeats=2``); ``recheck`` (``run.py``'s refusal) names what still refuses
    the corrected line (``(then: ...)``)."""
    from flopsweep.lookalike import ascii_digits, named
    from flopsweep.override_grammar import runnable_line
    from flopsweep.override_parsing import overrides_of
    from flopsweep.override_schema import number_key

    overrides = overrides_of(argv)
    choices = [o for o in overrides if o.isascii() and "." not in o.partition("=")[0]]  # the options picked
    for override in overrides:
        prefix, name, value = split_override(override)
        key = prefix + name
        if "=" not in override or (digits := ascii_digits(value)) is None:
            continue
        axis = name.removeprefix(PARAMS)  # hydra.sweeper.params.seed=١,٢: a sweep file's axis, seed's number
        takes = (
            POOL_NUMBER_KEYS.get(name)
            or SPACE_NUMBER_KEYS.get(axis)
            or TEXT_NUMBER_KEYS.get(axis)
            or ("a number" if number_key(axis, choices) else None)
        )
        if takes is None or axis.startswith("hydra") and name not in POOL_NUMBER_KEYS:
            continue
        meant = f"{key}={digits.replace(chr(34), '').replace(chr(39), '')}"
        line, note = runnable_line(argv, override, meant)
        fixed = line.split()[1:] if " " in line else [meant if a == override else a for a in argv]
        if recheck is not None and (again := recheck(fixed)):
            note += f" (then: {again.removeprefix('Invalid config: ')})"
        first = next(c for c in value if not c.isascii() and c.isdigit())
        fix = f"did you mean {line}?" if " " in line else f"write {line}"
        return (
            f"Invalid config: {override}: is written in another script's digits ({named(first)}), and {name} "
            f"takes {takes} in digits 0-9. Fix: {fix}{note or '.'}"
        )
    return None
