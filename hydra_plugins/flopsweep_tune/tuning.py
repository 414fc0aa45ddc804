"""One tuning sweep (:class:`Tuning`): measure in rounds, through the sweeper's launcher, the set-ups
its judge (:class:`hydra_plugins.flopsweep_tune.judging.Judging`) composed and judged; read each job's
record, stop on the budget, print and write the report. The decisions are :mod:`flopsweep.tune`'s;
this module is the Hydra side (launching, reading each job's record). Imported when a tuning sweep
starts, never at Hydra's plugin scan (nothing heavy at the top).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from flopsweep.config import typed_form
from flopsweep.dropped import CAUSE_FIXES, OVER_MEMORY
from flopsweep.one_rank_sweep import sweep_note
from flopsweep.override_parsing import override_key
from flopsweep.plan_space import nothing_line
from flopsweep.signals import raise_held
from flopsweep.space import unplaced
from flopsweep.text import figure, plural, printable
from flopsweep.tune import (
    DEFAULT_REPEATS,
    Budget,
    Candidate,
    budget_stop,
    capped_problem,
    challengers,
    cut,
    edge_lines,
    one_setup_problem,
    planned_jobs,
    ranked,
    record_time_unit,
    round_jobs,
    round_line,
    run_gpu_seconds,
    schedule,
    stopped_before_reason,
    target_repeats,
    time_unit,
    unmeasured_reason,
)
from hydra_plugins.flopsweep_tune.judging import (  # noqa: F401 - importable from here, as docs and tests do
    COMPILE_LEVERS,
    JUDGED_COMBOS,
    Judging,
    candidates,
    label,
    objective_value,
)
from hydra_plugins.flopsweep_tune.no_gpu import no_gpu_line

MAX_ROUNDS = 64
"""A guard: no tuning runs more rounds than this."""

JOB_KEYS = ("repeat", "repeats")
"""Overrides the tuner sets on every job (a user's are replaced)."""


class Tuning(Judging):
    """The state of one tuning sweep: its set-ups and their judgement (:class:`Judging`), budget,
    rounds and next job number."""

    def __init__(
        self,
        sweeper: Any,
        combos: list[list[str]],
        swept: set[str],
        space: Any,
        setups: tuple[list[Any], tuple[int, int]] | None = None,
    ) -> None:
        from flopsweep import objective

        cfg = sweeper.config
        name = str(cfg.get("objective") or objective.DEFAULT)
        super().__init__(sweeper, combos, swept, space, setups, name)
        self.direction = objective.direction(name)
        repeats = int(cfg.get("repeats") or 1)
        self.max_repeats = repeats if repeats > 1 else DEFAULT_REPEATS
        from flopsweep.local_gpus import no_gpu_here

        device = str(cfg.get("device") or "auto")  # rank-seconds on the CPU (a record then says which)
        unit = time_unit(device, gpus_here=device != "auto" or not no_gpu_here())
        self.budget = Budget(float(sweeper.budget_gpu_s), unit=unit)
        self.rounds: list[dict[str, Any]] = []
        self.job_idx = 0

    def say(self, line: str) -> None:
        print(f"flopsweep tune: {line}", flush=True)

    # --- measuring ---

    def launch(self, jobs: list[tuple[Candidate, int]]) -> None:
        """Run ``jobs`` (``(set-up, repeat index)``) through the launcher, in batches of
        ``max_batch_size``, and read each job's record into its set-up."""
        from hydra.core.utils import JobStatus

        batch_size = self.s.max_batch_size or len(jobs) or 1
        for start in range(0, len(jobs), batch_size):
            chunk = jobs[start : start + batch_size]
            batch = [
                [o for o in c.overrides if override_key(o) not in JOB_KEYS]
                + [f"repeats={self.max_repeats}", f"repeat={k}"]
                for c, k in chunk
            ]
            self.s.validate_batch_is_legal(batch)
            results = self.s.launcher.launch(batch, initial_job_idx=self.job_idx)
            raise_held()  # a Ctrl-C held after the batch's last job (flopsweep.signals.between_jobs): now
            for n, ((c, _), ret) in enumerate(zip(chunk, results, strict=True)):
                if ret.status != JobStatus.COMPLETED:
                    _ = ret.return_value  # raises the job's error, as Hydra's basic sweeper does
                self.take(c, self.job_dir(ret, self.job_idx + n))
            self.job_idx += len(batch)

    def job_dir(self, ret: Any, num: int) -> Path:
        try:
            return Path(str(ret.hydra_cfg.hydra.runtime.output_dir))
        except Exception:  # noqa: BLE001 - a launcher that returns no Hydra config
            return self.s.sweep_dir / str(num)

    def take(self, c: Candidate, job_dir: Path) -> None:
        """Add the record in ``job_dir`` to ``c``: its objective, mean step, device time and step times; a
        run that is not ok (or has no record), or an ok record failing the analysis' checks
        (:func:`flopsweep.plausible.usable_problems`), marks ``c`` failed: never ranked."""
        from flopsweep import objective
        from flopsweep.plausible import usable_problems
        from flopsweep.record import METRICS_FILE
        from flopsweep.safe_read import RecordError, read_json

        c.runs.append(str(job_dir))
        try:
            record = read_json(job_dir / METRICS_FILE)
        except (RecordError, OSError, ValueError) as exc:
            c.values.append(float("nan"))
            c.steps.append(float("nan"))
            c.gpu_s.append(0.0)
            c.failed = f"no record: {exc}"
            return
        if problems := usable_problems(record):  # an ok record the analysis would not rank
            c.values.append(float("nan"))
            c.steps.append(float("nan"))
            c.gpu_s.append(run_gpu_seconds(record) if isinstance(record, dict) else 0.0)
            self.budget.spent_s += c.gpu_s[-1]
            c.failed = f"{job_dir / METRICS_FILE} fails its checks: {problems[0][:200]}"
            return
        c.values.append(objective.value(record, self.objective))
        c.steps.append(objective.value(record, "iteration_time_s_mean"))  # NaN unless ok
        c.gpu_s.append(run_gpu_seconds(record))
        self.budget.spent_s += c.gpu_s[-1]
        self.budget.unit = record_time_unit(record) or self.budget.unit
        if record.get("status") != "ok":
            message = ((record.get("error") or {}).get("message") or "").splitlines()[:1]
            c.failed = f"{record.get('status')}: {message[0] if message else ''}"
        else:
            steps = ((record.get("metrics") or {}).get("iteration_time_s") or {}).get("values")
            c.step_times = [float(v) for v in steps or [] if isinstance(v, int | float)]

    # --- the rounds ---

    def nothing_left(self) -> None:
        """No set-up is left to measure: each pruned one's line, then one line on stderr with the
        commonest reason (the pruning's, or why the space's layouts are no set-up on this machine;
        :func:`flopsweep.plan_space.nothing_line`, as ``plan=true`` says it), and exit status 1; where
        ``hydra.sweeper.memory_gib`` is what fits none (:func:`flopsweep.tune.capped_problem`), its
        ``Invalid config`` line and exit status 2. One line: no set-up's own ``pruned`` line.

        Raises:
            SystemExit: always, with status 1, or 2 for the cap.
        """
        if capped := capped_problem(self.candidates, self.s.memory_gib, self.space.min_headroom):
            print(f"flopsweep: {printable(capped)}", file=sys.stderr, flush=True)
            raise SystemExit(2)
        unplaced_lines = self.unplaced
        if (
            unplaced_lines
        ):  # their fix's layouts, those this model takes here (session 39: "dp, tp2", tp2 refused)
            from flopsweep.layout_fit import taken_layouts

            takes = taken_layouts(self.space, *self.nodes, self.judges()) or ["dp"]
            unplaced_lines = unplaced(self.space, *self.nodes, takes)
        reasons = [str(c.pruned) for c in self.candidates] + unplaced_lines
        fix = "widen space.* (backends, layouts, micro batches) or the sweep's axes"
        fixes = None
        if self.s.memory_gib is not None:  # the cap the user set comes first
            capped = (
                f"raise hydra.sweeper.memory_gib (now {typed_form(float(self.s.memory_gib))} GiB per rank)"
            )
            fixes = {**CAUSE_FIXES, OVER_MEMORY: f"{capped}, or {CAUSE_FIXES[OVER_MEMORY]}"}
        line = nothing_line(
            reasons, who="tune", headline="no set-up to measure", fix=fix, fixes=fixes, space=self.space
        )
        print(f"flopsweep: {printable(line)}", file=sys.stderr, flush=True)
        raise SystemExit(1)

    def run(self) -> list[Any]:
        """Judge, then measure round after round until the finalists have ``max_repeats`` runs, no
        set-up is left ok, or the budget stops it; print and write the report."""
        from flopsweep import forecast
        from flopsweep.config import ConfigError
        from flopsweep.hydrafiles import write_multirun

        predict = self.s.config.get("predict", {})
        calibration = predict.get("calibration")
        try:
            if calibration or predict.get("measured", True) is False:
                self.prior_records = forecast.calibration_records(str(calibration) if calibration else None)
            else:  # the shipped records (forecast.prediction sets them aside for a CPU run)
                self.prior_records = forecast.shipped_records()
        except ConfigError as exc:  # predict.calibration: a config error, exit 2
            print(f"flopsweep: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        if nowhere := self.placed_nowhere():  # a config error: exit 2, before any job
            print(f"flopsweep: {printable(nowhere)}", file=sys.stderr, flush=True)
            raise SystemExit(2)
        for c in self.candidates:
            self.judge(c)
        alive = [c for c in self.candidates if c.pruned is None]
        if capped := capped_problem(self.candidates, self.s.memory_gib, self.space.min_headroom):
            print(f"flopsweep: {printable(capped)}", file=sys.stderr, flush=True)  # none or one kept by it
            raise SystemExit(2)
        lone = self.candidates[0].pruned or "" if len(self.candidates) == 1 else ""
        if lone.startswith(OVER_MEMORY) and (one := one_setup_problem(self.candidates)):  # no cap makes two
            print(f"flopsweep: {one}", file=sys.stderr, flush=True)
            raise SystemExit(2)
        if not alive and (refused := self.taken_nowhere()):  # a config error: exit 2, before any job
            print(f"flopsweep: {printable(refused)}", file=sys.stderr, flush=True)
            raise SystemExit(2)
        if not alive:
            self.nothing_left()  # before multirun.yaml: nothing ran, no folder is left behind
        if one := one_setup_problem(self.candidates):  # a refused one says why first (nothing_left)
            print(f"flopsweep: {one}", file=sys.stderr, flush=True)
            raise SystemExit(2)  # before multirun.yaml and any job
        if gpu := no_gpu_line(self, alive):  # every set-up a GPU's, none here: once, not job by job
            print(f"flopsweep: {printable(gpu)}", file=sys.stderr, flush=True)
            raise SystemExit(2)  # before multirun.yaml and any job
        if note := sweep_note([list(c.overrides) for c in alive], self.s.config):  # 1 CPU rank each (#970)
            print(note, file=sys.stderr, flush=True)
        write_multirun(self.s.config)
        pruned = len(self.candidates) - len(alive)
        known = sum(c.prior is not None for c in alive)
        self.say(
            f"{len(self.candidates)} set-ups, {pruned} pruned, {len(alive)} left, {known} of them predicted; "
            f"objective {self.objective} ({self.direction}); "
            f"measuring the best {min(self.s.initial, len(alive))}"
        )
        for c in self.candidates:
            if c.pruned:
                self.say(f"pruned {c.label or '(the one set-up)'}: {c.pruned}")
        stopped = "no set-up left after pruning"
        pool = ranked(alive, self.direction, by="predicted")[: self.s.initial]
        for line in edge_lines(pool):  # an optimistic prediction at the memory edge, said
            self.say(line)
        if pool:
            plan = schedule(
                len(pool), eta=self.s.eta, finalists=self.s.finalists, max_repeats=self.max_repeats
            )
            shown = ", ".join(f"{n} x {r}" for n, r in plan)
            jobs, rounds = planned_jobs([len(c.values) for c in pool], 0, **self.halving())
            self.say(
                f"schedule if no run fails: {shown} run(s), {jobs} jobs in {plural(rounds, 'round')}; "
                f"{self.budget.line()}"
            )
        new: list[Candidate] = []  # the challengers that joined the pool after the round before
        for round_ in range(MAX_ROUNDS):
            if not pool:
                break
            target = target_repeats(
                round_, len(pool), eta=self.s.eta, finalists=self.s.finalists, max_repeats=self.max_repeats
            )
            jobs = round_jobs(pool, target)
            cost = self.budget.estimate([c for c, _ in jobs], [c for c in self.candidates if c not in pool])
            if round_ > 0 and jobs and not self.budget.allows(cost):
                left = self.budget.limit_s - self.budget.spent_s
                counts = {"pool": len(pool), "target": target, "challengers": len(new), "jobs": len(jobs)}
                stopped = budget_stop(round_, **counts, cost=cost, left=left, unit=self.budget.unit)
                break
            later, rounds = planned_jobs([len(c.values) for c in pool], round_, **self.halving())
            total = self.job_idx + later  # if no run fails: the progress lines' "3 of 7 jobs"
            self.set_progress_total(total)
            self.say(
                round_line(
                    round_, round_ + rounds, pool=len(pool), target=target, jobs=len(jobs),
                    first_job=self.job_idx, total=total, spent=self.budget.line(),
                )
            )  # fmt: skip
            self.launch(jobs)
            self.rounds.append(
                {"round": round_, "pool": len(pool), "repeats": target, "jobs": len(jobs),
                 "spent_gpu_s": self.budget.spent_s}
            )  # fmt: skip
            self.refit()
            survivors = cut(pool, self.direction, eta=self.s.eta, finalists=self.s.finalists)
            for c in pool:
                if c not in survivors and c.failed is None:
                    c.dropped_after = round_
            new = []
            if round_ == 0:  # the refit may show set-ups never measured beating the survivors
                unmeasured = [c for c in alive if not c.values]
                new = challengers(unmeasured, survivors, self.direction, self.s.initial)
                for c in (c for c in unmeasured if c not in new):  # the report's line for each never measured
                    c.unmeasured = unmeasured_reason(
                        c, survivors, initial=self.s.initial, direction=self.direction
                    )
                for c in new:
                    self.say(f"challenger {c.label}: the refit predicts {figure(c.predicted, 4)}")
            done = all(len(c.values) >= self.max_repeats for c in survivors)
            if not survivors and not new:
                stopped, pool = "no set-up ran ok", []
                break
            if not new and len(survivors) <= self.s.finalists and done:
                stopped, pool = "the finalists are measured", survivors
                break
            pool = survivors + new
        self.say(f"done: {stopped}; {self.budget.line()}")
        for c in alive:  # a challenger the tuner stopped before, or a set-up no round 0 reached
            if not c.values and c.failed is None and c.unmeasured is None:
                c.unmeasured = stopped_before_reason(stopped)
        self.hold_out()
        self.report(stopped, ranked([c for c in pool if c.failed is None], self.direction))
        return []

    def halving(self) -> dict[str, int]:
        """The halving's parameters, as :func:`flopsweep.tune.planned_jobs` takes them."""
        return {"eta": self.s.eta, "finalists": self.s.finalists, "max_repeats": self.max_repeats}

    def set_progress_total(self, total: int) -> None:
        """Give the sweep's progress lines (:class:`flopsweep.callbacks.SweepSummary`, ``3 of 7 jobs
        done (job 2): ok, 0:27 elapsed, about 0:36 left``) the jobs the tuner plans now: those launched and
        :func:`flopsweep.tune.planned_jobs` (a failure, a challenger or the budget changes it at the
        next round). Hydra's callbacks know no total under a sweeper that decides its jobs as it goes."""
        from flopsweep.callbacks import SweepSummary

        for callback in getattr(self.s.hydra_context.callbacks, "callbacks", []):
            if isinstance(callback, SweepSummary):
                callback.total = total

    def report(self, stopped: str, final: list[Candidate]) -> None:
        """Print the report and write ``tune.json`` and ``tune.md`` in the sweep folder (new files
        renamed into place: never through a link)."""
        from flopsweep import tunereport
        from flopsweep.files import atomic_write_json, replace_text

        s = tunereport.summary(
            self.candidates,
            final,
            objective=self.objective,
            direction=self.direction,
            budget=self.budget,
            rounds=self.rounds,
            stopped=stopped,
        )
        for line in tunereport.lines(s):
            print(line, flush=True)
        folder = self.s.sweep_dir
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / tunereport.JSON_FILE, s)
        replace_text(folder / tunereport.MARKDOWN_FILE, tunereport.markdown(s))
        self.say(f"wrote {folder / tunereport.JSON_FILE} and {tunereport.MARKDOWN_FILE}")
