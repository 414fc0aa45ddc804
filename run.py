"""Hydra entry point: ``python run.py [overrides]`` or ``python run.py -m [sweep overrides]``.

A thin wrapper: the config is converted once to the typed ``RunConfig`` and handed
to :func:`flopsweep.job.run_job`, which validates it, launches the ranks and writes
``metrics.json`` in the Hydra job directory.
"""

from __future__ import annotations

import os
import secrets
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from flopsweep.config import register_configs
from flopsweep.job import JobInfo, run_job

# Unique per sweep process, so that two sweeps started in the same second never
# share a directory (cached like ${now:}, so every job of a sweep agrees).
_UID = f"{os.getpid()}-{secrets.token_hex(2)}"
OmegaConf.register_new_resolver("flopsweep_uid", lambda: _UID, use_cache=True, replace=True)
register_configs()

EXIT_CODES = {"ok": 0, "oom": 1, "error": 1, "invalid": 2}


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    hc = HydraConfig.get()
    info = JobInfo(
        job_dir=hc.runtime.output_dir, overrides=list(hc.overrides.task), job_num=hc.job.get("num")
    )
    record = run_job(OmegaConf.to_object(cfg), info)
    status = record["status"]
    if hc.mode != RunMode.MULTIRUN and status != "ok":
        # A single run reports failure through its exit status; a sweep goes on.
        print(f"flopsweep: {status}: {record['error']['message']}", file=sys.stderr)
        sys.exit(EXIT_CODES[status])
    return {"status": status, "tflops_per_device": record["metrics"]["tflops_per_device"]}


if __name__ == "__main__":
    main()
