"""Hydra entry point: ``python run.py [overrides]`` or ``python run.py -m [sweep overrides]``.

A thin wrapper: the config is converted once to the typed ``RunConfig`` and handed
to :func:`flopsweep.job.run_job`, which validates it, launches the ranks and writes
``metrics.json`` in the Hydra job directory.

Exit status: a single run exits 0 when ok (or skipped by ``resume=true``), 1 on
``oom``/``error``, 2 on ``invalid``. A sweep exits 0 when every job was recorded,
whatever the statuses; 1 when the sweep itself broke (a composition error, a
record it refused to overwrite) or ``fail_fast=true`` stopped it.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from flopsweep.callbacks import RecordRefused, SweepStopped
from flopsweep.config import register_configs
from flopsweep.job import JobInfo, run_job
from flopsweep.launch import Terminated, raise_terminated
from flopsweep.metrics import RecordExistsError

# Unique per sweep process, so that two sweeps started in the same second never
# share a directory (cached like ${now:}, so every job of a sweep agrees).
_UID = f"{os.getpid()}-{secrets.token_hex(2)}"
OmegaConf.register_new_resolver("flopsweep_uid", lambda: _UID, use_cache=True, replace=True)
# fail_fast: one job per sweeper batch, so that the sweep stops right after the job that failed.
OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: 1 if fail_fast else None, replace=True)
register_configs()

EXIT_CODES = {"ok": 0, "oom": 1, "error": 1, "invalid": 2}


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    hc = HydraConfig.get()
    info = JobInfo(
        job_dir=hc.runtime.output_dir, overrides=list(hc.overrides.task), job_num=hc.job.get("num")
    )
    run_cfg = OmegaConf.to_object(cfg)
    try:
        record = run_job(run_cfg, info)
    except RecordExistsError as exc:
        raise RecordRefused(str(exc)) from None
    status = record["status"]
    if status != "ok":
        message = f"flopsweep: {status}: {record['error']['message']}"
        if hc.mode != RunMode.MULTIRUN:
            # A single run reports failure through its exit status; a sweep goes on.
            print(message, file=sys.stderr)
            sys.exit(EXIT_CODES[status])
        if run_cfg.fail_fast:
            raise SweepStopped(f"{message} [recorded in {info.job_dir}]; fail_fast=true stopped the sweep")
    return {"status": status, "tflops_per_device": record["metrics"]["tflops_per_device"]}


if __name__ == "__main__":
    if not os.environ.get("SUBMITIT_EXECUTOR"):  # a Slurm task handles SIGTERM itself
        signal.signal(signal.SIGTERM, raise_terminated)
    try:
        main()
    except (KeyboardInterrupt, Terminated) as exc:
        # The job was recorded as an error; a stack trace would only hide that line.
        print(
            f"flopsweep: interrupted ({type(exc).__name__}); the run was recorded as an error",
            file=sys.stderr,
        )
        sys.exit(143 if isinstance(exc, Terminated) else 130)
