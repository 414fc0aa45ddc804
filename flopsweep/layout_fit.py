"""Which layouts a model takes on a number of ranks: the one place that decides whether a layout of
``space.layouts`` can be placed *for this model* (the degree divides the ranks, and the rules accept at
least one set-up of the space with it: heads and KV heads for ``tpN``, layers for ``ppN``, experts for
``epN``, ...), and so the one place that writes the layouts a refusal's fix lists. ``plan=true
plan_clusters=[...]`` (its command-line check and its job), and ``hydra/sweeper=tune`` each pass their
own judge of a set-up (:func:`plan_refusal`, the tuner's composition); torch-free.

Before session 39 the fix listed every degree that divides the ranks (``space.layouts=[dp,tp2,tp4,tp8]``
on 8 ranks), and gpt-tiny's 4 heads refused each ``tp8`` set-up: typed back, 240 of its 360 set-ups were
dropped, every ``tp8`` one among them.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from flopsweep.config import ConfigError, RunConfig
from flopsweep.dropped import space_fix
from flopsweep.space import Setup, Space, placed, setups, unplaced

Refusal = Callable[[Setup], Exception | None]
"""A judge of one set-up on the ranks at hand: what its check raised (a :class:`ConfigError`, one line), None
where the rules accept it."""

MOST_LISTED = 4
"""The most layouts a fix lists (``dp`` and three degrees)."""

LAYOUT_KINDS = ("tp", "pp", "cp", "ep")
"""The layouts of a degree (``tpN``, ``ppN``, ``cpN``, ``epN``)."""


def tried_layouts(kinds: Iterable[str], world: int) -> list[str]:
    """``dp``, then for each kind (``tp``, ``pp``, ...) every degree from 2 that divides ``world``
    ranks, smallest first: the layouts a fix may list, before the model is asked."""
    return ["dp", *(f"{k}{d}" for k in kinds for d in range(2, world + 1) if world % d == 0)]


def kinds_of(layouts: Iterable[str]) -> list[str]:
    """The kinds of degree ``layouts`` name (``[tp3, pp3]`` -> ``[tp, pp]``), ``[tp]`` where none."""
    return list(dict.fromkeys(v[:2] for v in layouts if v[:2] in LAYOUT_KINDS)) or ["tp"]


MOST_JUDGED = 12
"""The most set-ups of one layout :func:`accepted` judges (the tuner composes each through Hydra, about
0.14 s: 90 set-ups of a refused ``tp2`` took 13 s); a layout accepted only beyond them is left out of a
fix, never one refused put in."""


def judged_order(setups: list[Setup]) -> list[Setup]:
    """``setups`` in the order :func:`accepted` judges them: one per backend first (then per policy,
    precision and ``compile``), each at its largest micro batch (a pipeline's stages need a local batch
    they divide), then the rest, so that the first :data:`MOST_JUDGED` cover the space's options."""
    seen: set[tuple] = set()
    first, rest = [], []
    for s in sorted(setups, key=lambda s: -s.micro_batch):
        key = (s.backend, s.checkpointing, s.precision, s.compile)
        (rest if key in seen else first).append(s)
        seen.add(key)
    by_backend: dict[str, list[Setup]] = {}
    for s in first:
        by_backend.setdefault(s.backend, []).append(s)
    rounds = max((len(v) for v in by_backend.values()), default=0)
    spread = [v[i] for i in range(rounds) for v in by_backend.values() if i < len(v)]
    return spread + rest


def accepted(space: Space, layout: str, nnodes: int, gpus_per_node: int, refusal: Refusal) -> bool:
    """Whether ``layout`` can be placed for the model on ``nnodes`` x ``gpus_per_node`` ranks: it is a
    set-up of its own there (:func:`flopsweep.space.placed`) and ``refusal`` accepts at least one
    set-up of ``space`` (its backends, policies, precisions, micro batches) with it, of the first
    :data:`MOST_JUDGED` in :func:`judged_order`."""
    one = dataclasses.replace(space, layouts=(layout,))
    tried = judged_order(placed(one, nnodes, gpus_per_node))[:MOST_JUDGED]
    return any(refusal(s) is None for s in tried)


