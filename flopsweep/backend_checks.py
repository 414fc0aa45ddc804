"""A ``backend=`` option against the run it is asked for, torch-free: :func:`check_support` (in
:func:`flopsweep.plan.resolve`, once the world size and the device are known) holds the option to what
its spec (:data:`flopsweep.backend_specs.BACKEND_SPECS`) runs on: ranks, devices, precisions; then
DeepSpeed's hpZ partition, NVMe offload and DeepCompile; then the option's own rules
(:meth:`flopsweep.backend_specs.BackendSpec.option_check`).
"""

from __future__ import annotations

from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.config import BackendConfig, ConfigError
from flopsweep.deepspeed_config import check_nvme
from flopsweep.text import plural


def check_support(
    cfg: BackendConfig,
    *,
    world_size: int,
    device: str,
    precision: str,
    compile_blocks: bool = False,
    paths_here: bool = True,
) -> BackendConfig:
    """Check that ``cfg``'s backend runs ``world_size`` ranks on ``device`` at ``precision``;
    ``paths_here`` False leaves ``backend.nvme_path`` unchecked (a plan for another machine).

    Returns:
        ``cfg`` after the option's own rules (DeepSpeed sizes made ``int``).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    spec = BACKEND_SPECS[cfg.name]
    if spec.max_ranks is not None and world_size > spec.max_ranks:
        others = ", ".join(name for name, b in BACKEND_SPECS.items() if b.max_ranks is None)
        raise ConfigError(
            "backend",
            cfg.name,
            f"runs at most {plural(spec.max_ranks, 'rank')} but nproc_per_node x nnodes = {world_size}",
            f"set nproc_per_node={spec.max_ranks} and nnodes=1, or pick backend={others}",
        )
    if device not in spec.devices:
        here = " or ".join(f"backend={name}" for name, b in BACKEND_SPECS.items() if device in b.devices)
        raise ConfigError(
            "backend",
            cfg.name,
            f"runs only on {', '.join(spec.devices)}, not on {device}",
            f"pick {here}, or set device={spec.devices[0]}",
        )
    if spec.precisions is not None and precision not in spec.precisions:
        others = ", ".join(name for name, b in BACKEND_SPECS.items() if b.precisions is None)
        raise ConfigError(
            "precision",
            precision,
            f"backend={cfg.name} does not run it (supports {', '.join(spec.precisions)})",
            f"pick backend={others} for precision={precision}, or another precision",
        )
    hpz = getattr(cfg, "zero_hpz_partition_size", 1)
    if hpz >= 1 and world_size % hpz:
        raise ConfigError(
            "backend.zero_hpz_partition_size",
            hpz,
            f"does not divide the world size {world_size} (nproc_per_node x nnodes)",
            "set backend.zero_hpz_partition_size to the ranks per node (nproc_per_node), or 1",
        )
    check_nvme(cfg, device, path_here=paths_here)
    if getattr(cfg, "deepcompile", False) and device != "cuda":
        raise ConfigError(
            "backend.deepcompile", True, "DeepCompile runs on CUDA only", "set backend.deepcompile=false"
        )
    if getattr(cfg, "deepcompile", False) and compile_blocks:
        raise ConfigError(
            "compile",
            True,
            "backend.deepcompile=true compiles the whole model itself",
            "set compile=false (DeepCompile) or backend.deepcompile=false (per-block compile)",
        )
    return spec.option_check(cfg)
