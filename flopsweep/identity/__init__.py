"""What makes two runs "the same": one answer for resume, reuse, calibration, callbacks and the analysis.

Every comparison of records goes through here, in this order: the record is brought to the
current schema (:func:`upgrade`, the v0 -> v1 -> v2 chain), its config to today's form
(:func:`current_config`: the keys added later at the value older records implied, listed once
in :data:`ADDED_LATER`; ``model=hf``'s config hash from its ``model`` section,
:func:`with_config_hash`), and then one of these keys is taken:

- the **job key** (:func:`job_key`, ``run.job_key``): what ``resume=true`` must match to skip an
  ``ok`` record or take over a failed one's probes: the whole config less the run controls
  (:data:`RUN_CONTROL_KEYS`: ``timeout_s``, ``resume``, ``fault``, ``repeats``...)
  and less the sizes a search finds again (``batch=auto``'s micro batch, ``search.model=largest``'s
  ``n_layer`` and name). :func:`comparable_config` is what it hashes.
- the **set-up key** (:func:`setup_key`, ``run.setup_key``; the analysis's ``setup_id``): what the
  analysis pools repeats by and scales against: the config less the rank count (``nproc_per_node``,
  ``nnodes``), the ``tag``, ``repeat`` and the run controls, plus ``system.device_name``; the keys
  of :data:`ADDED_LATER` at their old value and a ``full``/``none`` checkpointing policy hash as
  older records did (so committed records keep their ids). ``layout=False``: ``base_setup_id``.
- the **compared layout** (:func:`compared_layout`): the layout columns a ``--baseline``
  matches on. DDP records its ``N`` data-parallel ranks as ``dp_replicate=N, dp_shard=1``
  (``dpNx1``), FSDP2 and ZeRO as ``dp_shard=N`` (``dpN``); the backend column says which method
  it is, so they compare as the same data-parallel degree ``N``.
- the **calibration key** (:func:`calibration_key`) of :mod:`flopsweep.predict`, the **machine**
  of a resumed search's probes (:func:`machine_difference`) and the **sweep's overrides**
  (:func:`defining_overrides`, :func:`same_overrides`) that ``resume=true`` and the sweep callback
  compare.

The job writes ``run.setup_key``, ``run.job_key`` and ``run.identity_version``
(:func:`record_keys`) into every record; a reader takes the stored keys when the record's
``identity_version`` is :data:`IDENTITY_VERSION` and computes them from the upgraded record
otherwise (every record written before the keys), so old and new records compare alike.

The upgrade chain is :mod:`flopsweep.identity.versions` (its :func:`upgrade` re-exported here).
Torch-free: imports :mod:`flopsweep.config`, :mod:`flopsweep.files`, :mod:`flopsweep.record` (and
Hydra's override parser, lazily).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from flopsweep.config import ModelSearchConfig, ParallelConfig
from flopsweep.identity.versions import CHECKPOINTING_BOOLS, Record, upgrade
from flopsweep.override_parsing import override_key
from flopsweep.record import SCHEMA_VERSION, value_at

__all__ = [
    "ADDED_LATER",
    "CALIBRATION_KEYS",
    "HOST_OFFLOAD",
    "IDENTITY_VERSION",
    "LAYOUT_ROW_KEYS",
    "NOT_SETUP",
    "PARALLEL_DEFAULT",
    "RANK_COUNT_KEYS",
    "REPLICATE_ONLY",
    "Record",
    "SEARCH_DEFAULT",
    "calibration_key",
    "code_key",
    "comparable_config",
    "without_added_defaults",
    "compared_layout",
    "current_config",
    "defining_overrides",
    "job_key",
    "machine_difference",
    "parsed_overrides",
    "record_keys",
    "same_job",
    "same_overrides",
    "setup_config",
    "setup_key",
    "upgrade",
    "with_config_hash",
]


# --- today's config: the keys added later ---------------------------------------------------------------

IDENTITY_VERSION = 3
"""The version of the keys :func:`record_keys` writes (``run.identity_version``). A record of
another version (1 and 2 included: version 3 computes the job key differently), or of none, has
its keys computed again from its config.