def taken_layouts(
    space: Space,
    nnodes: int,
    gpus_per_node: int,
    refusal: Refusal | Sequence[Refusal],
    *,
    most: int = MOST_LISTED,
) -> list[str]:
    """The layouts a fix lists: of :func:`tried_layouts` (the kinds ``space.layouts`` names), the first
    ``most`` that :func:`accepted` takes under ``refusal`` (several: under each, one per model a sweep
    names); ``[]`` where none is, not even ``dp`` (the model itself refused, ``model.n_head=0``:
    :func:`model_refusal` says why)."""
    judges = [refusal] if callable(refusal) else list(refusal)
    world = nnodes * gpus_per_node
    out: list[str] = []
    for layout in tried_layouts(kinds_of(space.layouts), world):
        if all(accepted(space, layout, nnodes, gpus_per_node, judge) for judge in judges):
            out.append(layout)
            if len(out) == most:
                break
    return out


def model_refusal(
    space: Space, nnodes: int, gpus_per_node: int, refusal: Refusal | Sequence[Refusal]
) -> ConfigError | None:
    """Where :func:`taken_layouts` takes no layout, not even ``dp``: the refusal of the first ``dp`` set-up
    (in :func:`judged_order`) by the first judge that refuses it, when that is a :class:`ConfigError` (the
    model's own line, ``model.n_head=0``, is the one to fix first); else None."""
    judges = [refusal] if callable(refusal) else list(refusal)
    one = dataclasses.replace(space, layouts=("dp",))
    for setup in judged_order(placed(one, nnodes, gpus_per_node))[:1]:
        for judge in judges:
            if isinstance(exc := judge(setup), ConfigError):
                return exc
    return None


Place = tuple[str, int, int, Sequence[Refusal]]
"""A cluster as :func:`taken_nowhere_problem` reads it: its label, nodes, ranks per node and one judge
per model."""


def refused_everywhere(
    space: Space, places: Sequence[tuple[str, int, int, Refusal]]
) -> tuple[str, str] | None:
    """Why ``space.layouts`` is no plan for the judge's model: None where a set-up of one of its layouts
    is accepted on one of ``places`` (label, nnodes, gpus_per_node, judge), or where none is placed (the
    placement's own line says why); else ``("LAYOUT on LABEL", "KEY=VALUE: WHY. Fix: FIX")``: the refusal
    most of the first placed layout's set-ups got (every set-up is judged: a refusal of the space must
    not rest on a sample; about 1 ms a set-up under :func:`plan_refusal`), of
    those whose fix leads out of the space (:func:`flopsweep.dropped.space_fix`: ``backend=fsdp`` beside
    fsdp set-ups refused too is passed over, as the plan's last line does)."""
    first: tuple[str, str, list[str]] | None = None
    for label, nnodes, per, judge in places:
        for layout in space.layouts:
            tried = judged_order(placed(dataclasses.replace(space, layouts=(layout,)), nnodes, per))
            whys = []
            for setup in tried:
                if (exc := judge(setup)) is None:
                    return None
                line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                whys.append(line.removeprefix("Invalid config: "))
            first = first or ((layout, label, whys) if whys else None)
    if first is None:
        return None
    layout, label, whys = first
    out = [w for w in whys if not (space_fix(f"refused: {w}", space) or ("", False))[1]] or whys
    return f"{layout} on {label}", Counter(out).most_common(1)[0][0]


def taken_nowhere_problem(
    space: Space, places: Sequence[Place], shown: str | None = None
) -> ConfigError | None:
    """The refusal of a space each of whose placed layouts the rules refuse for a model in every judged
    set-up on every cluster (``space.layouts=[ep2]`` for a dense model, which had planned, then said "all 90
    dropped", exit 1); None where each model takes one of them. Its fix lists :func:`taken_layouts` on the
    first place (accepted for every model: the fix is itself accepted), then the rule's other alternatives
    that name a ``space.*`` list or a ``model=`` where they lead out of the space (``pick an MoE config
    (model=hf ...)``, ``list a multiple of 3 in space.micro_batches (...)``); None where no
    layout is taken, not even ``dp`` (``space.backends=[single]`` on 8 ranks: no layout's fault; the
    plan's own line, in the space's terms).

    ``places``: :data:`Place` of each cluster (its judges in the same order of models); ``shown``: the
    list as typed. Line: ``Invalid config: space.layouts=[ep2]: the rules refuse every set-up of its
    layouts for this model (ep2 on H100:1x8: parallel.ep=2: needs a mixture-of-experts model, ...). Fix:
    set space.layouts=[dp].``"""
    if not places:
        return None
    for m in range(len(places[0][3])):
        refused = refused_everywhere(space, [(label, n, per, judges[m]) for label, n, per, judges in places])
        if refused is None:
            continue
        _, nnodes, per, judges = places[0]
        if not (takes := taken_layouts(space, nnodes, per, judges)):
            return None  # not even dp: no layout's fault (space.backends=[single] on 8): the plan's line
        where, line = refused
        why = line.split(". Fix: ")[0]
        own, back = space_fix(f"refused: {line}", space) or ("", True)
        alts = [] if back else own.split("Fix: ")[-1].split(", or ")
        alts = [a for a in alts if "space.layouts" not in a and re.search(r"\(space\.|\bmodel=", a)]
        return ConfigError(
            "space.layouts",
            list(space.layouts),
            f"the rules refuse every set-up of its layouts for this model ({where}: {why})",
            ", or ".join([f"set space.layouts=[{','.join(takes)}]", *alts]),
            shown or f"[{','.join(space.layouts)}]",
        )
    return None


