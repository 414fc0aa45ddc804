"""The tuner's report (``hydra/sweeper=tune``): the winner with its 95% interval, the runner-up and
whether the two differ significantly, predicted against measured for every set-up it ran, the
pruned set-ups with their reasons, and the override line that runs the winner. One dict
(:func:`summary`, written as ``tune.json``), its console lines (:func:`lines`) and its markdown
(:func:`markdown`, ``tune.md``).

A set-up's figure and interval are the analysis's for the same records (:func:`interval`,
:func:`analysis.spread.pooled_figure`, the function a pooled ``repeats=`` row takes them from): over
repeats when a set-up ran twice or more (a rate's from the Student-t interval of its runs' mean steps on
the log scale, :func:`analysis.spread.rate_ends`: finite, also for two runs far apart), else over the steps
of its one run (rates only); one run with no interval is said so (``(one run, no interval)``). Two
intervals that overlap are "not significant" (the analysis's conservative test). In ``tune.json`` a
number JSON cannot hold is ``null`` with the object's ``nulls`` key saying why
(:mod:`flopsweep.strict_json`); a ``null`` without one is no value (no interval, a run that was not ok).
Torch-free.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import Any

from flopsweep.cli import COMMAND
from flopsweep.override_parsing import override_key
from flopsweep.strict_json import nulled
from flopsweep.text import figure
from flopsweep.tune import Budget, Candidate, gpu_seconds_text, predicted_reason, ranked

SWEEP_ONLY_KEYS = ("repeat", "repeats", "resume")
"""Overrides the winner's line leaves out: a sweep's, which a single run refuses or does not need."""

JSON_FILE = "tune.json"
MARKDOWN_FILE = "tune.md"


def interval(c: Candidate) -> tuple[float, float, str] | None:
    """``(low, high, over)``: the 95% interval of ``c``'s objective (:attr:`Candidate.objective`), the
    analysis's for the same records; None when it has none.

    Over its ok runs (``"repeats"``, two or more): :attr:`Candidate.pooled`, i.e.
    :func:`analysis.spread.pooled_figure`, the interval a pooled ``repeats=`` row carries, about the
    figure it ranks by (:attr:`Candidate.measured`): a rate's from the Student-t interval of its runs'
    mean steps on the log scale (finite, two runs 16% apart too), a step time's or another figure's the
    t-interval of the mean of its runs, low end at least 0. After one run of a
    rate (:data:`analysis.spread.MEAN_STEP_RATES`), over its steps (``"steps"``,
    :func:`analysis.spread.step_factors`); no interval after one run of anything else.
    """
    from analysis.spread import MEAN_STEP_RATES, step_factors

    got = c.pooled
    if got is None:
        return None
    if got.rounds >= 2:
        return None if math.isnan(got.low) or math.isnan(got.high) else (got.low, got.high, "repeats")
    factors = step_factors(c.step_times) if c.objective in MEAN_STEP_RATES else None
    if factors is None:
        return None
    return got.value * factors[0], got.value * factors[1], "steps"


def _error(predicted: float | None, c: Candidate) -> float | None:
    """(predicted - measured) / measured, as the analysis's ``prediction_error``."""
    if predicted is None or not c.measured:
        return None
    return (predicted - c.measured) / c.measured


def _state(c: Candidate, winner: Candidate | None, runner: Candidate | None) -> str:
    if c.pruned:
        return "pruned"
    if c is winner:
        return "winner"
    if c is runner:
        return "runner-up"
    if c.failed:
        return "failed"
    if c.dropped_after is not None:
        return f"dropped after round {c.dropped_after}"
    return "measured" if c.values else "not measured"


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _pick(c: Candidate | None) -> dict[str, Any] | None:
    if c is None:
        return None
    ci = interval(c)
    return {
        "label": c.label,
        "overrides": list(c.overrides),
        "value": c.measured,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "ci_over": ci[2] if ci else None,
        "runs": len([v for v in c.values if math.isfinite(v)]),
    }


