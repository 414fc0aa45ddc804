"""The tuner's decisions (``hydra/sweeper=tune``, :mod:`hydra_plugins.flopsweep_tune`): how the
set-ups rank by prediction and by measurement, the successive-halving schedule, and the GPU-time
budget. Which set-ups are pruned and what they predict is the plan's judge's
(:func:`flopsweep.plan_assess.assess`), not this module's. Torch-free and free of Hydra: the
sweeper composes, launches and reads records; this module decides (tests/unit/test_tune.py checks
it without processes).

Successive halving (Jamieson and Talwalkar 2016, "Non-stochastic best arm identification and
hyperparameter optimization"; Li et al. 2018, Hyperband) with measurements as the resource: round 0
measures ``initial`` set-ups once; after each round the best ``1/eta`` of the pool (by the figure of its
measured objective, :attr:`Candidate.measured`, at least ``finalists``) stay, and round ``r`` brings
each survivor up to ``min(eta**r, max_repeats)`` measurements, the last round (``finalists`` or fewer
left) up to ``max_repeats``. A set-up whose run is not ``ok`` leaves the pool at once. Units: seconds of
device time (GPU-seconds; on the CPU, rank-seconds), bytes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flopsweep.text import figure, plural

DEFAULT_REPEATS = 3
"""The measurements a finalist gets when ``repeats=`` is left at 1 (an interval needs two)."""

MIN_HEADROOM = 0.0
"""``space.min_headroom`` of a tuning sweep that does not set it: the tuner prunes only a set-up whose
memory estimate is over the memory itself, where the plan (which runs nothing) keeps 10% free. The
tuner measures: a set-up estimated near the edge that runs out of memory leaves at once as ``oom``,
and one that retries the allocator loses on its own figures, while a 10% margin had dropped the
fastest set-up of session 28's Llama 3.1 8B grid on one H200 (`single`, no checkpointing, micro
batch 3: estimated 135 GiB, 96% of 140.4; it ran at 133.4 GiB allocated, no retry, 506 model
TFLOP/s against the 464 of the tuner's winner without it). ``space.min_headroom=`` given (on the
command line, in ``hydra.sweeper.params`` or a sweep file at another value than 0.1) is kept."""


@dataclass(eq=False)
class Candidate:
    """One set-up of the space: its overrides and what the tuner learned of it (compared by
    identity: two set-ups are never the same one)."""

    index: int
    """Its place in the space, as Hydra's basic sweeper would order it (0-based)."""
    overrides: tuple[str, ...]
    """Every override of its jobs (``key=value``), the fixed ones included."""
    label: str
    """The swept overrides only, ``backend=fsdp parallel.tp=2``: what tells it from the others."""
    setup: Any = None
    """Its :class:`flopsweep.space.Setup` when the space came from ``space.*``, else None."""
    pruned: str | None = None
    """Why it is never run (refused by the rules, over the memory budget), else None."""
    peak_gib: float | None = None
    """The memory estimate's peak per rank (GiB, :func:`flopsweep.memory.peak_bytes`)."""
    predicted: float | None = None
    """The objective predicted before it was measured (the prior, or the refit in force when a
    later round picked it); None without a prediction."""
    prior: float | None = None
    """The objective predicted before anything was measured."""
    source: str = ""
    """The prediction's source (``metrics.predicted.source``), or why there is none."""
    objective: str = ""
    """The ``objective=`` its :attr:`values` are of (``tokens_per_s``): what :attr:`pooled` makes of
    them (``""``: the mean of its runs, as any figure that is no rate or step cost)."""
    values: list[float] = field(default_factory=list)
    """The measured objective of each of its runs (NaN for a run that is not ok)."""
    steps: list[float] = field(default_factory=list)
    """Each run's mean step time (s, ``metrics.iteration_time_s.mean``; NaN for a run that is not ok),
    in the order of :attr:`values`: a rate or a step cost follows from their mean."""
    gpu_s: list[float] = field(default_factory=list)
    """Each run's device time: wall seconds x world size (:func:`run_gpu_seconds`)."""
    step_times: list[float] = field(default_factory=list)
    """The measured step times (s) of its last ok run: the interval over steps of one run."""
    runs: list[str] = field(default_factory=list)
    """Each run's job folder."""
    held_out: float | None = None
    """The objective predicted from the other set-ups' runs alone (none of its own): how far the
    refitted prediction is off for a set-up it has not seen."""
    failed: str | None = None
    """``STATUS: message`` of a run that was not ok: it left the pool."""
    dropped_after: int | None = None
    """The round after which successive halving dropped it."""
    unmeasured: str | None = None
    """Why a set-up the rules kept (not :attr:`pruned`) never ran (:func:`unmeasured_reason`,
    :func:`stopped_before_reason`), for the report; None once it ran."""
    held_out_blank: str | None = None
    """Why :attr:`held_out` is None for a set-up that ran (:func:`held_out_reason`), else None."""

    @property
    def pooled(self) -> Any:
        """Its figure and 95% interval over its ok runs (:class:`analysis.spread.Pooled`), None before
        one: :func:`analysis.spread.pooled_figure` of :attr:`objective` over its :attr:`values` and
        :attr:`steps`, the function a pooled ``repeats=`` row of the analysis takes its figure from, so
        that ``tune.json`` and the analysis table show the same figure for the same records."""
        from analysis.spread import pooled_figure

        return pooled_figure(self.objective, self.values, self.steps)

    @property
    def measured(self) -> float | None:
        """Its figure over its ok runs (:attr:`pooled`; for a rate ``work / mean step``, for a step time
        the mean): what it ranks by. None before an ok run."""
        got = self.pooled
        return None if got is None else got.value


