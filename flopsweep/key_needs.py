"""What a key's value needs beside it on the command line, torch-free: the overrides to add so that
``KEY=VALUE`` runs as written on the options the command line picks (:func:`needed`).

A fix that names a key must run as written (trial 24: ``nproc=2`` suggested ``nproc_per_node=2``, which
``backend=single``, the default, then refused). :mod:`flopsweep.near_keys`'s "did you mean" and
:mod:`flopsweep.idle_keys`' fixes add what :func:`needed` returns before the key, e.g.
``backend=ddp nproc_per_node=2``. The needs come from the checks that refuse the bare value:

- more than one rank (``nproc_per_node``, ``nnodes``) on a backend of one rank
  (:data:`flopsweep.backend_specs.BACKEND_SPECS`' ``max_ranks``; ``check_support``): ``backend=ddp``;
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

from flopsweep.idle_keys import IDLE, idle_without

MEMORY_KEYS = ("model.seq_len", "batch.micro_batch_size", "model.n_layer", "model.n_embd", "model.vocab_size")
"""The integer keys whose size sets the memory a run needs (activations grow with the tokens of a
micro batch, weights and states with the blocks, width and vocabulary): a value within
:data:`flopsweep.config.MAX_BY_KEY` must also fit the device, which the launch checks (the host memory
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
        if o.package is not None or o.is_delete():
            continue
        text = (o.input_line or "").partition("=")[2]
        out[o.key_or_group] = text.split(",")[0].strip().strip("'\"") if "[" not in text else text
    return out


def _ranks(given: dict[str, str], ranks: int, out: list[str], *, count: bool = True) -> None:
    """Add ``nproc_per_node=ranks`` where the command line names no rank count that holds them (unless
    ``count`` is False: the key gives the count itself), and a backend of several ranks where its
    backend runs one."""
    from flopsweep.backend_specs import BACKEND_SPECS

    stated = _int(given.get("nproc_per_node"))
    nodes = _int(given.get("nnodes")) or 1
    if count and (stated is None or stated * nodes < ranks):
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
    if (idle := idle_without(key, given)) is not None:  # fault.rank without fault.kind: nothing injected
        out.append(idle.pick)
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
            _ranks({**given, "backend": backends[0]}, number, out)
    elif key == "fault.rank" and number is not None and number > 0:
        _ranks(given, number + 1, out)
    elif (
        key == "optim.in_backward" and str(value).strip().lower() == "true" and "optim.grad_clip" not in given
    ):
        out.append("optim.grad_clip=0")
    return out


def still_meets(key: str, value: str | None, given: dict[str, str]) -> str:
    """The check that ``key=value`` meets on this kind of machine after :func:`needed`'s overrides, which
    no override of the command line alone passes, as a clause for the fix (``""`` for none):

    - ``nnodes`` above 1: a local run has one node (:func:`flopsweep.plan.resolve`), so it runs under
      ``hydra/launcher=slurm`` (or plans here with ``plan=true``);
    - ``compile_mode`` of CUDA graphs (:data:`flopsweep.compile_levers.CUDAGRAPH_MODES`): on CUDA only.
    """
    from flopsweep.compile_levers import CUDAGRAPH_MODES, NO_CUDAGRAPHS

    number = _int(value)
    if key == "nnodes" and number is not None and number > 1 and given.get("plan", "false").lower() != "true":
        return (
            "several nodes run under hydra/launcher=slurm, a local run has one, and plan=true plans them here"
        )
    if key == "compile_mode" and str(value) in CUDAGRAPH_MODES:
        return f"CUDA graphs run on CUDA only, compile_mode={NO_CUDAGRAPHS[str(value)]} on the CPU"
    return ""


def _given(overrides: list[str]) -> dict[str, list[str]] | None:
    """Each key the command line sets and its values as typed (a choice sweep's one by one, lower
    case, unquoted); None where a ``+sweep`` file or another config may set any key."""
    out: dict[str, list[str]] = {}
    for text in overrides:
        if text.startswith(("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir")):
            return None
        key, eq, value = text.partition("=")
        if not eq or text.startswith(("-", "~")):
            continue
        key = key.lstrip("+")
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


def idle_key_problem(overrides: list[str]) -> str | None:
    """One line for a key of :data:`flopsweep.idle_keys.IDLE` given on the command line without a value of
    the key that makes it act (none, or none of a sweep's values), else None: ``Invalid config:
    fault.rank=1: does nothing without fault.kind: fault.kind=none (the default) injects no fault. Fix:
    write backend=ddp fault.kind=raise nproc_per_node=2 fault.rank=1 (...), or drop fault.rank.``, the
    fix's line :func:`needed`'s. A value of the key the job refuses by itself (``fault.phase=shutdown``, not
    a phase; ``search.seq_len_multiple=0``, below its bound) is left to that refusal, so that the fix is never
    refused in turn; an interpolated one (``fault.phase=${tag}``) is a value: whatever it resolves to, the key
    does nothing. An interpolation of the other key (``fault.kind=${oc.decode:none}``) would be resolved only
    in the job, after this check (session 25: ``fault.rank=1`` then ran as if not there): refused, its value
    to be written out. A ``+sweep`` file or another config may set the other key: left alone."""
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
                    "${" in v or (v in idle.choices.get(k, (v,)) and not _refused_alone(k, v))
                    for v in given[k]
                )  # else the job's line lists them
            ),
            None,
        )
        if key is None:
            continue
        other = given.get(idle.needs)
        if other is not None and any("$" in v for v in other):  # ${oc.decode:raise}: raise, as typed
            typed = next(t.lstrip("+") for t in overrides if t.lstrip("+").partition("=")[0] == idle.needs)
            other = [_resolved(typed.partition("=")[2].strip().strip("'\""))]
        if other is not None and None in other:  # ${seed}, ${tag}: only the job resolves it
            return (
                f"Invalid config: {typed}: an interpolation, which only the job resolves, in {idle.needs}, "
                f"which decides before the run whether {key} does anything. Fix: write the value itself, "
                f"e.g. {idle.pick}, or drop {key}."
            )
        if other is not None and any(v not in idle.idle for v in other):
            continue
        shown = next(t.lstrip("+") for t in overrides if t.lstrip("+").partition("=")[0] == key)
        value = shown.partition("=")[2]
        first = {k: v[0] for k, v in given.items() if k != idle.needs or "$" not in v[0]}  # the fix writes it
        line = " ".join([*needed(key, value, first), shown])
        typed_needs = [t.lstrip("+") for t in overrides if t.lstrip("+").partition("=")[0] == idle.needs]
        instead = f" in place of {typed_needs[0]}" if typed_needs else ""
        meets = f" ({note})" if (note := still_meets(key, value, first)) else ""
        return (
            f"Invalid config: {shown}: does nothing without {idle.needs}: {idle.why}. "
            f"Fix: write {line}{instead}{idle.others}{meets}, or drop {key}."
        )
    return None