def summary(
    candidates: Sequence[Candidate],
    final: Sequence[Candidate],
    *,
    objective: str,
    direction: str,
    budget: Budget,
    rounds: list[dict[str, Any]],
    stopped: str,
) -> dict[str, Any]:
    """The report as one JSON-able dict (``tune.json``): the winner and runner-up (the best two of
    ``final``, the last round's ok set-ups, by their measured figure,
    :attr:`flopsweep.tune.Candidate.measured`; with one, the runner-up is the best of the other ok
    set-ups), ``significant`` (True when their intervals do not overlap, None when either has none), every
    set-up, the rounds, the budget and why the tuner stopped, and ``command``: the line that runs the
    winner. Strict JSON (:func:`flopsweep.strict_json.nulled`): a number it cannot hold (any inf or NaN)
    is None, its object's ``nulls`` naming it and why."""
    from analysis.significance import overlap

    ok = [c for c in candidates if c.failed is None and c.measured is not None]
    best = ranked([c for c in final if c in ok], direction)
    best += [c for c in ranked(ok, direction) if c not in best]
    winner, runner = (best + [None, None])[:2]
    picks = {"winner": _pick(winner), "runner_up": _pick(runner)}
    significant = None
    ca = interval(winner) if winner else None
    cb = interval(runner) if runner else None
    if ca and cb and not any(math.isnan(x) for x in (*ca[:2], *cb[:2])):
        significant = not overlap(ca[:2], cb[:2])
    setups = [
        {
            "label": c.label,
            "overrides": list(c.overrides),
            "state": _state(c, winner, runner),
            "pruned": c.pruned,
            "peak_gib": c.peak_gib,
            "prior": c.prior,
            "predicted": c.predicted,
            "source": c.source,
            "measured": c.measured,
            "error": _error(c.predicted, c),
            "held_out": c.held_out,
            "held_out_error": _error(c.held_out, c),
            "values": [_finite(v) for v in c.values],
            "steps": [_finite(v) for v in c.steps],
            "gpu_s": c.gpu_s,
            "runs": c.runs,
            "failed": c.failed,
            "unmeasured": c.unmeasured if not c.values and not c.pruned else None,
            "held_out_blank": c.held_out_blank if c.values and c.held_out is None else None,
            "predicted_blank": predicted_reason(c.source) if c.values and c.predicted is None else None,
        }
        for c in candidates
    ]
    command = None
    if winner:
        from flopsweep.shown_overrides import typed_back

        kept = [typed_back(o) for o in winner.overrides if override_key(o) not in SWEEP_ONLY_KEYS]
        command = " ".join([COMMAND, *(shlex.quote(o) for o in kept)])
    return nulled(
        {
            "objective": objective,
            "direction": direction,
            "budget_gpu_s": budget.limit_s,
            "spent_gpu_s": budget.spent_s,
            "time_unit": budget.unit,  # GPU-s, or rank-s on the CPU: the lines' unit of the two
            "stopped": stopped,
            "rounds": rounds,
            **picks,
            "significant": significant,
            "command": command,
            "setups": setups,
        }
    )


def _num(x: Any) -> str:
    return "" if x is None else f"{figure(x, 4)}"


def _pct(x: Any) -> str:
    return "" if x is None else f"{x:+.1%}"


def _picked(name: str, pick: dict[str, Any] | None, objective: str) -> str:
    if pick is None:
        return f"{name}: none"
    if pick["ci_low"] is not None and pick["ci_high"] is not None:
        ci = f" [{figure(pick['ci_low'], 4)}, {figure(pick['ci_high'], 4)}] (95%, over {pick['ci_over']})"
    else:  # one run of a figure with no steps, or steps too few: no interval, never a made-up or inf end
        ci = " (one run, no interval)" if pick["runs"] == 1 else " (no interval)"

    shown = pick["label"] or "(the one set-up)"
    return f"{name}: {shown}: {objective} {figure(pick['value'], 4)}{ci}, {pick['runs']} run(s)"


def verdict(s: dict[str, Any]) -> str:
    """Whether the winner and the runner-up differ significantly, in one line."""
    if s["runner_up"] is None:
        return "no runner-up: nothing to compare the winner with"
    if s["significant"] is None:
        return "whether they differ is unknown: one of them has no interval"
    if s["significant"]:
        return "significant: their 95% intervals do not overlap"
    return "not significant: their 95% intervals overlap (measure with more repeats= to tell them apart)"


