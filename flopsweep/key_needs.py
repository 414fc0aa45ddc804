"""What a key's value needs beside it on the command line, torch-free: the overrides to add so that
``KEY=VALUE`` runs as written on the options the command line picks (:func:`needed`).

A fix that names a key must run as written (trial 24: ``nproc=2`` suggested ``nproc_per_node=2``, which
``backend=single``, the default, then refused). :mod:`flopsweep.near_keys`'s "did you mean" and
:mod:`flopsweep.idle_keys`' fixes add what :func:`needed` returns before the key, e.g.
``backend=ddp nproc_per_node=2``. The needs come from the checks that refuse the bare value:

- more than one rank (``nproc_per_node``, ``nnodes``) on a backend of one rank
  (:data:`flopsweep.backend_specs.BACKEND_SPECS`' ``max_ranks``;
  :func:`flopsweep.backend_checks.check_support`): ``backend=ddp``;
- a degree above 1 of ``parallel.*`` on a backend that does not build it
  (:data:`flopsweep.degrees.LAYOUT_BACKENDS`; ``layout.check_built``): ``backend=fsdp``; and the ranks it
  splits, where the command line names none: ``nproc_per_node=DEGREE`` (``dp_shard`` too);
- ``parallel.ep`` above 1 on a model that is not ``model=hf`` (:func:`flopsweep.expert_parallel.check`):
  :data:`MOE_EXAMPLE`, a shipped MoE config;
- ``fault.rank=R`` above 0: a world of ``R + 1`` ranks (``fault.rank`` is checked against it);
- ``optim.in_backward=true``: ``optim.grad_clip=0`` (:func:`flopsweep.rules.optimizer_in_backward`);
- a key that does nothing without another (:data:`flopsweep.idle_keys.IDLE`: ``fault.rank`` without
  ``fault.kind``): that key's pick (``fault.kind=raise``).

:func:`idle_key_problem` refuses a key of :data:`flopsweep.idle_keys.IDLE` given alone, before Hydra.

``tests/unit/test_key_needs.py`` composes each line with Hydra and plans it as the job would: the bare
value is refused, the value after :func:`needed`'s overrides passes.
"""

from __future__ import annotations

from collections.abc import Callable

from flopsweep.idle_keys import IDLE, Idle, idle_without, pick_of, space_acts
from flopsweep.override_parsing import (
    is_override,
    sets_config_key,
    split_override,
    typed_overrides,
    typed_pairs,
)

MEMORY_KEYS = ("model.seq_len", "batch.micro_batch_size", "model.n_layer", "model.n_embd", "model.vocab_size")
"""The integer keys whose size sets the memory a run needs (activations grow with the tokens of a
micro batch, weights and states with the blocks, width and vocabulary): a value within
:data:`flopsweep.limits.MAX_BY_KEY` must also fit the device, which the launch checks (the host memory
on the CPU: :func:`flopsweep.job.hostcheck.check_free_host_memory`; ``plan=true`` shows the estimate),
so a fix of their bound says so."""


def memory_note(key: str) -> str:
    """What a fix of a :data:`MEMORY_KEYS` key's bound adds: the other check a value within the bound
    meets (the device's memory, at launch), so that the fix says where a large value goes next; ""
    for another key."""
    if key not in MEMORY_KEYS:
        return ""
    return (
        "; a large one must also fit the device's memory, which the launch checks (the free host memory "
        "on device=cpu; plan=true shows est_peak_gib_per_rank)"
    )


MOE_EXAMPLE = ("model=hf", "model.config=olmoe-tiny")
"""The model a ``parallel.ep`` fix picks: a shipped tiny MoE config (``flopsweep/models/hf_configs/
olmoe-tiny.json``: 8 experts, 2 per token, 2 layers, width 128), which ``parallel.ep`` of 2, 4 or 8 splits."""

MOE_EXAMPLE_EXPERTS = 8
"""The routed experts of each MoE layer of :data:`MOE_EXAMPLE` (its ``num_experts``; the tests read the
file)."""

DEFAULTS = {"backend": "single", "model": "gpt-tiny"}
"""conf/config.yaml's options where the command line picks none (checked by the tests)."""


def _int(text: str | None) -> int | None:
    """``text`` as a whole number (``2``), else None (``auto``, ``1.5``, an interpolation)."""
    text = (text or "").strip().strip("'\"")
    return int(text) if text.lstrip("-").isdigit() else None


