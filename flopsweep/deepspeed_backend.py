"""``backend=deepspeed``: the ZeRO engine (stages 1-3, ZeRO++, offload, DeepCompile) as the last
step of :func:`flopsweep.parallelize.parallelize`, and where DeepSpeed's JIT-built ops live.

Its config dict comes from :func:`flopsweep.deepspeed_config.run_deepspeed_config` (torch-free).
DeepSpeed stays data-parallel: the layout's model-parallel steps are no-ops here (validation
refuses ``parallel.tp``, ``pp``, ``dp_replicate``, ``cp`` and ``ep`` above 1 for it).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from flopsweep import jit_ops
from flopsweep.config import RunConfig
from flopsweep.deepspeed_config import run_deepspeed_config
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.parallelize import DataParallel, make_model, parallelize
from flopsweep.trainers import DeepSpeedTrainer

log = logging.getLogger("flopsweep")


def build_deepspeed(cfg: RunConfig, device: torch.device, layout: Layout) -> DeepSpeedTrainer:
    """DeepSpeed ZeRO engine; under ZeRO-3 the model is built inside ``deepspeed.zero.Init``
    so that each rank only ever holds its partition. Its JIT-built ops go to :func:`extensions_dir`."""
    import deepspeed

    prepare(cfg, device.type)
    ds_config = run_deepspeed_config(cfg, layout, device.type)
    stage3 = cfg.backend.zero_stage == 3
    # zero.Init patches torch.Tensor.__new__ while the model is built, and the model's modules are
    # imported then; torch._dynamo (imported by their torch.compiler.disable) checks Tensor.__new__'s
    # signature when first imported and refuses the patched one: import it before the patch.
    import torch._dynamo  # noqa: F401

    # zero_init=False (hf): built whole on the host, partitioned by deepspeed.initialize.
    with deepspeed.zero.Init(config_dict_or_path=ds_config, enabled=stage3 and family(cfg.model).zero_init):
        model = make_model(cfg, None if stage3 else device)
    engine = parallelize(model, cfg, layout, data_parallel=zero(cfg, ds_config))
    return DeepSpeedTrainer(engine)


def prepare(cfg: RunConfig, device_type: str) -> list[str]:
    """What a DeepSpeed run does once a process before its first engine, in :func:`build_deepspeed` and,
    before its clock starts, in the layer probe (:func:`flopsweep.layer_probe.probe_layers`: work the run
    would do anyway is not the probe's cost): the extensions folder (:func:`extensions_dir`) and, on the CPU,
    ``LOCAL_SIZE``; the one line before a JIT build (:func:`announce_builds`); ``deepspeed.init_distributed``
    (it adopts the process group the worker made); and the JIT ops the run loads (:func:`load_ops`). A second
    call finds them done: DeepSpeed keeps its communication and loaded ops once a process. A ZeRO-1 layer
    probe's first copy on a fresh H100 host took 51.8 s to build, the fused Adam's build inside it
    (session 41, ``benchmarks/results/h100/session41/probe/a1/3``): its ``probe_share`` 82.5% held it.
    Returns the JIT ops loaded (:func:`load_ops`)."""
    where = extensions_dir()  # made (and checked) once
    if not os.environ.get("TORCH_EXTENSIONS_DIR"):  # flopsweep's own folder: the notice says whose it is
        os.environ[jit_ops.OWN_DIR_MARK] = where
    os.environ["TORCH_EXTENSIONS_DIR"] = where
    if device_type == "cpu":
        os.environ.setdefault("LOCAL_SIZE", local_size())
    import deepspeed

    announce_builds(cfg, device_type, os.environ["TORCH_EXTENSIONS_DIR"])
    # init_distributed and an op's load print() "DeepSpeed ... built successfully" on every rank of every
    # job, even when the op is cached: kept for the debug log (hydra.verbose=flopsweep shows it).
    with contextlib.redirect_stdout(io.StringIO()) as chatter:
        deepspeed.init_distributed()  # adopts the process group the worker already made
        loaded = load_ops(cfg, device_type)
    for line in chatter.getvalue().splitlines():
        log.debug("%s", line)
    return loaded


def load_ops(cfg: RunConfig, device_type: str) -> list[str]:
    """Load (building on first use) the JIT ops the run's engine will load
    (:func:`flopsweep.jit_ops.ops_needed`) that DeepSpeed can build here
    (``deepspeed.ops.__compatible_ops__``), through the accelerator's op builder, whose ``load()`` the
    engine then finds done. The names loaded, in order."""
    import deepspeed.ops
    from deepspeed.accelerator import get_accelerator

    ops = run_ops(cfg, device_type)
    compatible = getattr(deepspeed.ops, "__compatible_ops__", {})
    loaded = []
    for op in ops:
        builder = get_accelerator().create_op_builder(op.builder)
        if builder is None or not compatible.get(op.name, False):
            continue  # DeepSpeed builds none it finds incompatible here: neither does the run
        builder.load()
        loaded.append(op.name)
    return loaded


def run_ops(cfg: RunConfig, device_type: str) -> list[jit_ops.JitOp]:
    """The JIT ops a DeepSpeed run of ``cfg`` on a ``device_type`` device loads
    (:func:`flopsweep.jit_ops.ops_needed` of its backend's offload and optimizer keys)."""
    backend = cfg.backend
    return jit_ops.ops_needed(
        device_type=device_type,
        offload_optimizer=getattr(backend, "offload_optimizer", "none"),
        optimizer_impl=getattr(backend, "optimizer_impl", "fused"),
    )


def local_size(environ: Mapping[str, str] = os.environ) -> str:
    """``LOCAL_SIZE`` for DeepSpeed on the CPU: the ranks of this node (``LOCAL_WORLD_SIZE``, which
    flopsweep's spawned ranks and torchrun set), as DeepSpeed's own launcher sets it
    (``deepspeed/launcher/launch.py``). Its CPU accelerator's ``device_count()`` reads it, and without
    it runs ``numactl --hardware`` in a subprocess on every call: ZeRO-3 calls it once per gradient
    bucket (``stage3.py``, ``__avg_scatter_grads``), 98 forks a step for llama-tiny at 12 blocks on 2
    gloo ranks, 3-4 ms each on a 2-core host and more as the process grows (a fork copies its page
    tables), which no GPU run pays and which made the deeper model's step grow faster than its
    shallow copies'. ``1`` when neither is set (one process)."""
    return environ.get("LOCAL_WORLD_SIZE") or "1"


def announce_builds(cfg: RunConfig, device_type: str, where: str, stream=None) -> str | None:
    """On rank 0, one line (to ``stream``, stderr by default) before DeepSpeed JIT-builds an op this
    run needs and ``where`` has not cached (:func:`flopsweep.jit_ops.build_notice`): what, roughly how
    long, and for whom it is cached (:func:`flopsweep.jit_ops.cache_scope`). The line, or None when nothing
    is to be built or on another rank."""
    import deepspeed.ops
    from deepspeed.git_version_info import installed_ops

    if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
        return None
    ops = run_ops(cfg, device_type)
    compatible = getattr(deepspeed.ops, "__compatible_ops__", {})
    # DeepSpeed loads an installed op prebuilt, and builds none it finds incompatible here
    available = {op.name: True for op in ops if installed_ops.get(op.name)}
    available |= {op.name: False for op in ops if op.name not in available and not compatible.get(op.name)}
    line = jit_ops.build_notice(jit_ops.ops_to_build(ops, where, available), where)
    if line is not None:
        print(f"[flopsweep rank 0] {line}", file=stream or sys.stderr, flush=True)
    return line


def zero(cfg: RunConfig, ds_config: dict[str, Any]) -> DataParallel:
    """The data-parallel step of ``backend=deepspeed``: ``deepspeed.initialize`` with ``ds_config``
    (after checkpointing and compile, outside ``deepspeed.zero.Init``); under ZeRO-3 the tied
    parameters are registered as external and the family's leaf modules (MoE layers) are gathered
    whole. ``backend.deepcompile`` then compiles the whole engine. The step returns the engine
    (an ``nn.Module``)."""
    import deepspeed

    fam = family(cfg.model)

    def initialize(model: nn.Module) -> nn.Module:
        if cfg.backend.zero_stage == 3:
            # A tied LM head uses the embedding weight outside the embedding's own forward.
            for param in fam.tied_parameters(model):
                deepspeed.zero.register_external_parameter(model, param)
            if fam.zero3_leaf_modules is not None and (leaves := fam.zero3_leaf_modules(model)):
                from deepspeed.utils import set_z3_leaf_modules

                set_z3_leaf_modules(model, leaves)  # MoE layers: gathered whole, not per routed expert
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
        if cfg.backend.deepcompile:
            engine.compile()  # DeepCompile: the whole model, with ZeRO's passes in the graph
        return engine

    return initialize


def extensions_dir(environ: Mapping[str, str] = os.environ) -> str:
    """Where DeepSpeed's JIT-built ops (the CPU ``deepspeed_shm_comm``, ...) are built and cached:
    the user's ``TORCH_EXTENSIONS_DIR`` when set, else a directory of flopsweep's own under
    ``$XDG_CACHE_HOME`` (``~/.cache``), keyed on Python, torch, DeepSpeed and the environment's
    prefix. torch's default (``~/.cache/torch_extensions/py311_cpu``) is shared by every environment
    of the machine: two of them with other torch or DeepSpeed versions rebuild each other's ops
    on every run (minutes each). Created private (0700), each folder from the cache base down made
    exclusively or found this user's (:func:`flopsweep.cache_home.make_cache_folder`).

    Raises:
        RecordUnwritable: another user's symbolic link on that path (:func:`flopsweep.links.foreign_link`),
            a link or another user's folder from the cache base down.
    """
    if environ.get("TORCH_EXTENSIONS_DIR"):
        return environ["TORCH_EXTENSIONS_DIR"]
    from importlib.metadata import version

    from flopsweep.cache_home import cache_root, make_cache_folder

    ds = version("deepspeed")
    key = "|".join([sys.prefix, sys.version, torch.__version__, str(torch.version.cuda), ds])
    name = f"py{sys.version_info.major}{sys.version_info.minor}-torch{torch.__version__}-ds{ds}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    root = cache_root(environ)[1]  # checked before launch: cache_home.cache_problem
    # ops built and loaded there run as this user's code: made exclusively, never through a link
    return str(make_cache_folder(root / "flopsweep" / "torch_extensions" / f"{name}-{digest}", root))