def plan_refusal(cfg: RunConfig, cluster: Any) -> Refusal:
    """The plan's judge of a set-up on ``cluster`` (:class:`flopsweep.clusters.Cluster`): the set-up's
    config there (:func:`flopsweep.plan_space.setup_config`) placed as ``plan=true`` places it and
    validated and resolved (:func:`flopsweep.plan.plan`, every rule of :mod:`flopsweep.rules`), as
    :func:`flopsweep.plan_assess.assess` does first; the memory estimate and the prediction are not made."""
    import os

    from flopsweep.job.placement import plan_environment
    from flopsweep.plan import Environment, plan
    from flopsweep.plan_space import setup_config

    def refusal(setup: Setup) -> Exception | None:
        one = setup_config(cfg, setup, cluster)
        if one is None:
            return ValueError(setup.placement_problem(cluster.nnodes, cluster.gpus_per_node))
        one, env, _ = plan_environment(one, Environment(cpu_count=os.cpu_count() or 1))
        choices = {
            "backend": setup.backend,
            "precision": setup.precision,
            "activation_checkpointing": setup.checkpointing,
        }
        try:
            plan(one, env, choices=choices)
        except Exception as exc:  # noqa: BLE001 - a value no rule foresaw refuses the set-up, never the check
            return exc
        return None

    return refusal


def cluster_unplaced(cfg: RunConfig, space: Space, cluster: Any) -> list[str]:
    """Why each set-up of ``space`` that ``cluster`` (a :class:`flopsweep.clusters.Cluster`) does not place
    is none there (:func:`flopsweep.space.unplaced`), each degree's fix listing the layouts ``cfg``'s
    model takes on that cluster (:func:`taken_layouts` under :func:`plan_refusal`; ``dp`` where none is),
    one line per set-up; ``[]`` where it places every one. The plan's line for a cluster that ranks none
    (``L4:8: none: no set-up of the space is placed on it (... Fix: list a layout these ranks take (dp,
    tp2, tp4), ...)``) and its nothing line use it: before session 39's re-trial they listed every degree
    that divides the ranks, ``tp8`` for gpt-tiny's 4 heads, the fix :func:`taken_layouts` had replaced in
    the command line's line (docs/reliability-10.md #600)."""
    nodes = (cluster.nnodes, cluster.gpus_per_node)
    if not any(s.layout != "hsdp" and s.parallel_on(*nodes) is None for s in setups(space)):
        return unplaced(space, *nodes)  # none, or hsdp's alone: its fix names no layout of a degree
    takes = taken_layouts(space, *nodes, plan_refusal(cfg, cluster)) or ["dp"]
    return unplaced(space, *nodes, takes)


NNODES_FIX = "Fix: set nnodes=2 or more"
"""The fix :meth:`flopsweep.space.Setup.placement_problem` gives ``hsdp`` on one node, in the tuner's
keys; under ``plan_clusters`` (which ``nnodes`` does not change) :func:`clusters_fix` replaces it."""


def clusters_fix(clusters: list[Any]) -> str:
    """``Fix: name a cluster of several nodes in plan_clusters (e.g. H100:2x8)``: the first cluster's GPU
    and GPUs per node on two nodes (:class:`flopsweep.clusters.Cluster`)."""
    c = clusters[0]
    return f"Fix: name a cluster of several nodes in plan_clusters (e.g. {c.gpu}:2x{c.gpus_per_node})"