def given_values(parsed: list) -> dict[str, str]:
    """Each key the command line sets (Hydra's parsed overrides) and its first value as typed
    (``backend=ddp,fsdp``: ``ddp``)."""
    out: dict[str, str] = {}
    for o in parsed or []:
        if not sets_config_key(o):  # an @package, a ~KEY, hydra's own keys
            continue
        text = (o.input_line or "").partition("=")[2]
        out[o.key_or_group] = text.split(",")[0].strip().strip("'\"") if "[" not in text else text
    return out


def _ranks(
    given: dict[str, str], ranks: int, out: list[str], *, count: bool = True, divides: bool = False
) -> None:
    """Add ``nproc_per_node=ranks`` where the command line names no rank count that holds them (unless
    ``count`` is False: the key gives the count itself; with ``divides``, a count whose world size
    ``ranks`` does not divide is replaced too: a degree splits the world), and a backend of several
    ranks where its backend runs one."""
    from flopsweep.backend_specs import BACKEND_SPECS

    stated = _int(given.get("nproc_per_node"))
    nodes = _int(given.get("nnodes")) or 1
    short = stated is None or stated * nodes < ranks or (divides and (stated * nodes) % ranks != 0)
    if count and short:
        out.append(f"nproc_per_node={ranks}")
    backend = given.get("backend", DEFAULTS["backend"])
    spec = BACKEND_SPECS.get(backend)
    if spec is not None and spec.max_ranks is not None and spec.max_ranks < ranks:
        if not any(o.startswith("backend=") for o in out):
            out.insert(0, "backend=ddp")


def needed(key: str, value: str | None, given: dict[str, str]) -> list[str]:
    """The overrides that ``key=value`` needs beside it on a command line that sets ``given`` (key ->
    first value as typed, :func:`given_values`) for the job's checks to pass it, in the order to write
    them before ``key=value``; ``[]`` when it needs none or the value is not one this can read."""
    from flopsweep.degrees import LAYOUT_BACKENDS

    out: list[str] = []
    picked = dict(given)
    while (idle := idle_without(key, picked)) is not None and len(out) < len(IDLE):  # fault.kind=raise
        out.append(
            pick_of(idle, picked)
        )  # search.min_seq_len: search.model=largest, then search.grow=seq_len
        picked[out[-1].partition("=")[0]] = out[-1].partition("=")[2]
    number = _int(value)
    if key in ("nproc_per_node", "nnodes") and number is not None and number > 1:
        others = {
            "nproc_per_node": _int(given.get("nproc_per_node")) or 1,
            "nnodes": _int(given.get("nnodes")) or 1,
        }
        others[key] = number
        _ranks({**given, key: str(number)}, others["nproc_per_node"] * others["nnodes"], out, count=False)
    elif key.startswith("parallel.") and number is not None and number > 1:
        degree = key.partition(".")[2]
        backends = LAYOUT_BACKENDS.get(degree, ("fsdp",) if degree == "dp_shard" else None)
        if degree == "ep" and given.get("model", DEFAULTS["model"]) != "hf":
            out += list(MOE_EXAMPLE)
        if backends is not None and given.get("backend", DEFAULTS["backend"]) not in backends:
            out.append(f"backend={backends[0]}")
        if backends is not None:
            _ranks({**given, "backend": backends[0]}, number, out, divides=True)
    elif key == "fault.rank" and number is not None and number > 0:
        _ranks(given, number + 1, out)
    elif (
        key == "optim.in_backward" and str(value).strip().lower() == "true" and "optim.grad_clip" not in given
    ):
        out.append("optim.grad_clip=0")
    return out


def degree_line(
    name: str, value: int, given: dict[str, str], split: tuple[int, str] | None = None
) -> str | None:
    """The overrides that run ``parallel.<name>`` above 1 on a command line that sets ``given`` (key ->
    first value as typed; a job's config: :func:`given_of`), the degree last, as a refusal's fix writes
    them: ``backend=fsdp nproc_per_node=2 parallel.cp=2``. The degree divides ``split`` (``(count,
    what)``: the model's heads for ``tp``/``cp``, its blocks for ``pp``, its routed experts for ``ep``,
    :func:`model_splits`): a ``value`` that does not is replaced by the nearest that does, and the line
    says which do (``(parallel.tp=3 does not divide model.n_head=4: 2 or 4)``); None where none above 1
    does. ``ep`` on a dense model (``split`` None or 0) picks :data:`MOE_EXAMPLE` and its
    :data:`MOE_EXAMPLE_EXPERTS`."""
    key, note = f"parallel.{name}", ""
    if name == "ep" and not (split and split[0]):
        given = {**given, "model": "dense"}  # needed() then picks the MoE example
        split = (MOE_EXAMPLE_EXPERTS, f"the {MOE_EXAMPLE_EXPERTS} experts of olmoe-tiny")
    if split is not None:
        count, what = split
        valid = [d for d in range(2, count + 1) if count % d == 0]
        if not valid:
            return None
        if value not in valid:
            said = ", ".join(map(str, valid[:-1])) + f" or {valid[-1]}" if len(valid) > 1 else f"{valid[0]}"
            note = f" ({key}={value} does not divide {what}: {said})"
            value = min(valid, key=lambda d: (abs(d - value), d))
    return " ".join([*needed(key, str(value), given), f"{key}={value}"]) + note