def better(a: float, b: float, direction: str) -> bool:
    """Whether ``a`` beats ``b`` for an objective that is ``maximize``d or ``minimize``d."""
    return a > b if direction == "maximize" else a < b


def _order(value: float | None, direction: str) -> float:
    """A sort key that puts the best value first and unknown values last."""
    if value is None or not math.isfinite(value):
        return math.inf
    return -value if direction == "maximize" else value


def ranked(candidates: Sequence[Candidate], direction: str, *, by: str = "measured") -> list[Candidate]:
    """``candidates`` best first by their measured figure (``by="measured"``, :attr:`Candidate.measured`)
    or their prediction (``by="predicted"``); unknown values last, ties in the order given (a stable sort)."""
    if by == "measured":
        return sorted(candidates, key=lambda c: _order(c.measured, direction))
    return sorted(candidates, key=lambda c: _order(c.predicted, direction))


def keep_count(pool: int, eta: int, finalists: int) -> int:
    """How many of a pool of ``pool`` survive a cut: ``ceil(pool / eta)``, at least ``finalists``
    (never more than ``pool``)."""
    return min(pool, max(finalists, math.ceil(pool / eta)))


def target_repeats(round_: int, pool: int, *, eta: int, finalists: int, max_repeats: int) -> int:
    """The measurements each set-up of round ``round_`` (0-based) reaches: ``min(eta**round_,
    max_repeats)``, and ``max_repeats`` once the pool is down to ``finalists`` after round 0."""
    if round_ > 0 and pool <= finalists:
        return max_repeats
    return min(eta**round_, max_repeats)


def schedule(initial: int, *, eta: int, finalists: int, max_repeats: int) -> list[tuple[int, int]]:
    """The rounds of a halving that loses no set-up to a failure: ``(pool, repeats)`` per round,
    e.g. ``schedule(8, eta=2, finalists=2, max_repeats=3)`` -> ``[(8, 1), (4, 2), (2, 3)]``. It ends
    when the finalists reach ``max_repeats`` (a round that would add no run is not listed)."""
    rounds = [(initial, 1)]
    pool, reps = initial, 1
    while not (pool <= finalists and reps >= max_repeats):
        pool = keep_count(pool, eta, finalists)
        new = target_repeats(len(rounds), pool, eta=eta, finalists=finalists, max_repeats=max_repeats)
        if new <= reps and pool == rounds[-1][0]:
            break
        reps = max(reps, new)
        rounds.append((pool, reps))
    return rounds


MAX_PLANNED_ROUNDS = 64
"""A guard of :func:`planned_jobs` (the tuner's ``MAX_ROUNDS``): no plan counts more rounds."""