def runner_up_note(s: dict[str, Any]) -> str | None:
    """One line when the runner-up measured better than the winner (higher under ``maximize``, lower under
    ``minimize``), else None: the winner is the best of the last round (docs/tuning.md), and a runner-up
    from outside that round (dropped earlier, or from a resumed sweep's rounds) may have measured better
    over fewer runs. Was said without a word (session 37)."""
    win, run = s.get("winner"), s.get("runner_up")
    if not win or not run or win.get("value") is None or run.get("value") is None:
        return None
    higher = s["direction"] == "maximize"
    if not (run["value"] > win["value"] if higher else run["value"] < win["value"]):
        return None
    return (
        f"the runner-up measured {'higher' if higher else 'lower'} ({figure(run['value'], 4)} against "
        f"{figure(win['value'], 4)}, {run['runs']} run(s) against {win['runs']}); the winner is the "
        f"best of the "
        "last round's set-ups, which the runner-up was not in"
    )


TABLE_HEAD = ("set-up", "predicted", "error", "held-out", "error", "measured", "runs", "GPU-s", "state")
"""The table's columns; its device-time column is named in the tuning's unit (:func:`table_head`)."""


def unit_of(s: dict[str, Any]) -> str:
    """The summary's unit of device time: ``GPU-s``, or ``rank-s`` for a tuning on the CPU
    (:data:`flopsweep.tune.RANK_SECONDS`); ``GPU-s`` for a summary written before it was kept."""
    return str(s.get("time_unit") or "GPU-s")


def table_head(s: dict[str, Any]) -> tuple[str, ...]:
    """:data:`TABLE_HEAD` with its device-time column in :func:`unit_of` (``rank-s`` on the CPU)."""
    return tuple(unit_of(s) if h == "GPU-s" else h for h in TABLE_HEAD)


def table_rows(s: dict[str, Any]) -> list[tuple[str, ...]]:
    """Predicted against measured, one row per set-up that ran, best measured first."""
    return [
        (
            u["label"] or "(the one set-up)",
            _num(u["predicted"]),
            _pct(u["error"]),
            _num(u["held_out"]),
            _pct(u["held_out_error"]),
            _num(u["measured"]),
            str(len(u["values"])),
            f"{sum(u['gpu_s']):.0f}",
            u["state"] if not u["failed"] else f"failed ({u['failed'][:80]})",
        )
        for u in _ran(s)
    ]


def _ran(s: dict[str, Any]) -> list[dict[str, Any]]:
    """The set-ups that ran, best measured first (the table's order)."""
    sign = -1 if s["direction"] == "maximize" else 1
    ran = [u for u in s["setups"] if u["values"]]
    return sorted(ran, key=lambda u: (u["measured"] is None, sign * (u["measured"] or 0.0)))


def _aligned(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]
    ]


def lines(s: dict[str, Any]) -> list[str]:
    """The report for the terminal."""
    out = [f"flopsweep tune: {s['objective']} ({s['direction']}); stopped: {s['stopped']}"]
    out += [
        _picked("winner", s["winner"], s["objective"]),
        _picked("runner-up", s["runner_up"], s["objective"]),
    ]
    out.append(f"winner against runner-up: {verdict(s)}")
    if note := runner_up_note(s):
        out.append(note)
    out.append("predicted against measured (every set-up it ran):")
    out += ["  " + line for line in _aligned(table_head(s), table_rows(s))]
    out += [f"  {line}" for line in [*predicted_lines(s), *held_out_lines(s)]]
    pruned = [u for u in s["setups"] if u["pruned"]]
    if pruned:
        out.append(f"pruned (never run): {len(pruned)}")
        out += [f"  {u['label'] or '(the one set-up)'}: {u['pruned']}" for u in pruned]
    if never := unmeasured(s):
        out.append(f"never measured (kept by the rules, not run): {len(never)}")
        out += [f"  {u['label'] or '(the one set-up)'}: {u['unmeasured']}" for u in never]
    out.append(gpu_time_line(s))
    out.append(f"run the winner: {s['command']}" if s["command"] else "no set-up ran ok: no winner")
    return out


def unmeasured(s: dict[str, Any]) -> list[dict[str, Any]]:
    """The set-ups the rules kept that never ran, each with why (``unmeasured``: not among the best
    ``initial`` predicted for round 0 and not a challenger after it, or a challenger the tuner stopped before:
    :func:`flopsweep.tune.unmeasured_reason`); was: named nowhere in the report, though counted in its
    first line (session 39)."""
    return [u for u in s["setups"] if not u["values"] and not u["pruned"]]