def model_splits(cfg: object, experts: int = 0) -> dict[str, tuple[int, str]]:
    """What each degree splits of ``cfg``'s model (a :class:`flopsweep.config.RunConfig` after the model's
    check filled its shape) and so must divide, for :func:`degree_line`: ``tp`` and ``cp`` the query
    heads (and the key/value heads where fewer: a whole head per rank), ``pp`` the blocks, ``ep`` the
    routed ``experts`` (0: dense). The rules check more (the MLP width, the vocabulary, the sequence);
    these are the counts a tiny model's degree meets first."""
    import math

    model = cfg.model  # type: ignore[attr-defined]
    heads = int(getattr(model, "n_head", 0) or 0)
    kv = int(getattr(model, "n_kv_head", 0) or 0) or heads
    head_text = f"model.n_head={heads}" + (f" and model.n_kv_head={kv}" if kv != heads else "")
    out = {
        "tp": (math.gcd(heads, kv), head_text),
        "cp": (math.gcd(heads, kv), head_text),
        "pp": (int(getattr(model, "n_layer", 0) or 0), f"model.n_layer={getattr(model, 'n_layer', 0)}"),
        "ep": (experts, f"its {experts} experts"),
    }
    return out


def given_of(cfg: object) -> dict[str, str]:
    """What :func:`needed` reads of a composed config (a :class:`flopsweep.config.RunConfig`), as a
    command line would give it: the backend's registry key, ``nproc_per_node``, ``nnodes``, ``hf`` for
    a ``model=hf`` model (else its name), and the keys that make :data:`flopsweep.idle_keys.IDLE`'s act
    (``plan``, ``fault.kind``, ``compile``, ``search.model``)."""
    model = cfg.model  # type: ignore[attr-defined]
    return {
        "backend": str(cfg.backend.name),  # type: ignore[attr-defined]
        "nproc_per_node": str(cfg.nproc_per_node),  # type: ignore[attr-defined]
        "nnodes": str(cfg.nnodes),  # type: ignore[attr-defined]
        "model": "hf" if model.arch == "hf" else str(model.name),
        "plan": str(cfg.plan).lower(),  # type: ignore[attr-defined]
        "fault.kind": str(cfg.fault.kind),  # type: ignore[attr-defined]
        "compile": str(cfg.compile).lower(),  # type: ignore[attr-defined]
        "search.model": str(cfg.search.model).lower(),  # type: ignore[attr-defined]
    }


def still_meets(key: str, value: str | None, given: dict[str, str]) -> str:
    """The check that ``key=value`` meets on this kind of machine after :func:`needed`'s overrides, which
    no override of the command line alone passes, as a clause for the fix (``""`` for none):

    - ``nnodes`` above 1, the key's or the command line's (``nnodes=2 nproc=2``): a local run has one
      node (:func:`flopsweep.plan.resolve`), so it runs under
      ``hydra/launcher=slurm`` (or plans here with ``plan=true``);
    - ``compile_mode`` of CUDA graphs (:data:`flopsweep.compile_levers.CUDAGRAPH_MODES`): on CUDA only.
    """
    from flopsweep.compile_levers import CUDAGRAPH_MODES, NO_CUDAGRAPHS

    number = _int(value)
    nodes = number if key == "nnodes" else _int(given.get("nnodes"))
    if nodes is not None and nodes > 1 and given.get("plan", "false").lower() != "true":
        whose = "" if key == "nnodes" else f"nnodes={nodes} of the command line: "
        return (
            f"{whose}several nodes run under -m hydra/launcher=slurm, a local run has one, and plan=true "
            "plans them here"
        )
    if key == "compile_mode" and str(value) in CUDAGRAPH_MODES:
        return f"CUDA graphs run on CUDA only, compile_mode={NO_CUDAGRAPHS[str(value)]} on the CPU"
    return ""