def planned_jobs(
    runs: Sequence[int], round_: int, *, eta: int, finalists: int, max_repeats: int
) -> tuple[int, int]:
    """``(jobs, rounds)`` still to run from round ``round_`` (0-based) on, for a pool whose set-ups
    have ``runs`` measurements each, if no run fails and no challenger joins: each round brings every
    set-up up to :func:`target_repeats`, then :func:`cut` keeps :func:`keep_count` of them (those
    with the most runs counted first), until the finalists reach ``max_repeats``, as
    ``Tuning.run`` goes. The tuner's progress lines give it as their total (``3 of 7 jobs done``,
    ``round 0 (1/2)``); a failure, a challenger or the budget changes it at the next round.
    ``planned_jobs([0] * 8, 0, eta=2, finalists=2, max_repeats=3)`` is ``(14, 3)``
    (:func:`schedule`'s ``8 x 1, 4 x 2, 2 x 3``: 8 first runs, 4 second, 2 third)."""
    counts = sorted(runs, reverse=True)
    jobs = rounds = 0
    r = round_
    while counts and rounds < MAX_PLANNED_ROUNDS:
        target = target_repeats(r, len(counts), eta=eta, finalists=finalists, max_repeats=max_repeats)
        added = sum(max(0, target - c) for c in counts)
        if added == 0 and len(counts) <= finalists and all(c >= max_repeats for c in counts):
            break  # the finalists are measured: no round left
        jobs, rounds = jobs + added, rounds + 1
        counts = [max(c, target) for c in counts][: keep_count(len(counts), eta, finalists)]
        if len(counts) <= finalists and all(c >= max_repeats for c in counts):
            break
        r += 1
    return jobs, max(rounds, 1)


def round_line(
    round_: int, rounds: int, *, pool: int, target: int, jobs: int, first_job: int, total: int, spent: str
) -> str:
    """The tuner's line at the start of round ``round_`` (0-based, as ``tune.json`` and the report
    number them), saying of how many: ``round 0 (1/2): 3 set-ups left, 1 run(s) each, jobs 0-2 (7 in all);
    0/600 GPU-s spent``. ``rounds``: the rounds planned in all, this one and those before it counted;
    ``first_job``: Hydra's number (``hydra.job.num``, from 0: the job's folder and its progress line's
    ``(job N)``) of the round's first job; ``total``: the jobs of the sweep if no run fails (those launched
    so far plus :func:`planned_jobs`); ``spent``: :meth:`Budget.line`."""
    last = first_job + jobs - 1
    span = f"job {first_job}" if jobs == 1 else f"jobs {first_job}-{last}" if jobs else "no job to run"
    span += f" ({total} in all)"
    return (
        f"round {round_} ({round_ + 1}/{rounds}): {pool} set-ups left, {target} run(s) each, {span}; {spent}"
    )


def budget_stop(
    round_: int,
    *,
    pool: int,
    target: int,
    challengers: int,
    jobs: int,
    cost: float,
    left: float,
    unit: str = "GPU-s",
) -> str:
    """Why the budget stops the tuning before round ``round_`` (``tune.json``'s ``stopped``), its round
    counted as the schedule line counts (``POOL x RUNS run(s)``): ``budget: round 1 (12 x 2 run(s), 8 of
    them challengers: 20 jobs) would cost about 536 GPU-s, none left (the rounds so far ran 16 over it)``.
    ``challengers``: the set-ups that joined after the round before (their first runs are jobs too, which
    the schedule, planned without them, did not count: it said ``4 x 2`` where the line said ``20 jobs``);
    ``cost``: GPU-seconds (:meth:`Budget.estimate`); ``left``: GPU-seconds left (below 0: overspent)."""
    joined = f", {challengers} of them challengers" if challengers else ""
    over = f"none left (the rounds so far ran {gpu_seconds_text(-left)} over it)"
    spent = f"{gpu_seconds_text(left)} left" if left >= 0 else over
    return (
        f"budget: round {round_} ({pool} x {target} run(s){joined}: {plural(jobs, 'job')}) would cost about "
        f"{cost:.0f} {unit}, {spent}"
    )


def cut(pool: Sequence[Candidate], direction: str, *, eta: int, finalists: int) -> list[Candidate]:
    """The survivors of a round: the ok set-ups of ``pool`` best first, the best
    :func:`keep_count` of them."""
    alive = [c for c in pool if c.failed is None and c.measured is not None]
    return ranked(alive, direction)[: keep_count(len(alive), eta, finalists)]


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def run_gpu_seconds(record: dict[str, Any]) -> float:
    """The device time a run held: ``(run.finished_at - run.started_at)`` in seconds, times
    ``system.world_size`` (GPUs, or CPU ranks); 0 when the record lacks either (a run refused
    before it launched holds no device)."""
    run, system = record.get("run"), record.get("system")
    run, system = run if isinstance(run, dict) else {}, system if isinstance(system, dict) else {}
    start, end = _time(run.get("started_at")), _time(run.get("finished_at"))
    world = system.get("world_size")
    if start is None or end is None or not isinstance(world, int) or isinstance(world, bool):
        return 0.0
    return max(0.0, (end - start).total_seconds()) * world