- 1: the keys as first written.
- 2: ``model=hf``'s ``config.model.config_sha256`` (the hash of the ``config.json`` bytes validation
  read) is in the config, so the job key and the set-up key change when the file does
  (``resume=true`` runs it again; the analysis does not pool two files under one name). A record
  from before carries the hash in its ``model`` section only, which :func:`with_config_hash` copies
  in: an unchanged file is the same job and set-up as before, and such a record's set-up id changes
  once, to include the hash.
- 3: the job key leaves out the keys of :data:`ADDED_LATER` at their old value, as the set-up key
  does (:func:`without_added_defaults`): a key added later no longer changes the job key of every
  record written before it, which made ``resume=true`` run their ``ok`` jobs again."""

PARALLEL_DEFAULT = {
    "dp_replicate": 1,
    "dp_shard": -1,
    "tp": 1,
    "pp": 1,
    "pp_schedule": "1F1B",
    "pp_microbatches": None,
    "cp": 1,
}
"""``config.parallel`` as every record had it before the key existed (pure data parallel over
the world), with ``pp_microbatches`` and ``cp`` at their defaults too."""
SEQ_SEARCH_KEYS = ("min_seq_len", "max_seq_len", "seq_len_multiple")
"""``config.search`` keys added with ``search.grow=seq_len`` (:data:`ADDED_LATER` fills them one by one)."""
SEARCH_DEFAULT = {
    k: v for k, v in dataclasses.asdict(ModelSearchConfig()).items() if k not in SEQ_SEARCH_KEYS
}
"""``config.search`` of a run without the model search, as records had it before ``search.grow=seq_len``."""

ADDED_LATER: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("repeat",), 0),  # before repeats=: round 0 of 1
    (("parallel",), dataclasses.asdict(ParallelConfig())),  # before layouts: data parallel over the world
    (("search",), SEARCH_DEFAULT),  # before search.model=largest
    (("batch", "global_batch_size"), None),  # grad_accum as given
    (("optim", "in_backward"), False),  # the optimizer step after backward
    (("parallel", "ep"), 1),  # before expert parallel: every rank holds every expert
    (("loss",), {"chunk_tokens": 0}),  # before loss.chunk_tokens: the whole logits
    (("optim", "implementation"), "auto"),  # before the key: fused on CUDA, torch's default elsewhere
    (("compile_scope",), "block"),  # before the key: compile=true compiled each block
    (("compile_mode",), "default"),  # before the key: torch.compile's default mode
    (("backend", "end_units"), False),  # before the key: FSDP2's root held the embedding and head
    (("steps", "gc_freq"), 0),  # before the key: Python's automatic garbage collection in the steps
    (("optim", "overlap_forward"), False),  # before the key: the optimizer step on the main stream
    *(
        (("search", k), getattr(ModelSearchConfig(), k)) for k in SEQ_SEARCH_KEYS
    ),  # before search.grow=seq_len
)
"""Config keys that records made before them lack, each with the value those records ran with:
``(path, value)``. :func:`current_config` fills them in; :func:`setup_config` leaves them out at
that value, so a set-up keeps its :func:`setup_key` across versions. A new config key whose default
keeps the old behaviour is one line here."""

RANK_COUNT_KEYS = ("nproc_per_node", "nnodes")
"""Config keys that set the rank count: the only ones a scaling comparison lets differ."""
RUN_CONTROL_KEYS = (
    "timeout_s",
    "resume",
    "fail_fast",
    "fault",
    "plan",
    "plan_gpu",
    "plan_gpu_memory_gib",
    "plan_clusters",
    "plan_format",
    "space",
    "profile",
    "objective",
    "cost",
    "budget",
    "predict",
    "repeats",
)
"""Keys that steer a run but do not change what it measures; ``resume`` ignores them
when it compares a job's config with the config of an existing record. (An ``ok``
record always ran without a fault: every injected fault fails its run.) ``repeats`` is one:
raising it on a resumed sweep adds rounds and keeps the records of the rounds already run."""


NOT_SETUP = (*RANK_COUNT_KEYS, "tag", "repeat", *RUN_CONTROL_KEYS)
"""Config keys outside the set-up key: the rank count, the ``tag``, the round, the run controls."""


def current_config(config: Mapping[str, Any]) -> Record:
    """``config`` (a record's) in today's form, a new dict: a boolean ``activation_checkpointing``
    is the ``{"name": "full"|"none"}`` policy, and every key of :data:`ADDED_LATER` that it lacks
    (under a section it has) is set to the value older records ran with."""
    out = dict(config)
    ckpt = out.get("activation_checkpointing")
    if isinstance(ckpt, bool):
        out["activation_checkpointing"] = {"name": CHECKPOINTING_BOOLS[ckpt]}
    for path, value in ADDED_LATER:
        node: Any = out
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node = None
                break
            node[part] = dict(node[part])
            node = node[part]
        if node is not None and path[-1] not in node:
            node[path[-1]] = json.loads(json.dumps(value))  # a copy
    return out


def with_config_hash(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``record`` with ``config.model.config_sha256`` for ``model=hf`` (identity version 2): a record
    written before the key has the file's hash in its ``model`` section only, copied in here (a new
    dict); any other record as it is (one without a hash anywhere keeps none: it matches no validated
    config, whose hash validation fills)."""
    config, model = record.get("config"), record.get("model")
    m = config.get("model") if isinstance(config, dict) else None
    if not isinstance(m, dict) or m.get("arch") != "hf" or "config_sha256" in m:
        return record
    sha = model.get("config_sha256") if isinstance(model, dict) else None
    if not isinstance(sha, str):
        return record
    return {**record, "config": {**config, "model": {**m, "config_sha256": sha}}}


def _upgraded(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``record`` at :data:`SCHEMA_VERSION` (one without ``schema_version``, such as
    ``{"config": ...}`` of a config about to run, counts as current), ``model=hf``'s config hash
    in its config (:func:`with_config_hash`).

    Raises:
        RecordError: an unknown ``schema_version`` (see :func:`upgrade`)."""
    version = record.get("schema_version", SCHEMA_VERSION)
    current = record if version == SCHEMA_VERSION and not isinstance(version, bool) else upgrade(dict(record))
    return with_config_hash(current)


def _stored(record: Mapping[str, Any], name: str) -> str | None:
    """``run.<name>`` when the record's ``run.identity_version`` is :data:`IDENTITY_VERSION`."""
    run = record.get("run")
    if isinstance(run, dict) and type(run.get("identity_version")) is int and isinstance(run.get(name), str):
        if run["identity_version"] == IDENTITY_VERSION:
            return run[name]
    return None


def _digest(value: Any, size: int) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:size]


def without_added_defaults(config: Mapping[str, Any]) -> Record:
    """``config`` (today's form, :func:`current_config`) less every key of :data:`ADDED_LATER` at the
    value older records ran with (``parallel`` at :data:`PARALLEL_DEFAULT`, ``search`` off,
    ``optim.in_backward`` false, ``compile_scope`` ``block``...), a new dict: so a key added later at
    its old default changes neither the job key nor the set-up key of a config that leaves it there."""
    kept = dict(config)
    for path, old in ADDED_LATER:  # a key inside a section (optim.in_backward, parallel.ep, ...)
        if len(path) == 2 and isinstance(node := kept.get(path[0]), dict):
            key = path[1]
            if key in node and type(node[key]) is type(old) and node[key] == old:
                kept[path[0]] = {k: v for k, v in node.items() if k != key}
    parallel = kept.get("parallel")
    if isinstance(parallel, dict) and all(parallel.get(k) == v for k, v in PARALLEL_DEFAULT.items()):
        if "ep" not in parallel:  # expert parallel at 1 was dropped above
            kept.pop("parallel")
    for path, old in ADDED_LATER:  # a top-level key or section (search, loss, compile_scope) at its old value
        if len(path) == 1 and path[0] != "parallel" and kept.get(path[0]) == old:
            kept.pop(path[0])
    return kept


# --- the job key (resume) -------------------------------------------------------------------------------


def comparable_config(config: Mapping[str, Any]) -> Record:
    """A record's ``config`` in today's form (:func:`current_config`) without the keys that do not
    change what a run measures: the run controls (:data:`RUN_CONTROL_KEYS`),
    ``batch=auto``'s ``micro_batch_size`` (the record holds the size the search found, the new config
    the size it starts from: the search decides it again) and, under ``search.model=largest``, the
    model's ``n_layer`` and ``name`` (found again), or its ``seq_len`` under ``search.grow=seq_len``;
    and less the keys of :data:`ADDED_LATER` at their old value (:func:`without_added_defaults`), so
    that a key added in a later version does not make ``resume=true`` run an ``ok`` job again."""
    out = current_config({key: value for key, value in config.items() if key not in RUN_CONTROL_KEYS})
    batch = out.get("batch")
    if isinstance(batch, dict) and batch.get("name") == "auto":
        out["batch"] = {k: v for k, v in batch.items() if k != "micro_batch_size"}
    model, search = out.get("model"), out.get("search") or {}
    if search.get("model") == "largest" and isinstance(model, dict):
        found = ("seq_len",) if search.get("grow") == "seq_len" else ("n_layer", "name")
        out["model"] = {k: v for k, v in model.items() if k not in found}
    return without_added_defaults(out)


def job_key(record: Mapping[str, Any]) -> str | None:
    """16 hex digits naming what ``resume=true`` must match: :func:`comparable_config` of the
    upgraded record's config (``run.job_key`` when stored at :data:`IDENTITY_VERSION`); None
    without a config.

    Raises:
        RecordError: an unknown ``schema_version``, or a v1 record whose FLOPs overflow."""
    if stored := _stored(record, "job_key"):
        return stored
    config = _upgraded(record).get("config")
    return _digest(comparable_config(config), 16) if isinstance(config, dict) else None


def same_job(record: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    """Whether ``record`` was made by the job that ``config`` (the new run's config as JSON:
    ``json.loads(json.dumps(asdict(cfg)))``) describes: equal :func:`job_key`. A record from
    before ``optim.in_backward`` (or any key of :data:`ADDED_LATER`) is the same job as today's
    config at the old value."""
    theirs = job_key(record)
    return theirs is not None and theirs == job_key({"config": dict(config)})


# --- the set-up key (analysis) --------------------------------------------------------------------------


def setup_config(config: Mapping[str, Any]) -> Record:
    """The config keys that define a set-up: less :data:`NOT_SETUP`, and less the keys of
    :data:`ADDED_LATER` at their old value (``parallel`` at :data:`PARALLEL_DEFAULT`, ``search``
    off, ``batch.global_batch_size`` null, ``optim.in_backward`` false); a ``full``/``none``
    checkpointing policy as the boolean of older records. So a set-up keeps its id across versions."""
    kept = without_added_defaults({k: v for k, v in current_config(config).items() if k not in NOT_SETUP})
    ckpt = kept.get("activation_checkpointing")
    if isinstance(ckpt, dict) and set(ckpt) == {"name"} and ckpt["name"] in CHECKPOINTING_BOOLS.values():
        kept["activation_checkpointing"] = ckpt["name"] == "full"
    return kept


def setup_key(record: Mapping[str, Any], *, layout: bool = True) -> str | None:
    """10 hex digits naming the run's set-up whatever its rank count (the analysis's ``setup_id``):
    :func:`setup_config` of the upgraded record's config plus ``system.device_name``
    (``run.setup_key`` when stored at :data:`IDENTITY_VERSION`). Runs with the same key differ only
    in how many ranks they ran on. ``layout=False`` leaves ``config.parallel`` out too
    (``base_setup_id``: the same set-up whatever its layout). None without a config.

    Raises:
        RecordError: an unknown ``schema_version``, or a v1 record whose FLOPs overflow."""
    if layout and (stored := _stored(record, "setup_key")):
        return stored
    record = _upgraded(record)
    config = record.get("config")
    if not isinstance(config, dict):
        return None
    kept = setup_config(config)
    if not layout:
        kept.pop("parallel", None)
    system = record.get("system") if isinstance(record.get("system"), dict) else {}
    return _digest([kept, system.get("device_name")], 10)


CODE_KEYS = ("git_sha", "torch", "cuda", "deepspeed", "python")
"""The ``system`` fields that say which code measured a run (:func:`code_key`)."""


def code_key(record: Mapping[str, Any]) -> str | None:
    """10 hex digits naming the code that measured the run (the analysis's ``code_id``): its checkout's
    commit (``system.git_sha``, with ``git_dirty`` false) and the torch, CUDA, DeepSpeed and Python
    versions (:data:`CODE_KEYS`). None where the code is not known to be that commit: no commit (an
    installed package), edited files (``git_dirty`` true or unknown), no ``system``. Two runs of one
    ``setup_id`` and one code key are two measurements of the same thing, wherever they were written."""
    system = record.get("system")
    if not isinstance(system, dict) or not system.get("git_sha") or system.get("git_dirty") is not False:
        return None
    return _digest([system.get(k) for k in CODE_KEYS], 10)


def edited_setup_key(record: Mapping[str, Any]) -> str | None:
    """The set-up key computed from the record's config when its stored ``run.setup_key`` names another
    (its config was edited after it ran: the rounds of a ``repeats=`` sweep pooled by the stored key
    would mix set-ups); None when nothing is stored or the two agree.

    Raises:
        RecordError: as :func:`setup_key`."""
    run = record.get("run")
    stored = _stored(record, "setup_key")
    if stored is None or not isinstance(run, dict):
        return None
    own = setup_key({**record, "run": {k: v for k, v in run.items() if k != "setup_key"}})
    return own if own != stored else None


def differing_keys(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "config") -> list[str]:
    """The dotted paths (``config.batch.micro_batch_size``) at which the set-up configs ``a`` and ``b``
    (:func:`setup_config`) differ, sorted; a path where one holds an object and the other not is named
    whole."""
    out = []
    for key in sorted(set(a) | set(b), key=str):
        x, y, here = a.get(key), b.get(key), f"{prefix}.{key}"
        if isinstance(x, dict) and isinstance(y, dict):
            out += differing_keys(x, y, here)
        elif x != y:
            out.append(here)
    return out


def record_keys(record: Mapping[str, Any]) -> Record:
    """``{setup_key, job_key, identity_version}``, computed from ``record`` (its ``config`` and
    ``system``), for the record's ``run`` section (:func:`flopsweep.metrics.build_record`)."""
    computed = {k: v for k, v in record.items() if k != "run"}
    return {
        "setup_key": setup_key(computed),
        "job_key": job_key(computed),
        "identity_version": IDENTITY_VERSION,
    }


# --- the layout a baseline compares ---------------------------------------------------------------------

REPLICATE_ONLY = ("ddp",)
"""Backends whose data parallelism only replicates (:meth:`flopsweep.layout.Layout.for_backend`
records it as ``dp_replicate = dp, dp_shard = 1``)."""
LAYOUT_ROW_KEYS = ("backend", "dp_replicate", "dp_shard", "layout")
"""The analysis columns :func:`compared_layout` reads."""


def compared_layout(row: Mapping[str, Any]) -> Record:
    """The layout columns of an analysis row (``dp_replicate``, ``dp_shard``, ``layout``, those it
    has) as a baseline matches them: for a :data:`REPLICATE_ONLY` backend (DDP over ``N`` ranks,
    ``dp_replicate=N, dp_shard=1``, ``dpNx1``) the data-parallel degree as FSDP2 and ZeRO record it
    (``dp_replicate=1, dp_shard=N``, ``dpN``): the backend column says how. Others as they are; a
    blank degree stays blank."""
    out = {k: row[k] for k in ("dp_replicate", "dp_shard", "layout") if k in row}
    replicas, shard = row.get("dp_replicate"), row.get("dp_shard")
    if row.get("backend") not in REPLICATE_ONLY or not all(_integer(v) for v in (replicas, shard)):
        return out
    if int(shard) == 1 and int(replicas) > 1:
        out.update(dp_replicate=1, dp_shard=int(replicas))
        if isinstance(row.get("layout"), str):
            out["layout"] = " ".join(
                f"dp{int(replicas)}" if t == f"dp{int(replicas)}x1" else t for t in row["layout"].split()
            )
    return out


def _integer(value: Any) -> bool:
    try:
        return not isinstance(value, bool) and value == int(value)
    except (TypeError, ValueError, OverflowError):
        return False


# --- the calibration key (flopsweep.predict) ------------------------------------------------------------

HOST_OFFLOAD = {"cpu_offload": False, "offload_optimizer": "none", "offload_param": "none"}
"""The backend knobs that move the optimizer step or the parameters off the GPU, each at the value that
keeps them on it: FSDP2's ``cpu_offload`` (``CPUOffloadPolicy``: every state on the host, AdamW stepped
there), DeepSpeed's ``offload_optimizer`` and ``offload_param`` (``cpu`` or ``nvme``). Such a step is bound
by the host (one H200, Llama 3.2 3B FSDP2 at micro batch 4: 7.41 s with ``cpu_offload`` eager, 0.36 s
without compiled), so it is another kind of step (:data:`flopsweep.nearest_measured.HOST`).
:func:`calibration_key` reads a knob at that value, or absent (``single``, ``ddp``, a record before the
knob), as null: backends that keep every state on the GPU compare alike."""

CALIBRATION_KEYS = (
    ("config", "model"),
    ("config", "attention"),
    ("config", "precision", "name"),
    ("config", "activation_checkpointing"),
    ("config", "compile"),
    ("config", "compile_scope"),
    ("config", "compile_mode"),
    ("config", "device"),
    *(("config", "backend", knob) for knob in HOST_OFFLOAD),
    ("config", "optim", "in_backward"),
    ("config", "optim", "implementation"),
    ("config", "optim", "overlap_forward"),
    ("config", "batch", "micro_batch_size"),
)
"""What a calibration record shares with the run it calibrates (its "same set-up"): the model, the
attention kernel, the precision, the checkpointing policy (``offload`` among them), compilation
(``compile``, ``compile_scope``, ``compile_mode``), the device type (``cuda`` or ``cpu``: a CPU
record's step says nothing of a GPU's; ``predict.compute_scale`` scales between two GPUs), the kind of
step: where the states live (:data:`HOST_OFFLOAD`), the optimizer stepped in backward or after it
(``optim.in_backward``), on a side stream beside the next forward (``optim.overlap_forward``) and
torch's AdamW kernel (``optim.implementation``, ``auto`` read as ``fused`` on
CUDA, as it runs), and the micro batch (last: :func:`calibration_key` drops it to match another). The
backend and its other knobs are not here: :func:`flopsweep.predict.pick_calibration` prefers the same
and :mod:`flopsweep.forecast` keeps to the same backend and ZeRO stage."""


def _step_kind(config: Record) -> Record:
    """``config`` (today's form) with :data:`HOST_OFFLOAD`'s knobs at their on-GPU value (or absent) as
    null, and ``optim.implementation`` ``auto`` as the kernel it picks on CUDA (``fused``), a new dict."""
    out = dict(config)
    if isinstance(backend := out.get("backend"), dict):
        out["backend"] = {
            k: None if k in HOST_OFFLOAD and v == HOST_OFFLOAD[k] else v for k, v in backend.items()
        }
    optim = out.get("optim")
    if isinstance(optim, dict) and optim.get("implementation") == "auto" and out.get("device") == "cuda":
        out["optim"] = {**optim, "implementation": "fused"}
    return out


def calibration_key(
    record: Mapping[str, Any], *, micro_batch: bool = True, only: tuple[str, ...] | None = None
) -> str:
    """The :data:`CALIBRATION_KEYS` of a record (or of ``{"config": asdict(cfg)}``) as one text;
    without the micro batch when ``micro_batch`` is False (:func:`flopsweep.predict.compute_from_calibration`
    then scales by tokens); with ``only`` (one of the keys), that one value. A ``bool`` checkpointing
    (records before the policies) reads as ``full``/``none`` (:func:`current_config`)."""
    record = with_config_hash(record)
    config = record.get("config")
    shaped = {**record, "config": _step_kind(current_config(config))} if isinstance(config, dict) else record
    values = [value_at(shaped, path) for path in CALIBRATION_KEYS]
    if not micro_batch:
        values[-1] = None
    if only is not None:
        return json.dumps(values[CALIBRATION_KEYS.index(only)], sort_keys=True, default=str)
    return json.dumps(values, sort_keys=True, default=str)


# --- the machine of a resumed search's probes (flopsweep.reuse) -----------------------------------------


def machine_difference(record: Mapping[str, Any], search: Mapping[str, Any], here: Mapping[str, Any]) -> str:
    """How the machine of ``record`` (its ``system``, and its ``search``'s ``gpu_memory_bytes``)
    differs from ``here`` (:class:`flopsweep.reuse.Machine` as a dict: ``device_name``,
    ``gpu_memory_bytes``, ``world_size``, ``hostname``; the host counts only when ``here`` names
    one: on the CPU), as ``"NAME THEIRS, this run's OURS"`` texts joined by ``"; "``; ``""`` when
    it is the same kind of machine."""
    system = record.get("system") or {}
    theirs = {
        "device_name": system.get("device_name"),
        "gpu_memory_bytes": search.get("gpu_memory_bytes"),
        "world_size": system.get("world_size"),
        "hostname": system.get("hostname") if here.get("hostname") is not None else None,
    }
    return "; ".join(f"{k} {theirs[k]}, this run's {here.get(k)}" for k in theirs if theirs[k] != here.get(k))


# --- the sweep's overrides (resume=true, flopsweep.callbacks) -------------------------------------------


def defining_overrides(overrides: list[str]) -> list[str]:
    """The overrides that decide what a job measures, sorted: without those of
    :data:`RUN_CONTROL_KEYS` (``resume``, ``fault``, ``timeout_s``...) and ``hydra.*``."""
    kept = []
    for line in overrides:
        key = override_key(str(line))
        if key.split(".")[0] not in RUN_CONTROL_KEYS and not key.startswith("hydra."):
            kept.append(str(line))
    return sorted(kept)


def same_overrides(theirs: list[str], ours: list[str]) -> bool:
    """Whether two lists of overrides set the same keys to the same values, in any order: equal as
    text, or equal as parsed by Hydra's override grammar (``optim.lr=0.035``, ``optim.lr=0.0350`` and
    ``optim.lr=3.5e-2`` are one float; ``true`` and ``True`` one bool). A key keeps its prefix and
    package (``+a``, ``++a``, ``~a``, ``a@pkg`` are different keys); values compare with their type
    (``1``, ``1.0``, ``true`` and ``'1'`` differ), a list in order, a dict in any key order, a sweep
    by what it sweeps (``a=1,2`` is ``a=choice(1,2)``). When either list does not parse, only the
    text comparison counts. Order never counts, as in :func:`defining_overrides` (which sorts), also
    between two overrides of one key, of which Hydra applies the last."""
    if sorted(map(str, theirs)) == sorted(map(str, ours)):
        return True
    parsed = [parsed_overrides(theirs), parsed_overrides(ours)]
    return None not in parsed and parsed[0] == parsed[1]


def parsed_overrides(overrides: list[str]) -> tuple[tuple[str, Any], ...] | None:
    """``overrides`` as :func:`same_overrides` compares them: ``(key element, canonical value)`` of each,
    parsed by Hydra's override grammar (``OverridesParser.parse_overrides``), sorted; hashable, so a
    set of them tells sweeps apart (:mod:`flopsweep.folders`). The key element keeps its prefix and
    package (``+a``, ``a@pkg``); the value is tagged with its type (:func:`_canonical_value`:
    ``optim.lr=0.0350`` and ``3.5e-2`` give one ``("float", "0.035")``, ``1`` and ``1.0`` differ).
    None when the grammar refuses one of them (then only the text can be compared)."""
    from hydra.errors import HydraException

    from flopsweep.override_parsing import parsed_all_or_none

    parsed = parsed_all_or_none([str(o) for o in overrides], catch=(HydraException, ValueError, TypeError))
    if parsed is None:
        return None
    pairs = [(o.get_key_element(), _canonical_value(o.value())) for o in parsed]
    return tuple(sorted(pairs, key=repr))


def _canonical_value(value: Any) -> Any:
    """A parsed override value as a comparable, hashable tree tagged with its type: a float by its
    shortest ``repr`` (so ``nan`` equals ``nan``; ``True == 1`` and ``1 == 1.0`` in Python, not here)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if value is None or isinstance(value, (bool, int, str)):
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canonical_value(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(map(repr, value))))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _canonical_value(v)) for k, v in value.items())))
    if dataclasses.is_dataclass(value):  # a sweep: ChoiceSweep, RangeSweep, IntervalSweep, Glob
        fields = [f.name for f in dataclasses.fields(value) if f.name != "simple_form"]  # a,b is choice(a,b)
        return (type(value).__name__, tuple((f, _canonical_value(getattr(value, f))) for f in fields))
    return (type(value).__name__, repr(value))
