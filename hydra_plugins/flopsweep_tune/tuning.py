"""One tuning sweep (:class:`Tuning`): compose and judge every set-up of the space, then measure in
rounds through the sweeper's launcher. The decisions are :mod:`flopsweep.tune`'s; this module is
the Hydra side (composing, launching, reading each job's record). Imported when a tuning sweep
starts, never at Hydra's plugin scan (nothing heavy at the top).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from flopsweep.dropped import CAUSE_FIXES, OVER_MEMORY
from flopsweep.local_gpus import gpus_here
from flopsweep.plan_space import SETUP_KEYS, nothing_line, unplaced
from flopsweep.signals import raise_held
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
    round_jobs,
    round_line,
    run_gpu_seconds,
    schedule,
    target_repeats,
)

log = logging.getLogger(__name__)

MAX_ROUNDS = 64
"""A guard: no tuning runs more rounds than this."""

JOB_KEYS = ("repeat", "repeats")
"""Overrides the tuner sets on every job (a user's are replaced)."""


def label(overrides: list[str], swept: set[str]) -> str:
    """The swept overrides of a set-up (``backend=fsdp parallel.tp=2``)."""
    return " ".join(o for o in overrides if o.split("=", 1)[0].lstrip("+~") in swept)


def objective_value(row: Any, name: str) -> float | None:
    """The value of ``objective=name`` a judged row predicts (:class:`flopsweep.plan_assess.Row`):
    its :data:`flopsweep.objective.PLANNED` column, as ``plan=true`` ranks by (tokens/s, MFU, TFLOPs
    per GPU, J/token, dollars per million tokens, the step time...); None for an objective no
    prediction gives (``hfu``) or a row without a prediction."""
    from flopsweep import objective

    column = objective.PLANNED.get(name)
    value = getattr(row, column) if column and row.status == "ok" else None
    return float(value) if isinstance(value, int | float) and value == value else None


def candidates(
    combos: list[list[str]], swept: set[str], setups: list[Any] | None, nodes: tuple[int, int]
) -> list[Candidate]:
    """The tuner's set-ups: one per Hydra combination (``setups`` None), or with ``space.*`` given each
    combination (the sweep axes over other keys) crossed with each set-up of the space placed on this
    machine (``nodes``: nnodes, ranks per node; :func:`flopsweep.plan_space.placed`), the set-up's
    overrides last. An eager set-up of ``space.compile=[false,true]`` drops ``compile_mode`` and
    ``compile_scope`` (they apply to the compiled ones; ``compile=false`` refuses them), and is one
    candidate however many values of theirs the sweep gives."""
    if setups is None:
        return [Candidate(i, tuple(c), label(c, swept)) for i, c in enumerate(combos)]
    shown = swept | set(SETUP_KEYS) | {"compile" for s in setups if s.compile is not None}  # space.compile's
    out, seen = [], set()
    for combo in combos:
        rest = [o for o in combo if not o.lstrip("+~").startswith("space.")]  # the jobs need no space.*
        for setup in setups:
            kept = [o for o in rest if o.lstrip("+~").partition("=")[0] not in COMPILE_LEVERS]
            over = (kept if setup.compile is False else rest) + setup.setup_overrides(*nodes)
            if tuple(over) not in seen:
                seen.add(tuple(over))
                out.append(Candidate(len(out), tuple(over), label(over, shown), setup=setup))
    return out


JUDGED_COMBOS = 4
"""The most combinations of a sweep's axes under which :meth:`Tuning.judges` asks the rules for a fix's
layouts (each set-up composed through Hydra, about 0.14 s)."""

COMPILE_LEVERS = ("compile_mode", "compile_scope")
"""The keys that act only with ``compile=true``: an eager set-up's overrides leave them out."""


class Tuning:
    """The state of one tuning sweep: its set-ups, budget, rounds and next job number."""

    def __init__(
        self,
        sweeper: Any,
        combos: list[list[str]],
        swept: set[str],
        space: Any,
        setups: tuple[list[Any], tuple[int, int]] | None = None,
    ) -> None:
        from flopsweep import objective

        self.s = sweeper
        self.space = space
        cfg = sweeper.config
        self.objective = str(cfg.get("objective") or objective.DEFAULT)
        self.direction = objective.direction(self.objective)
        repeats = int(cfg.get("repeats") or 1)
        self.max_repeats = repeats if repeats > 1 else DEFAULT_REPEATS
        placed, nodes = setups or (None, (1, 1))
        self.combos, self.swept, self.nodes = combos, swept, nodes
        self.candidates = candidates(combos, swept, placed, nodes)
        for c in self.candidates:  # its figure is the analysis's for this objective (Candidate.pooled)
            c.objective = self.objective
        self.unplaced = unplaced(space, *nodes) if setups else []
        self.budget = Budget(float(sweeper.budget_gpu_s))
        self.rounds: list[dict[str, Any]] = []
        self.plans: dict[int, Any] = {}
        self.job_idx = 0
        self.gpus = None if cfg.get("device") == "cpu" else gpus_here()
        self.prior_records: list[tuple[str, dict[str, Any]]] = []

    def say(self, line: str) -> None:
        print(f"flopsweep tune: {line}", flush=True)

    # --- judging: compose, validate, estimate, predict ---

    def compose(self, overrides: tuple[str, ...]) -> tuple[Any, dict[str, str]]:
        """The typed config of a set-up (``RunConfig``) and its group choices, as its job composes it."""
        from omegaconf import OmegaConf, open_dict

        loader = self.s.hydra_context.config_loader
        cfg = loader.load_sweep_config(self.s.config, list(overrides))
        choices = {k: str(v) for k, v in cfg.hydra.runtime.choices.items() if v is not None}
        with open_dict(cfg):
            del cfg["hydra"]
        return OmegaConf.to_object(cfg), choices

    def environment(self, device: str, nproc: str) -> Any:
        """The machine a set-up is checked for, torch-free: this one's CPU and GPUs (``nvidia-smi``),
        GPUs assumed bf16-capable (a check of the GPU itself is the job's, which then records
        ``invalid`` and leaves the pool)."""
        from flopsweep import hostmem
        from flopsweep.plan import Environment, fixed_nproc

        cuda = device == "cuda" or (device == "auto" and bool(self.gpus))
        count = len(self.gpus or []) or (fixed_nproc(nproc) or 1)
        return Environment(
            cuda_available=cuda,
            gpu_count=count if cuda else 0,
            bf16_supported=cuda,
            capability=(9, 0) if cuda else None,
            cpu_count=os.cpu_count() or 1,
            host_memory_bytes=hostmem.total_bytes(),
        )

    def machine(self, cfg: Any, env: Any) -> Any:
        """This machine as :func:`flopsweep.plan_assess.assess` judges a set-up on it: ``nnodes`` x
        the set-up's ranks per node (``auto``: the GPUs, else 1), the GPU's name, its assumed power,
        and the memory per rank (:meth:`capacity`)."""
        from flopsweep.clusters import ASSUMED_POWER_W
        from flopsweep.peaks import lookup
        from flopsweep.plan import fixed_nproc
        from flopsweep.plan_space import Machine

        nproc = fixed_nproc(cfg.nproc_per_node) or env.gpu_count or 1
        gpu = self.gpus[0][0] if env.cuda_available and self.gpus else None
        row = lookup(gpu) if gpu else None
        return Machine(
            label="here",
            nnodes=int(cfg.nnodes),
            gpus_per_node=nproc,
            device_name=gpu,
            capacity=self.capacity(env, nproc),
            power_w=ASSUMED_POWER_W.get(row.name) if row else None,
        )

    def capacity(self, env: Any, nproc: int) -> tuple[float, str] | None:
        """The memory per rank a set-up's estimate must leave ``space.min_headroom`` of:
        ``hydra.sweeper.memory_gib``, else the GPU's, else (CPU) the host's available memory over the
        node's ranks; None when unknown."""
        if self.s.memory_gib is not None:
            # not rounded to whole bytes: 1e-9 GiB was said as 9.31e-10 GiB (one byte)
            return float(self.s.memory_gib) * 2**30, "hydra.sweeper.memory_gib"
        if env.cuda_available and self.gpus:
            name, size = self.gpus[0]
            return size, name
        if not env.cuda_available:
            from flopsweep import hostmem

            free = hostmem.available_bytes()
            return (free // max(1, nproc), f"host's available memory over {nproc} ranks") if free else None
        return None

    def judge(self, c: Candidate) -> None:
        """Compose ``c`` as its job would and judge it with :func:`flopsweep.plan_assess.assess` (the
        plan's judge): pruned when refused (by the rules or Hydra's composition) or over memory,
        else its prior prediction."""
        from omegaconf.errors import OmegaConfBaseException

        from flopsweep.config import ConfigError
        from flopsweep.plan_space import assess

        try:
            cfg, choices = self.compose(c.overrides)
        except (ConfigError, OmegaConfBaseException) as exc:
            c.pruned = f"refused: {str(exc).splitlines()[0].removeprefix('Invalid config: ')}"
            return
        except Exception as exc:  # noqa: BLE001 - Hydra's composition errors: one line, pruned
            c.pruned = f"refused: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return
        env = self.environment(cfg.device, cfg.nproc_per_node)
        where = self.machine(cfg, env)
        row, p = assess(
            cfg,
            env,
            where,
            choices=choices,
            setup=c.setup,
            overrides=list(c.overrides),
            records=self.prior_records,
            min_headroom=self.space.min_headroom,
        )
        c.peak_gib = row.est_peak_gib_per_rank
        if row.status in ("refused", "over memory"):
            c.pruned = f"{row.status}: {row.reason}"
            return
        self.plans[c.index] = (p, where, row)
        c.source = row.prediction_source if row.status == "ok" else row.reason
        c.prior = c.predicted = objective_value(row, self.objective)

    def refusal(self, setup: Any, combo: int = 0) -> Exception | None:
        """What the rules (or Hydra's composition) raise for ``setup`` on this machine, None where they
        accept it: its job composed with combination ``combo`` of the sweep's axes, then validated and
        resolved (:func:`flopsweep.plan.plan`), as :meth:`judge` does first: the tuner's judge for
        :func:`flopsweep.layout_fit.taken_layouts`."""
        from flopsweep.plan import plan

        over = candidates(self.combos[combo : combo + 1], self.swept, [setup], self.nodes)[0].overrides
        try:
            cfg, choices = self.compose(over)
            plan(cfg, self.environment(cfg.device, cfg.nproc_per_node), choices=choices)
        except Exception as exc:  # noqa: BLE001 - Hydra's composition errors too, as judge() prunes them
            return exc
        return None

    def judges(self) -> list[Any]:
        """:meth:`refusal` under each of the first :data:`JUDGED_COMBOS` combinations of the sweep's axes
        (``model=gpt-tiny,llama-tiny``): a fix's layout is one every job takes."""
        import functools

        return [functools.partial(self.refusal, combo=i) for i in range(min(JUDGED_COMBOS, len(self.combos)))]

    def placed_nowhere(self) -> str | None:
        """The ``Invalid config`` line of a space none of whose layouts is a set-up on this machine
        (``space.layouts=[tp3]`` on 2 ranks, which had said "all 90 dropped", exit 1), its fix the
        layouts :func:`flopsweep.layout_fit.taken_layouts` gives (placed on these ranks, and accepted
        by the rules for this model in a set-up of the space: :meth:`refusal`); None where a set-up is
        placed, or without ``space.*``."""
        from flopsweep.config import ConfigError
        from flopsweep.layout_fit import model_refusal, taken_layouts

        if self.candidates or not self.unplaced:
            return None
        nnodes, per = self.nodes
        why = self.unplaced[0].removeprefix("space.layouts: ").split(". Fix:")[0].split(" (nnodes=")[0]
        takes = taken_layouts(self.space, nnodes, per, self.judges())
        if not takes and (own := model_refusal(self.space, nnodes, per, self.judges())) is not None:
            return str(own).splitlines()[0]  # not even dp: the model's own line (model.n_head=0) first
        return str(
            ConfigError(
                "space.layouts",
                list(self.space.layouts),
                f"no layout of it is a set-up on this machine's {nnodes * per} rank(s) (nnodes={nnodes} x "
                f"{per} per node; {why})",
                f"set space.layouts=[{','.join(takes or ['dp'])}]",
                f"[{','.join(self.space.layouts)}]",
            )
        )

    def taken_nowhere(self) -> str | None:
        """After :meth:`judge`, where every candidate was refused and the rules refuse each layout of the
        space for this model (``space.layouts=[ep2]``, a dense model: "all 90 dropped", exit 1):
        :func:`flopsweep.layout_fit.taken_nowhere_problem`'s ``Invalid config`` line, judged on the
        candidates' own refusals (a layout of the fix's composed by :meth:`refusal`); None otherwise."""
        from flopsweep.layout_fit import taken_nowhere_problem

        said: dict[Any, str | None] = {}
        for c in self.candidates:
            pruned = c.pruned if c.pruned and c.pruned.startswith("refused: ") else None
            said[c.setup] = pruned if said.get(c.setup, "") is not None else None
        if not said or None in said.values():
            return None

        def own(setup: Any) -> Exception | None:
            if setup not in said:
                return self.refusal(setup)
            return ValueError(said[setup].removeprefix("refused: ")) if said[setup] else None

        nnodes, per = self.nodes
        refused = taken_nowhere_problem(self.space, [(f"{nnodes}x{per} rank(s)", nnodes, per, [own])])
        return str(refused).splitlines()[0] if refused else None

    def predict(self, c: Candidate, records: list[tuple[str, dict[str, Any]]]) -> float | None:
        """The objective :func:`flopsweep.plan_assess.predict` gives ``c`` from ``records`` (its source
        in ``c.source``)."""
        from flopsweep.plan_space import predict

        p, where, row = self.plans[c.index]
        predict(row, p, where, records)
        c.source = row.prediction_source if row.status == "ok" else row.reason
        return objective_value(row, self.objective)

    def records(self) -> list[tuple[str, dict[str, Any]]]:
        """``predict.calibration``'s records and every record of this sweep so far."""
        from flopsweep import forecast
        from flopsweep.config import ConfigError

        try:
            here = forecast.calibration_records(str(self.s.sweep_dir))
        except ConfigError:
            here = []
        return self.prior_records + here

    def refit(self) -> None:
        """Predict every set-up again, calibrated by what was measured (``predict.calibration``'s
        path: :func:`flopsweep.forecast.prediction` over the sweep's records); a set-up not yet
        measured takes the refit as its prediction."""
        records = self.records()
        for c in self.candidates:
            if c.index in self.plans and not c.values:
                c.predicted = self.predict(c, records)

    # --- measuring ---

    def launch(self, jobs: list[tuple[Candidate, int]]) -> None:
        """Run ``jobs`` (``(set-up, repeat index)``) through the launcher, in batches of
        ``max_batch_size``, and read each job's record into its set-up."""
        from hydra.core.utils import JobStatus

        batch_size = self.s.max_batch_size or len(jobs) or 1
        for start in range(0, len(jobs), batch_size):
            chunk = jobs[start : start + batch_size]
            batch = [
                [o for o in c.overrides if o.split("=", 1)[0].lstrip("+~") not in JOB_KEYS]
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
        from flopsweep.files import RecordError, read_json
        from flopsweep.plausible import usable_problems
        from flopsweep.record import METRICS_FILE

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
            capped = f"raise hydra.sweeper.memory_gib (now {float(self.s.memory_gib):g} GiB per rank)"
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
        if not alive and (refused := self.taken_nowhere()):  # a config error: exit 2, before any job
            print(f"flopsweep: {printable(refused)}", file=sys.stderr, flush=True)
            raise SystemExit(2)
        if not alive:
            self.nothing_left()  # before multirun.yaml: nothing ran, no folder is left behind
        if one := one_setup_problem(self.candidates):  # a refused one says why first (nothing_left)
            print(f"flopsweep: {one}", file=sys.stderr, flush=True)
            raise SystemExit(2)  # before multirun.yaml and any job
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
                stopped = budget_stop(round_, **counts, cost=cost, left=left)
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

    def hold_out(self) -> None:
        """Predict every set-up that ran from the other set-ups' records alone
        (:attr:`flopsweep.tune.Candidate.held_out`): the refitted prediction's error where it has not
        seen the set-up."""
        records = self.records()
        for c in self.candidates:
            if c.values and c.index in self.plans:
                own = {os.path.abspath(r) for r in c.runs}
                others = [(p, r) for p, r in records if os.path.dirname(os.path.abspath(p)) not in own]
                c.held_out = self.predict(c, others)

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