def gpu_seconds_text(value: float) -> str:
    """GPU-seconds as the tuner's lines show them: whole (``26``), but a value under 1 GPU-s keeps 3
    significant digits (:func:`flopsweep.text.figure`: ``1e-300``, ``0.001``), so a budget of
    ``hydra.sweeper.budget_gpu_s=0.001`` never reads as 0."""
    return f"{value:.0f}" if abs(value) >= 1 or value == 0 else figure(value)


GPU_SECONDS, RANK_SECONDS = "GPU-s", "rank-s"
"""The units the tuner's lines give device time in: GPU-seconds, or on the CPU rank-seconds (a CPU rank holds
no GPU: ``GPU time: 1920 of 3600 GPU-s`` was said of a CPU-only tuning). Its keys keep their names
(``budget_gpu_s``, ``spent_gpu_s``: one unit of device time each, ../shared/DESIGN.md)."""


def time_unit(device: str, gpus_here: bool) -> str:
    """:data:`RANK_SECONDS` for ``device=cpu``, or ``auto`` where no GPU is here; else :data:`GPU_SECONDS`."""
    return RANK_SECONDS if device == "cpu" or (device == "auto" and not gpus_here) else GPU_SECONDS


def record_time_unit(record: dict[str, Any]) -> str | None:
    """The unit of a record's device time: :data:`RANK_SECONDS` where its ``system.device_name`` is
    ``cpu``, :data:`GPU_SECONDS` where it names a GPU, None where it names none."""
    system = record.get("system")
    name = system.get("device_name") if isinstance(system, dict) else None
    if not isinstance(name, str) or not name:
        return None
    return RANK_SECONDS if name == "cpu" else GPU_SECONDS


@dataclass
class Budget:
    """The device-time budget: ``limit_s`` device-seconds, ``spent_s`` so far (every run's
    :func:`run_gpu_seconds`), said in ``unit`` (:data:`GPU_SECONDS`, or :data:`RANK_SECONDS` on the CPU)."""

    limit_s: float
    spent_s: float = 0.0
    unit: str = GPU_SECONDS

    def estimate(self, jobs: Sequence[Candidate], measured: Sequence[Candidate] = ()) -> float:
        """What running one more job of each of ``jobs`` would cost: each set-up's mean device time
        so far, else the mean over every run of ``jobs`` and ``measured`` (0 before any)."""
        every = [s for c in (*jobs, *measured) for s in c.gpu_s]
        fallback = statistics.fmean(every) if every else 0.0
        return sum(statistics.fmean(c.gpu_s) if c.gpu_s else fallback for c in jobs)

    def allows(self, cost: float) -> bool:
        """Whether ``cost`` more GPU-seconds stay within the limit."""
        return self.spent_s + cost <= self.limit_s

    def line(self) -> str:
        """``312/2000 GPU-s spent``; a budget under 1 GPU-s as :func:`gpu_seconds_text` (``0/1e-300``)."""
        return f"{gpu_seconds_text(self.spent_s)}/{gpu_seconds_text(self.limit_s)} {self.unit} spent"


def round_jobs(pool: Sequence[Candidate], target: int) -> list[tuple[Candidate, int]]:
    """The jobs of a round: ``(set-up, repeat index)`` for each measurement a set-up of ``pool`` lacks
    to reach ``target`` runs, round-robin (A B C A B C: drift spreads over the set-ups)."""
    out = []
    for k in range(min((len(c.values) for c in pool), default=target), target):
        out += [(c, k) for c in pool if len(c.values) <= k]
    return out


def edge_lines(pool: Sequence[Candidate]) -> list[str]:
    """One line per set-up of ``pool`` (ranked by prediction, best first) at the memory edge (its
    :attr:`Candidate.source` has :data:`flopsweep.memory_edge.EDGE_WORDS`): its predicted step counts no
    allocator retry, so its prediction may be optimistic; the first one's line says when it is ranked
    first. ``[]`` when none is."""
    from flopsweep.memory_edge import EDGE_WORDS

    out = []
    for place, c in enumerate(pool, 1):
        if EDGE_WORDS in c.source:
            name = c.label or "(the one set-up)"
            first = "ranked first by a prediction" if place == 1 else f"ranked {place} by a prediction"
            out.append(
                f"{name}: {first} that counts no allocator retry, {EDGE_WORDS} (its estimate leaves little "
                "of the GPU's memory): its measured step decides"
            )
    return out