def _given(overrides: list[str]) -> dict[str, list[str]] | None:
    """Each key the command line sets and its values as typed (a choice sweep's one by one, lower
    case, unquoted); None where a ``+sweep`` file or another config may set any key."""
    config_flags = ("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir")
    if any(t.startswith(config_flags) for t in overrides):
        return None
    out: dict[str, list[str]] = {}
    for key, value in typed_pairs(overrides):
        if key == "sweep":
            return None
        values = [v.strip().strip("'\"").lower() for v in value.split(",")] if "[" not in value else [value]
        out.setdefault(key, []).extend(values)
    return out


def _resolved(text: str) -> str | None:
    """``text`` (an interpolation, as typed) resolved by itself, as the job would resolve it
    (``${oc.decode:raise}``: ``raise``; ``${oc.env:VAR}``: its value), lower case; None when it refers to a
    key of the config (``${seed}``), which only the job has, or does not resolve."""
    from omegaconf import OmegaConf

    try:
        value = OmegaConf.create({"value": text}).value
    except Exception:  # noqa: BLE001 - omegaconf's errors: a key that is not there, a bad resolver
        return None
    return None if value is None else str(value).strip().lower()


def _refused_alone(key: str, text: str) -> bool:
    """Whether the number ``text`` of ``key`` is refused by its bounds alone
    (:func:`flopsweep.lower_bounds.outside`: ``search.seq_len_multiple=0``); False for what is no number."""
    try:
        number: int | float = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            return False
    from flopsweep.lower_bounds import outside

    return outside(key, number)


def _below(idle: Idle, key: str, text: str) -> bool:
    """Whether ``text`` of ``key`` is a whole number below ``idle.lowest``'s (``search.min_n_layer=0``): the
    idle line names the least in its fix (``search.model=largest search.min_n_layer=1``)."""
    return key in idle.lowest and (number := _int(text)) is not None and number < idle.lowest[key][0]


def idle_key_problem(
    overrides: list[str], recheck: Callable[[list[str]], str | None] | None = None
) -> str | None:
    """One line for a key of :data:`flopsweep.idle_keys.IDLE` given on the command line without a value of
    the key that makes it act (none, or none of a sweep's values), else None: ``Invalid config:
    fault.rank=1: does nothing without fault.kind: fault.kind=none (the default) injects no fault. Fix:
    write backend=ddp fault.kind=raise nproc_per_node=2 fault.rank=1 (...), or drop fault.rank.``, the
    fix's line :func:`needed`'s. A value of the key the job refuses by itself (``fault.phase=shutdown``, not
    a phase; ``search.seq_len_multiple=0``, below its bound) is left to that refusal, so that the fix is never
    refused in turn; an interpolated one (``fault.phase=${tag}``) is a value: whatever it resolves to, the key
    does nothing. An interpolation of the other key (``fault.kind=${oc.decode:none}``) would be resolved only
    in the job, after this check (session 25: ``fault.rank=1`` then ran as if not there): refused, its value
    to be written out. A ``+sweep`` file or another config may set the other key: left alone. Beside a
    ``space.*`` list of :attr:`flopsweep.idle_keys.Idle.space` the key acts where the list lists true
    (``space.compile=[true] compile_mode=reduce-overhead``: the compiled set-ups'); where it lists only
    false, the fix lists true too (``space.compile=[false,true]``, as ``compile=true`` beside it is refused).
    ``recheck`` (``run.py``'s :func:`refusal`) checks the fix's line in place of the key: where another
    choice of the command line refuses it (``plan_clusters`` beside ``hydra/sweeper=tune``, which runs no
    plan), its line follows (``then: ...``)."""
    given = _given(overrides)
    if given is None:
        return None
    for idle in IDLE:
        key = next(
            (
                k
                for k in idle.keys
                if k in given
                and set(given[k]) - {"null", "none", ""}
                and all(
                    "${" in v
                    or (v in idle.choices.get(k, (v,)) and (not _refused_alone(k, v) or _below(idle, k, v)))
                    for v in given[k]
                )  # else the job's line lists them; a value below idle.lowest: this line, its fix the least
            ),
            None,
        )
        if key is None:
            continue
        other = given.get(idle.needs)
        if other is not None and any("$" in v for v in other):  # ${oc.decode:raise}: raise, as typed
            typed = typed_overrides(overrides, idle.needs)[0]
            other = [_resolved(typed.partition("=")[2].strip().strip("'\""))]
        if other is not None and None in other:  # ${seed}, ${tag}: only the job resolves it
            return (
                f"Invalid config: {typed}: an interpolation, which only the job resolves, in {idle.needs}, "
                f"which decides before the run whether {key} does anything. Fix: write the value itself, "
                f"e.g. {idle.pick}, or drop {key}."
            )
        if other is not None and any(v not in idle.idle for v in other):
            continue
        if other is None and idle.unset_acts:  # search.min_n_layer: search.grow=n_layer, the default, acts
            continue
        if (
            acts := space_acts(idle, given.get(idle.space))
        ) is True:  # space.compile=[true]: compiled set-ups
            continue
        shown = typed_overrides(overrides, key)[0]
        value = shown.partition("=")[2]
        first = {k: v[0] for k, v in given.items() if k != idle.needs or "$" not in v[0]}  # the fix writes it
        below = ""
        if key in idle.lowest and (number := _int(value)) is not None and number < idle.lowest[key][0]:
            least, what = idle.lowest[key]
            below = f"is below {least} ({what}), and "
            value = str(least)
        line = " ".join([*needed(key, value, first), f"{key}={value}" if below else shown])
        needs = idle.space if acts is False else idle.needs  # space.compile=[false]: its list, not compile=
        typed_needs = typed_overrides(overrides, needs)
        instead = f" in place of {typed_needs[0]}" if typed_needs else ""
        why = f"{typed_needs[0]} sets no set-up's {idle.needs} to true" if acts is False else idle.why
        meets = f" ({note})" if (note := still_meets(key, value, first)) else ""
        meets = "" if acts is False and "plan_clusters" in given else meets  # a plan's set-ups run on CUDA
        then = ""
        if recheck is not None:
            keys = {t.partition("=")[0] for t in line.split()}
            fixed = put_in_place(overrides, keys, line.split())
            if again := recheck(fixed):
                then = f" (then: {again.removeprefix('Invalid config: ').removesuffix('.')})"
        return (
            f"Invalid config: {shown}: {below}does nothing without {idle.needs}: {why}. "
            f"Fix: write {line}{instead}{idle.others}{meets}{then}, or drop {key}."
        )
    return None


