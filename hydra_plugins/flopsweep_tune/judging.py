"""The tuner's judge (:class:`Judging`): its set-ups (:func:`candidates`), each composed through Hydra as
its job would be, validated by the rules, estimated and predicted before any job
(:func:`flopsweep.plan_assess.assess`, the plan's judge), then predicted again from what was measured.
:class:`hydra_plugins.flopsweep_tune.tuning.Tuning` measures the set-ups this judges, in rounds.
Imported when a tuning sweep starts, never at Hydra's plugin scan (nothing heavy at the top).
"""

from __future__ import annotations

import os
from typing import Any

from flopsweep.local_gpus import gpus_here
from flopsweep.objective import objective_value  # re-exported: the tests import it from here
from flopsweep.override_parsing import override_key
from flopsweep.space import SETUP_KEYS, unplaced
from flopsweep.tune import Candidate, held_out_reason


def label(overrides: list[str], swept: set[str]) -> str:
    """The swept overrides of a set-up (``backend=fsdp parallel.tp=2``)."""
    return " ".join(o for o in overrides if override_key(o) in swept)


def candidates(
    combos: list[list[str]], swept: set[str], setups: list[Any] | None, nodes: tuple[int, int]
) -> list[Candidate]:
    """The tuner's set-ups: one per Hydra combination (``setups`` None), or with ``space.*`` given each
    combination (the sweep axes over other keys) crossed with each set-up of the space placed on this
    machine (``nodes``: nnodes, ranks per node; :func:`flopsweep.space.placed`), the set-up's
    overrides last. An eager set-up of ``space.compile=[false,true]`` drops ``compile_mode`` and
    ``compile_scope`` (they apply to the compiled ones; ``compile=false`` refuses them), and is one
    candidate however many values of theirs the sweep gives."""
    if setups is None:
        return [Candidate(i, tuple(c), label(c, swept)) for i, c in enumerate(combos)]
    shown = swept | set(SETUP_KEYS) | {"compile" for s in setups if s.compile is not None}  # space.compile's
    out, seen = [], set()
    for combo in combos:
        rest = [o for o in combo if not override_key(o).startswith("space.")]  # the jobs need no space.*
        for setup in setups:
            kept = [o for o in rest if override_key(o) not in COMPILE_LEVERS]
            over = (kept if setup.compile is False else rest) + setup.setup_overrides(*nodes)
            if tuple(over) not in seen:
                seen.add(tuple(over))
                out.append(Candidate(len(out), tuple(over), label(over, shown), setup=setup))
    return out


JUDGED_COMBOS = 4
"""The most combinations of a sweep's axes under which :meth:`Judging.judges` asks the rules for a fix's
layouts (each set-up composed through Hydra, about 0.14 s)."""

COMPILE_LEVERS = ("compile_mode", "compile_scope")
"""The keys that act only with ``compile=true``: an eager set-up's overrides leave them out."""


class Judging:
    """The set-ups of one tuning sweep and their judgement: composed, refused or pruned, predicted
    (``plans``: each judged set-up's plan, machine and row, by :attr:`Candidate.index`)."""

    def __init__(
        self,
        sweeper: Any,
        combos: list[list[str]],
        swept: set[str],
        space: Any,
        setups: tuple[list[Any], tuple[int, int]] | None,
        objective: str,
    ) -> None:
        self.s = sweeper
        self.space = space
        self.objective = objective
        placed, nodes = setups or (None, (1, 1))
        self.combos, self.swept, self.nodes = combos, swept, nodes
        self.candidates = candidates(combos, swept, placed, nodes)
        for c in self.candidates:  # its figure is the analysis's for this objective (Candidate.pooled)
            c.objective = objective
        self.unplaced = unplaced(space, *nodes) if setups else []
        self.plans: dict[int, Any] = {}
        self.gpus = None if sweeper.config.get("device") == "cpu" else gpus_here()
        self.prior_records: list[tuple[str, dict[str, Any]]] = []

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
        node's ranks less the launch's margin (:func:`flopsweep.hostmem.cpu_peak_allowed`); None when
        unknown."""
        if self.s.memory_gib is not None:
            # not rounded to whole bytes: 1e-9 GiB was said as 9.31e-10 GiB (one byte)
            return float(self.s.memory_gib) * 2**30, "hydra.sweeper.memory_gib"
        if env.cuda_available and self.gpus:
            name, size = self.gpus[0]
            return size, name
        if not env.cuda_available:
            from flopsweep import hostmem

            free = hostmem.available_bytes()  # less the launch's margin (hostmem.cpu_peak_allowed)
            said = f"host's available memory over {nproc} ranks, less the CPU's margin"
            return (hostmem.cpu_peak_allowed(free, nproc), said) if free else None
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

    def hold_out(self) -> None:
        """Predict every set-up that ran from the other set-ups' records alone
        (:attr:`flopsweep.tune.Candidate.held_out`): the refitted prediction's error where it has not
        seen the set-up."""
        records = self.records()
        for c in self.candidates:
            if c.values and c.index in self.plans:
                own = {os.path.abspath(r) for r in c.runs}
                others = [(p, r) for p, r in records if os.path.dirname(os.path.abspath(p)) not in own]
                source, c.held_out = c.source, self.predict(c, others)  # its own prediction keeps its source
                row = self.plans[c.index][2]
                why = held_out_reason(row.status, row.reason, self.objective)
                c.source, c.held_out_blank = source, (why if c.held_out is None else None)