def challengers(
    unmeasured: Sequence[Candidate], survivors: Sequence[Candidate], direction: str, limit: int
) -> list[Candidate]:
    """Set-ups never measured whose refitted prediction beats the worst survivor's measured figure:
    at most ``limit``, best predicted first (they join the next round, measured once)."""
    if not survivors or limit <= 0:
        return []
    line = survivors[-1].measured
    if line is None:
        return []
    beat = [c for c in unmeasured if c.predicted is not None and better(c.predicted, line, direction)]
    return ranked(beat, direction, by="predicted")[:limit]


def unmeasured_reason(c: Candidate, survivors: Sequence[Candidate], *, initial: int, direction: str) -> str:
    """Why ``c``, kept by the rules, was not measured in round 0 nor joined after it as a challenger
    (:func:`challengers`), one clause for the report: round 0 measures the best ``initial`` by the prior
    prediction (:attr:`Candidate.prior`; unknown ones last, in the space's order), and after it a set-up
    joins only where the refit (:attr:`Candidate.predicted`) beats the worst of ``survivors``."""
    before = (
        f"prior prediction {figure(c.prior, 4)}"
        if c.prior is not None
        else "no prior prediction: the space's order"
    )
    first = f"not among the {initial} best predicted that round 0 measured ({before})"
    line = survivors[-1].measured if survivors else None
    if line is None:
        return f"{first}; no set-up survived round 0 to be beaten"
    worst = f"the worst survivor ({figure(line, 4)})"
    if c.predicted is None:
        return f"{first}; the refit after it predicts none, so it cannot beat {worst}"
    refit = f"{first}; the refit after it predicts {figure(c.predicted, 4)}"
    if better(c.predicted, line, direction):  # challengers() takes at most `initial`, best predicted first
        return f"{refit}, past {worst}, but {initial} challengers predicted better took the places"
    return f"{refit}, short of {worst}"


def stopped_before_reason(stopped: str) -> str:
    """Why a challenger that joined after round 0 never ran: the tuner stopped first (``stopped``, its
    reason: the budget, no set-up left)."""
    return f"joined after round 0 as a challenger, but the tuner stopped before its round: {stopped}"


def predicted_reason(source: str) -> str:
    """Why a set-up that ran has no ``predicted`` figure: none was made before round 0 picked it (``source``:
    the judged row's reason, ``no prediction: uncalibrated, and no GEMM rate is known ...`` on the CPU, its
    own fix left out: a footnote, not a refusal), so round 0 took it in the space's order; was a blank cell
    unexplained (session 40)."""
    why = source.removeprefix("no prediction: ").split(". Fix: ")[0].rstrip(".") or "none was made"
    return f"no prediction before round 0 ({why}): round 0 measured in the space's order"


def held_out_reason(status: str, reason: str, objective: str) -> str:
    """Why a set-up that ran has no held-out prediction (:attr:`Candidate.held_out_blank`): the prediction
    from the other set-ups' runs alone gave none (``status`` and ``reason``: the judged row's,
    :func:`flopsweep.plan_assess.predict`), or gave no figure of ``objective`` (``hfu``)."""
    if status == "ok":
        return f"the prediction from the other set-ups' runs gives no {objective}"
    return f"no prediction from the other set-ups' runs alone: {reason or status}"


def one_setup_problem(found: Sequence[Candidate]) -> str | None:
    """The one line (exit 2) refusing a tuning with one set-up to measure, else None: its sweep axes and
    ``space.*`` lists give one (``'space.micro_batches=[1]' 'space.backends=[single]'
    'space.checkpointing=[none]'`` on one rank: its one set-up ran 3 times and was named the winner, exit 0),
    or the pruning left one of several (session 43: ``runner-up: none``; a cap that leaves one is
    :func:`capped_problem`'s, checked first). The fix's example is a ``space.*`` list where the space came
    from them (a sweep axis over a key of the space is refused beside them), else a sweep axis."""
    alive = [c for c in found if c.pruned is None]
    if len(found) != 1 and len(alive) != 1:
        return None
    one = found[0] if len(found) == 1 else alive[0]
    more = "space.micro_batches=[1,2,4]" if one.setup is not None else "backend=ddp,fsdp"
    said = f" ({one.label})" if one.label else ""
    if len(found) == 1:
        why = "the sweep axes and space.* lists give no other"
        head = f"one set-up{said}, nothing to tune"
    else:
        pruned = [str(c.pruned) for c in found if c.pruned is not None]
        why = f"the other {len(pruned)} pruned: {pruned[0].split(': ')[0]}" + (
            "" if len(pruned) == 1 else ", ..."
        )
        head = f"one set-up{said} left of {len(found)}, nothing to tune"
    return (
        f"Invalid config: hydra/sweeper=tune: {head} ({why}). Fix: list more values, e.g. {more}, or run it "
        "plainly (repeats=3 for an interval)."
    )


