"""``docs/reference/plan.md``: the columns of ``plan.csv``, both kinds, made from the code that
writes them: under ``plan_clusters`` :data:`flopsweep.plan_assess.COLUMNS` (the docstrings of
:class:`flopsweep.plan_assess.Row`'s fields, and :data:`flopsweep.plan_assess.SETUP_COLUMNS`), and one
row per job :data:`flopsweep.job.plantable.PLAN_COLUMNS` (:data:`flopsweep.job.plantable.PLAN_COLUMN_DOCS`).
A column without a description stops the generator (:class:`flopsweep.reference_text.ReferenceError`),
naming it. Written by :mod:`flopsweep.reference`. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flopsweep.reference_text import HEADER, ReferenceError, code, field_docs, table


def described(columns: Iterable[str], docs: Mapping[str, str], where: str) -> list[list[str]]:
    """``[[column, description], ...]`` of ``columns`` in order.

    Raises:
        ReferenceError: a column ``docs`` does not describe, naming it and ``where`` to describe it.
    """
    rows = []
    for column in columns:
        text = " ".join(str(docs.get(column, "")).split())
        if not text:
            raise ReferenceError(f"plan.csv column {column!r} has no description: add one in {where}")
        rows.append([code(column), text])  # table() makes it markdown and cuts it to the line
    return rows


def plan_md() -> str:
    """The text of ``docs/reference/plan.md``."""
    from flopsweep.job.plantable import PLAN_COLUMN_DOCS, PLAN_COLUMNS
    from flopsweep.plan_assess import COLUMNS, SETUP_COLUMNS, Row

    out = [
        HEADER.format(
            sources="flopsweep/plan_assess.py, job/plantable.py, job/plansweep.py, reference_plan.py"
        ),
        "",
        "# plan.csv reference",
        "",
        "`plan=true` writes `plan.csv` in the run (or sweep) directory ([Planning](../plan.md));",
        "`plan_format=csv` prints it and `plan_format=json` its rows. Blank: not known (a dropped set-up has",
        "no prediction).",
        "",
        "## With plan_clusters: one row per set-up and cluster",
        "",
        "Ranked rows first (`rank` 1 = best of every cluster together; `cluster_rank` 1..n within each),",
        "then the dropped ones with their `status` and `reason` (`flopsweep.plan_assess.COLUMNS`).",
        "",
    ]
    docs = {**field_docs(Row), **SETUP_COLUMNS}
    out += table(
        ["column", "description"], described(COLUMNS, docs, "flopsweep.plan_assess (Row, SETUP_COLUMNS)")
    )
    from flopsweep.job.plansweep import SWEEP_COLUMN_DOCS

    out += [
        "",
        "A sweep's `plan.csv` (`-m`) holds every job's rows, two columns first; `rank`, `cluster_rank`",
        "and `best` are then over every job's set-ups (`flopsweep.job.plansweep.SWEEP_COLUMNS`):",
        "",
    ]
    out += table(
        ["column", "description"],
        described(SWEEP_COLUMN_DOCS, SWEEP_COLUMN_DOCS, "flopsweep.job.plansweep.SWEEP_COLUMN_DOCS"),
    )
    out += [
        "",
        "## Without plan_clusters: one row per job",
        "",
        "(`flopsweep.job.plantable.PLAN_COLUMNS`; the terminal table shows those some row fills.)",
        "",
    ]
    out += table(
        ["column", "description"],
        described(PLAN_COLUMNS, PLAN_COLUMN_DOCS, "flopsweep.job.plantable.PLAN_COLUMN_DOCS"),
    )
    return "\n".join(out).rstrip("\n") + "\n"