def predicted_lines(s: dict[str, Any]) -> list[str]:
    """Why the table's ``predicted`` cells are blank (``predicted_blank``,
    :func:`flopsweep.tune.predicted_reason`): one line where every blank has the same why (every CPU run of
    round 0: no GEMM rate, no datasheet), else one per set-up, in the table's order; was: blank cells
    unexplained (session 40)."""
    blank = [u for u in _ran(s) if u["predicted"] is None]
    whys = [u.get("predicted_blank") or "no prediction was made" for u in blank]
    if len(blank) > 1 and len(set(whys)) == 1:
        every = "all " if len(blank) == len(_ran(s)) else ""
        return [f"predicted blank for {every}{len(blank)} set-ups: {whys[0]}"]
    return [
        f"predicted blank for {u['label'] or '(the one set-up)'}: {why}"
        for u, why in zip(blank, whys, strict=True)
    ]


def held_out_lines(s: dict[str, Any]) -> list[str]:
    """One line per set-up of the table whose ``held-out`` cell is blank, saying why (``held_out_blank``:
    :func:`flopsweep.tune.held_out_reason`), in the table's order; was: a blank cell unexplained."""
    blank = [u for u in _ran(s) if u["held_out"] is None]
    why = "no held-out prediction was made"
    return [
        f"held-out blank for {u['label'] or '(the one set-up)'}: {u['held_out_blank'] or why}" for u in blank
    ]


def gpu_time_line(s: dict[str, Any]) -> str:
    """``GPU time: 26 of 3600 GPU-s``: the GPU-seconds spent and the budget, whole; a budget under 1 GPU-s
    (``hydra.sweeper.budget_gpu_s=0.001``, which round 0 passes: it always runs) keeps 3 significant
    digits, so it never reads as 0 (:func:`flopsweep.tune.gpu_seconds_text`, as the progress lines). Spent
    past the budget, it says by how much (``GPU time: 61 of 60 GPU-s, over the budget by 1 GPU-s``)."""
    unit = unit_of(s)  # on the CPU: "Rank time: 1920 of 3600 rank-s" (was "GPU time ... GPU-s")
    what = "GPU time" if unit == "GPU-s" else "Rank time"
    line = f"{what}: {gpu_seconds_text(s['spent_gpu_s'])} of {gpu_seconds_text(s['budget_gpu_s'])} {unit}"
    spent, budget = s["spent_gpu_s"], s["budget_gpu_s"]
    over = spent - budget if isinstance(spent, int | float) and isinstance(budget, int | float) else 0
    # session 37: "61 of 60 GPU-s" was said without a word
    return line + (f", over the budget by {gpu_seconds_text(over)} {unit}" if over > 0 else "")


def markdown(s: dict[str, Any]) -> str:
    """The report as markdown (``tune.md``)."""

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = ["# Tuning", "", f"Objective `{s['objective']}` ({s['direction']}); stopped: {s['stopped']}.", ""]
    out += [f"- {_picked('Winner', s['winner'], s['objective'])}"]
    out += [f"- {_picked('Runner-up', s['runner_up'], s['objective'])}", f"- {verdict(s)}"]
    out += [f"- {note}" for note in [runner_up_note(s)] if note]
    out += [f"- {gpu_time_line(s)}", ""]
    if s["command"]:
        out += ["Run the winner:", "", "```", s["command"], "```", ""]
    out += ["## Predicted against measured", "", row(table_head(s)), row(["---"] * len(TABLE_HEAD))]
    out += [row(r) for r in table_rows(s)]
    notes = [*predicted_lines(s), *held_out_lines(s)]
    out += ["", *(f"- {line}" for line in notes)] if notes else []
    out += ["", "## Rounds", "", row(("round", "set-ups", "repeats", "jobs", f"{unit_of(s)} after"))]
    out += [row(["---"] * 5)]
    out += [
        row((str(r["round"]), str(r["pool"]), str(r["repeats"]), str(r["jobs"]), f"{r['spent_gpu_s']:.0f}"))
        for r in s["rounds"]
    ]
    pruned = [u for u in s["setups"] if u["pruned"]]
    if pruned:
        out += ["", "## Pruned", "", row(("set-up", "why")), row(("---", "---"))]
        out += [row((u["label"], u["pruned"])) for u in pruned]
    if never := unmeasured(s):
        out += ["", "## Never measured", "", row(("set-up", "why")), row(("---", "---"))]
        out += [row((u["label"] or "(the one set-up)", u["unmeasured"] or "")) for u in never]
    return "\n".join(out) + "\n"