def sweep_unplaced(config: Any) -> dict[str, str]:
    """For a plan sweep's table (:func:`flopsweep.job.plansweep.sweep_output`): each cluster of the sweep
    config's ``plan_clusters`` (a ``DictConfig`` or mapping) by its label, and why its space (``space``)
    places no set-up there, the reason alone (each job's own ``run.log`` names the layouts its model takes:
    the models differ by job); ``""`` where it places some. ``{}`` where the clusters or the space cannot be
    read (the jobs refused them). A sweep's table had left a cluster of no row out unsaid
    (docs/reliability-10.md #607), where a single plan names it (#520)."""
    from flopsweep.clusters import parse_cluster

    try:  # each name as the jobs parse it (plandecide.named_clusters, whose refusals are the jobs' lines)
        clusters = [parse_cluster(str(name)) for name in config.get("plan_clusters") or []]
        space = Space.from_config(config.get("space"))
    except Exception:  # noqa: BLE001 - a value the jobs refuse, each with its own line
        return {}
    out = {}
    for c in clusters:
        nodes = (c.nnodes, c.gpus_per_node)
        away = unplaced(space, *nodes) if not placed(space, *nodes) else [""]
        if NNODES_FIX in away[0]:  # hsdp on one node: its fix names no layout of a model
            out[c.label] = away[0].replace(NNODES_FIX, clusters_fix(clusters))
        else:
            out[c.label] = away[0] and away[0].split(". Fix: ")[0] + " (each job's run.log gives its fix)"
    return out


MOST_MODELS = 16
"""The most models (a sweep's ``model=`` values by its ``model.*`` values) that
:func:`command_line_models` reads."""


def command_line_models(values: dict[str, list]) -> list[RunConfig] | None:
    """:func:`command_line_model` for each model a sweep's command line names (each value of ``model=`` by
    each of every ``model.*`` key), at most :data:`MOST_MODELS` (beyond: the first values alone); None where
    one of them cannot be read without Hydra."""
    import itertools

    keys = ["model", *sorted(k for k in values if k.startswith("model.") and values[k])]
    lists = [values.get(k) or [None] for k in keys]
    combos = list(itertools.islice(itertools.product(*lists), MOST_MODELS + 1))
    if len(combos) > MOST_MODELS:
        combos = [tuple(v[0] for v in lists)]
    out = []
    for combo in combos:
        one = command_line_model({k: [v] for k, v in zip(keys, combo, strict=True) if v is not None})
        if one is None:
            return None
        out.append(one)
    return out


def command_line_model(values: dict[str, list]) -> RunConfig | None:
    """The job's config as far as the layouts' rules need it, read from the command line before Hydra
    (the first value of each key): :class:`~flopsweep.config.RunConfig`'s defaults with the model of
    ``model=`` (else ``conf/config.yaml``'s ``gpt-tiny``) read from its file in ``conf/model/`` and its
    ``model.*`` values. None where that cannot be said without Hydra (``model=hf``, whose shape is its
    ``config.json``'s; an interpolation; a file of another form): the job's own check then refuses. None
    too where the family's own check refuses the model (``model=llama-tiny model.n_head=3``): the model's
    line before Hydra is :func:`flopsweep.model_identity.command_line_problem`'s (or ``shape_problem``'s),
    which leads with the key the command line set and fixes that key; the family's check, which cannot
    know it, named ``model.n_embd`` (docs/reliability-11.md #780).
    """
    import os

    from flopsweep.checks import option_schemas
    from flopsweep.conf_files import ConfFileProblem, checked_yaml
    from flopsweep.override_schema import CONF

    pick = (values.get("model") or ["gpt-tiny"])[0]
    if not isinstance(pick, str) or not pick.replace("-", "").replace(".", "").replace("_", "").isalnum():
        return None
    try:
        data = checked_yaml(os.path.join(CONF, "model", f"{pick}.yaml"))
    except ConfFileProblem:
        return None
    if not isinstance(data, dict):
        return None
    bases = [d for d in data.get("defaults") or [] if isinstance(d, str) and d.startswith("/schema/model/")]
    arch = bases[0].removeprefix("/schema/model/base_").split("@")[0] if bases else ""
    schema = option_schemas()["model"].get(arch)
    if schema is None or arch == "hf":
        return None
    fields = {f.name: f.default for f in dataclasses.fields(schema)}
    given = {k.removeprefix("model."): v[0] for k, v in values.items() if k.startswith("model.") and v}
    shape = {k: v for k, v in {**data, **given}.items() if k in fields}
    if not all(_of_its_type(v, fields[k]) for k, v in shape.items()):
        return None  # model.n_head=abc, an interpolation: Hydra's and the job's lines
    from flopsweep.models import MODELS

    try:
        model = schema(**{"arch": arch, **shape})
        MODELS[arch].check(model)
    except (TypeError, ValueError):  # ConfigError too: a ValueError
        return None
    return dataclasses.replace(RunConfig(), model=model)


def _of_its_type(value: object, default: object) -> bool:
    """Whether ``value`` is of the type of its field's ``default`` (an int not a bool or float, a float an
    int or float, a string, a bool); any value where the default says none."""
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str) and "${" not in value
    return True