def put_in_place(overrides: list[str], keys: set[str], tokens: list[str], refused: str = "") -> list[str]:
    """``overrides`` with those of ``keys`` (``+`` or not) and ``refused`` replaced by ``tokens``, put where
    the first of them stood, else after the last override: a suggestion checked again as the user would type
    it, never after a trailing flag (``plan=true parallel.pp_schedule=GPipe --cfg job``, not ``... --cfg job
    parallel.pp_schedule=GPipe``, which the flag order refuses)."""

    def replaced(a: str) -> bool:
        prefix, key, _ = split_override(a)
        return a.lstrip("+") == refused or ("~" not in prefix and key in keys)

    kept = [a for a in overrides if not replaced(a)]
    at = next((i for i, a in enumerate(overrides) if replaced(a)), None)
    if at is None:
        last = [i for i, a in enumerate(kept) if is_override(a)]
        at = last[-1] + 1 if last else len(kept)
    else:
        at -= sum(1 for a in overrides[:at] if replaced(a))
    return [*kept[:at], *(t for t in tokens if t not in kept), *kept[at:]]


def rechecked(
    line: str | None, overrides: list[str], recheck: Callable[[list[str]], str | None]
) -> str | None:
    """``line`` (a "no such key" refusal, :func:`flopsweep.near_keys.suggestion`'s "did you mean", or a name
    outside its key's set, :mod:`flopsweep.value_sets`) with its first suggestion's line put in place of the
    key and checked again (``recheck``: ``run.py``'s :func:`refusal`); where another choice of the command
    line refuses it (``hydra/sweeper=tune plan_formt=csv``: ``plan=true``, which the tuner runs none of;
    ``fault.phase=mesure``: ``fault.kind``), that refusal follows the suggestion (``(then: ...)``), so the
    fix never meets it unnamed. Other lines are returned as they are."""
    import re

    m = re.search(r"(?:no such key|must be one of [^.]+)\. Fix: did you mean (.+?)\?(?: |$)", line or "")
    if line is None or m is None:
        return line
    first = m.group(1).split(" or ")[0].split(" (")[0].split(" in place of ")[0].split()
    if not first or any("=" not in t for t in first):  # a key named bare: no line to check
        return line
    refused = line.removeprefix("Invalid config: ").partition(": ")[0]
    keys = {t.partition("=")[0] for t in first} | {refused.partition("=")[0]}  # precision.name=x: precision=
    again = recheck(put_in_place(overrides, keys, first, refused))
    if again is None:
        return line
    at = m.end(1)
    return f"{line[:at]} (then: {again.removeprefix('Invalid config: ').removesuffix('.')}){line[at:]}"