KEPT_BY_CAP = 2
"""The set-ups a ``hydra.sweeper.memory_gib`` fix keeps at least: one set-up is nothing to tune
(:func:`one_setup_problem`)."""


def capped_problem(found: Sequence[Candidate], memory_gib: float | None, min_headroom: float) -> str | None:
    """The line a tuning is refused with, exit 2, where ``hydra.sweeper.memory_gib`` leaves fewer than
    :data:`KEPT_BY_CAP` set-ups and a higher cap would keep that many: the user's cap fits nothing
    (``memory_gib=1e-9`` had printed 36 ``pruned`` lines, ``9.31e-10 GiB``, exit 1) or one set-up (its fix
    ``0.0088`` had pruned 3 of 4 and the tuner ran the one left 3 times, ``runner-up: none``, session 43).
    None where the cap is unset, the space has one set-up, two are kept, or other reasons prune so many that
    no cap keeps two.

    Args:
        found: the judged set-ups (:attr:`Candidate.pruned` ``over memory: ...``, :attr:`Candidate.peak_gib`
            their estimated peak per rank, GiB).
        memory_gib: the cap per rank (GiB) as Hydra read it.
        min_headroom: the share of the cap a set-up must leave free, in [0, 1).

    Returns:
        ``Invalid config: hydra.sweeper.memory_gib=1e-09: fits no set-up (the least two, <label> and
        <label>, are estimated at 0.00874 and 0.0105 GiB per rank; space.min_headroom=0). Fix: set
        hydra.sweeper.memory_gib=0.011 (keeps 3 set-ups), or leave it unset (the device's memory).``, or
        ``fits one set-up (<label>), nothing to tune (the next, <label>, is estimated at ...)``: the fix is
        the estimate of the set-up that makes two over ``1 - min_headroom``, rounded up at two digits; the
        count it keeps is every set-up under it (two or more: set-ups estimated alike all fit it).
    """
    from flopsweep.config import ConfigError, typed_form

    alive = [c for c in found if c.pruned is None]
    if memory_gib is None or len(found) < KEPT_BY_CAP or len(alive) >= KEPT_BY_CAP:
        return None
    over = [c for c in found if (c.pruned or "").startswith("over memory") and c.peak_gib is not None]
    short = KEPT_BY_CAP - len(alive)
    if len(over) < short:
        return None
    over.sort(key=lambda c: c.peak_gib)
    need = over[short - 1].peak_gib / (1 - min_headroom)
    step = 10.0 ** (math.floor(math.log10(need)) - 1)
    fix = float(f"{math.ceil(need / step) * step:.2g}")
    fix = fix if fix >= need else float(f"{fix + step:.2g}")
    under = sum(c.peak_gib <= fix * (1 - min_headroom) for c in over)  # set-ups estimated alike all fit
    kept = max(KEPT_BY_CAP, len(alive) + under)
    headroom = f"space.min_headroom={typed_form(min_headroom)}"
    if alive:
        why = (
            f"fits one set-up ({alive[0].label or 'the first'}), nothing to tune (the next, {over[0].label}, "
            f"is estimated at {figure(over[0].peak_gib)} GiB per rank; {headroom})"
        )
    else:
        why = (
            f"fits no set-up (the least two, {over[0].label} and {over[1].label}, are estimated at "
            f"{figure(over[0].peak_gib)} and {figure(over[1].peak_gib)} GiB per rank; {headroom})"
        )
    from flopsweep.shown_overrides import typed_value

    return str(
        ConfigError(
            "hydra.sweeper.memory_gib",
            memory_gib,
            why,
            f"set hydra.sweeper.memory_gib={typed_form(fix)} (keeps {kept} set-ups), or leave it "
            "unset (the device's memory)",
            shown=typed_value("hydra.sweeper.memory_gib", memory_gib),  # 0.000001 as typed, not 1e-6
        )
    )
