"""Start a run's ranks as fresh processes and collect what they report.

Locally, ``torch.multiprocessing.start_processes`` (spawn) starts
``nproc_per_node`` workers, even for one rank, so that no CUDA, NCCL or allocator
state leaks from one sweep job into the next. This process watches them: as soon
as one rank exits non-zero, dies by a signal or writes an error file, or the job
outlives ``timeout_s``, every worker (and anything it started) is stopped. The
outcome names the cause, its rank and its phase (:mod:`flopsweep.outcome`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import multiprocessing.connection
import os
import random
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import resource_tracker
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep.models.hf_files import validated_bytes
from flopsweep.outcome import Outcome, collect
from flopsweep.safe_folders import own_folder
from flopsweep.safe_read import RecordError, read_regular
from flopsweep.signals import children_ignore_interrupt, signals_deferred
from flopsweep.worker import RankSpec, spawned_main

if TYPE_CHECKING:
    from flopsweep.layout import Plan

SCRATCH = ".flopsweep"


class Terminated(BaseException):
    """SIGTERM reached the job process (``kill``, ``timeout``, a scheduler); like
    KeyboardInterrupt it unwinds the launch, which stops every worker and records the run."""


def raise_terminated(signum: int, frame: Any) -> None:
    """A SIGTERM handler that turns the signal into :class:`Terminated`."""
    raise Terminated(f"signal {signal.Signals(signum).name}")


LOWEST_PORT = 20000
"""The lowest rendezvous port drawn (submitit's ``TorchDistributedEnvironment`` draws from 20000 up)."""
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""Linux's range of ephemeral ports (``32768 60999`` by default): the kernel hands these to every
outgoing connection, so a rendezvous port drawn from it can be taken between the draw and the bind
by any other process's connection (two test suites side by side lost one run in ~1,400 to it)."""


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int:
    """The lowest ephemeral port of this machine (``ip_local_port_range``, a bounded read), 32768
    when it cannot be read or makes no sense."""
    try:
        low = int(read_regular(path, 256).split()[0])
    except (RecordError, ValueError, IndexError):
        return 32768
    return low if LOWEST_PORT + 1000 <= low <= 65535 else 32768


def rendezvous_port(seed: int | str | None = None) -> int:
    """A TCP port for the rendezvous, drawn below the ephemeral range (:data:`EPHEMERAL_RANGE`), so
    that no other process's outgoing connection takes it. ``seed`` (a Slurm job id): every task of
    the job draws the same port, unchecked (the tasks cannot compare). Without it, the port is one
    that 127.0.0.1 could bind a moment ago (at most 64 draws, then any free port the kernel gives)."""
    high = ephemeral_low() - 1
    rng = random.Random(seed)
    if seed is not None:
        return rng.randint(LOWEST_PORT, high)
    for _ in range(64):
        port = rng.randint(LOWEST_PORT, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


STORE_GRACE_S = 300
"""The agent store outlives the job's ``timeout_s`` by this much, as the ranks' collectives do."""


def agent_store(timeout_s: float) -> Any:
    """The rendezvous store of one local launch, served by this process as torchrun's agent serves
    its workers' (``TORCHELASTIC_USE_AGENT_STORE``): a ``TCPStore`` bound to a port the kernel picks
    (port 0) and held open until the ranks are done, so no other process can take the port between
    choosing and binding it. Rank 0 connects as a client like every other rank
    (``torch.distributed.rendezvous._create_c10d_store``). Its ``.port`` is the ``MASTER_PORT``."""
    import datetime

    from torch.distributed import TCPStore

    timeout = datetime.timedelta(seconds=timeout_s + STORE_GRACE_S)
    return TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timeout)


def launch_local(plan: Plan, job_dir: Path) -> Outcome:
    """Run ``plan.cfg`` on ``plan.nproc_per_node`` spawned ranks and wait for them; each rank
    gets the plan's layout. The rendezvous store is this process's (:func:`agent_store`).

    Args:
        plan: a validated plan (:func:`flopsweep.plan.resolve`) of one node.
        job_dir: the Hydra job directory; tracebacks land here, the scratch files
            in ``job_dir/.flopsweep``.

    Returns:
        The :class:`Outcome`; no worker process is left running when it returns,
        also when this raises (KeyboardInterrupt)."""
    cfg, nproc = plan.cfg, plan.nproc_per_node
    job_dir = Path(job_dir).absolute()  # the ranks start in a folder of their own (isolated_start)
    scratch = prepare_scratch(job_dir)
    store = agent_store(cfg.timeout_s)
    try:
        ran = spawn_ranks(plan, job_dir, scratch, master_addr="127.0.0.1", master_port=store.port)
    finally:
        del store  # closes the listening socket
    timeout_s = cfg.timeout_s if ran.timed_out else None
    return collect(scratch, ran.ended, nproc, timeout_s=timeout_s, torch_errors=ran.torch_errors)


_ACROSS_NODES: contextvars.ContextVar[Callable[[Plan, Path], Outcome] | None] = contextvars.ContextVar(
    "flopsweep_across_nodes", default=None
)
"""Set by :func:`launching_across_nodes` (node 0's agent of a multi-node job): what :func:`launch` calls."""


def launch(plan: Plan, job_dir: Path) -> Outcome:
    """Run ``plan`` in ``job_dir`` on every node of the job and wait for it: :func:`launch_local` on
    one machine; inside :func:`launching_across_nodes`, the function given there (node 0's agent of a
    multi-node job, :meth:`flopsweep.lockstep.NodeGroup.run`: every node's agent spawns its ranks). The
    searches' probe runs (:func:`flopsweep.sizesearch.run_probe`) and the measured run start here."""
    across = _ACROSS_NODES.get()
    return across(plan, job_dir) if across is not None else launch_local(plan, job_dir)


@contextlib.contextmanager
def launching_across_nodes(run: Callable[[Plan, Path], Outcome]) -> Iterator[None]:
    """Within: :func:`launch` calls ``run(plan, job_dir)`` instead of :func:`launch_local`."""
    token = _ACROSS_NODES.set(run)
    try:
        yield
    finally:
        _ACROSS_NODES.reset(token)


@dataclass(frozen=True)
class Ran:
    """How one node's ranks ended (:func:`spawn_ranks`); ranks are this node's local ranks."""

    ended: dict[int, int]
    """Exit code by local rank of the ranks that ended on their own (see :func:`supervise`)."""
    timed_out: bool
    why: str | None = None
    """Why ``stop`` ended the wait (another node failed, SIGTERM), else None."""
    torch_errors: dict[int, str] = dataclasses.field(default_factory=dict)


def spawn_ranks(
    plan: Plan,
    job_dir: Path,
    scratch: Path,
    *,
    master_addr: str,
    master_port: int,
    node_rank: int = 0,
    stop: Callable[[], str | None] | None = None,
) -> Ran:
    """Spawn this node's ``plan.nproc_per_node`` ranks (global ranks ``node_rank * nproc_per_node +
    local_rank``) that join the store served at ``master_addr:master_port``, supervise them
    (:func:`supervise`, with ``stop`` looked at every poll), then stop whatever still runs. The
    one supervisor of every launch: the local one and each Slurm node agent
    (:mod:`flopsweep.node_agent`)."""
    import torch.multiprocessing as mp

    cfg, nproc = plan.cfg, plan.nproc_per_node
    spec = RankSpec(
        cfg=cfg,
        job_dir=str(job_dir),
        scratch_dir=str(scratch),
        master_addr=master_addr,
        master_port=master_port,
        nproc_per_node=nproc,
        node_rank=node_rank,
        layout=plan.layout,
        verbose=logging.getLogger("flopsweep").isEnabledFor(logging.DEBUG),
        agent_store=True,
        parent_pid=os.getpid(),  # each rank ends when this process dies (signals.end_with_parent)
        model_file=validated_bytes(cfg.model),
    )
    # Each rank starts with SIGINT blocked, then ignores it: a Ctrl-C to the process group stops this process,
    # which stops the ranks and records the run; the ranks print nothing (signals.children_ignore_interrupt).
    why, context, private, kept = None, None, None, {}
    try:
        with isolated_start(cpu=cfg.device == "cpu") as private:
            # The resource tracker starts first, isolated as the ranks are (its own `python -c` would put the
            # working folder on sys.path): its start unblocks SIGINT (multiprocessing's ensure_running), which
            # let a rank started after it take the signal.
            resource_tracker.ensure_running()
            # A signal while the ranks start is held until they all have (children_ignore_interrupt): raised
            # at once, mid-start, it had left the ranks started so far running, with no context to stop.
            with children_ignore_interrupt():
                context = mp.start_processes(
                    spawned_main, (spec,), nprocs=nproc, join=False, start_method="spawn"
                )
        ended, timed_out, why = supervise(context.processes, scratch, cfg.timeout_s, stop=stop)
    finally:
        if context is not None:
            stop_all(context.processes)
            kept = take_torch_errors(context.error_files)
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
        first = node_rank * nproc
        remove_deepspeed_shm(master_addr, master_port, range(first, first + nproc))
    return Ran(ended, timed_out, why, kept)


SAFE_PATH_ENV = "PYTHONSAFEPATH"
"""Set to 1 in every rank's environment (and so in the processes a rank starts): Python 3.11+ then
puts no folder of its own choosing (the working directory of ``-c``, a script's folder) on
``sys.path``, as ``python -P`` does."""


CPU_WAIT_POLICY = ("OMP_WAIT_POLICY", "PASSIVE")
"""Set in a CPU rank's environment unless the user set it: OpenMP's idle threads then sleep rather than
spin. On shared cores the spinning starved the ranks: ``model=llama-tiny device=cpu`` (one rank, two
threads) at load 5 on 2 cores took 5.1 s a step and 64 s in all, 0.83 s and 30 s with this (2026-12-06)."""


@contextlib.contextmanager
def isolated_start(*, cpu: bool = False) -> Iterator[Path]:
    """While ranks are started: this process works in a new private folder (``tempfile.mkdtemp``:
    mode 0700, empty, an unpredictable name), has ``PYTHONSAFEPATH=1`` (:data:`SAFE_PATH_ENV`) in its
    environment (and for ``cpu`` ranks :data:`CPU_WAIT_POLICY`, unless set), no ``''`` (the working
    directory) on ``sys.path``, and its ``__main__`` no ``__file__`` nor ``__spec__``, by which spawn
    would run ``run.py`` again in each rank (``__mp_main__``: Hydra and the checks, 0.34-0.46 s of CPU
    a rank, paired, load 3-4 on 2 cores, 2026-12-06), which needs only :func:`flopsweep.worker.spawned_main`;
    all are restored on exit. Yields the private folder, which the caller removes once the ranks have ended.

    ``multiprocessing``'s spawn starts each rank, and the resource tracker with the first one, as
    ``python -c ...`` in this process's working directory and environment, and a rank then takes
    this process's ``sys.path`` and working directory. So a ``multiprocessing/`` package, a
    ``torch.py`` or a ``flopsweep/`` planted in the folder a sweep is started from would run in
    every rank (the folder comes first on the path of ``-c``). Here no such folder is on their path:
    the rank's working directory is the private folder, and its path is the one this process
    imported from (``run.py``'s folder, or the console script's), never the working directory."""
    private = Path(tempfile.mkdtemp(prefix="flopsweep-ranks-"))
    here = os.open(".", os.O_RDONLY | os.O_CLOEXEC)  # the way back, even to a folder renamed meanwhile
    env = {SAFE_PATH_ENV: "1"}
    if cpu and CPU_WAIT_POLICY[0] not in os.environ:
        env[CPU_WAIT_POLICY[0]] = CPU_WAIT_POLICY[1]
    saved_env, saved_path = {key: os.environ.get(key) for key in env}, list(sys.path)
    main = vars(sys.modules["__main__"])
    saved_main = {key: main[key] for key in ("__file__", "__spec__") if key in main}
    main.pop("__file__", None)
    main["__spec__"] = None
    try:
        os.environ.update(env)
        sys.path[:] = [entry for entry in sys.path if entry != ""]
        os.chdir(private)
        yield private
    finally:
        os.fchdir(here)
        os.close(here)
        sys.path[:] = saved_path
        main.update(saved_main)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


TORCH_ERROR_BYTES = 2**20
"""At most this much of a torch error file is read (a traceback is a few KiB)."""


def take_torch_errors(error_files: list[str]) -> dict[int, str]:
    """The tracebacks that ``torch.multiprocessing`` kept, by rank, each file removed once read.

    ``start_processes`` gives each rank a file ``<tmp>/pytorch-errorfile-*.pickle`` (not
    torchelastic's ``TORCHELASTIC_ERROR_FILE``: these workers are not started by torchelastic)
    and writes the rank's traceback there when an exception escapes the rank, which happens only
    when the rank could not write its own error file (its directory became read-only or full).
    Nobody calls ``join`` here, which would read and keep them, so the files would stay in /tmp.

    The file holds one pickled str. It is read as text, the string taken from the opcode list of
    ``pickletools.genops``: nothing is unpickled."""
    import pickletools  # lists opcodes and their arguments; never builds an object

    texts = {}
    for rank, name in enumerate(error_files):
        path = Path(name)
        try:
            data = path.read_bytes()[:TORCH_ERROR_BYTES]
        except OSError:  # the usual case: the rank raised nothing, torch wrote no file
            continue
        finally:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        try:
            ops = pickletools.genops(data)
            strings = [arg for op, arg, _ in ops if "UNICODE" in op.name and isinstance(arg, str)]
        except ValueError:  # cut short, or not a pickle: its bytes as text
            strings = []
        texts[rank] = "".join(strings) or data.decode("utf-8", "backslashreplace")
    return texts


def supervise(
    processes: list[Any],
    scratch: Path,
    timeout_s: float,
    poll_s: float = 0.2,
    stop: Callable[[], str | None] | None = None,
) -> tuple[dict[int, int], bool, str | None]:
    """Wait until every rank exits 0, or one exits non-zero or writes an error file (in the
    scratch folder, which a multi-node job's agents share), or ``stop()`` gives a reason, or
    ``timeout_s`` seconds pass.

    Returns:
        (exit code by rank of the ranks that had ended on their own by then; a
        negative code is the signal that killed the rank), True when the
        time ran out, and the reason ``stop`` gave (else None)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ended = {rank: p.exitcode for rank, p in enumerate(processes) if p.exitcode is not None}
        if len(ended) == len(processes) or any(ended.values()) or any(scratch.glob("rank*_error.json")):
            return ended, False, None
        if time.monotonic() >= deadline:
            return ended, True, None
        if stop is not None and (why := stop()):
            return ended, False, why
        multiprocessing.connection.wait([p.sentinel for p in processes if p.exitcode is None], timeout=poll_s)


def prepare_scratch(job_dir: Path) -> Path:
    """An empty ``job_dir/.flopsweep`` of this run (mode 0700) for the ranks' phase, error and result
    files: a folder there is emptied, and a link or file planted at that name is removed (never
    followed: :func:`flopsweep.safe_folders.own_folder`), so no rank writes or removes anything elsewhere.

    Raises:
        RecordUnwritable: when it cannot be made (one line naming the path)."""
    Path(job_dir).mkdir(parents=True, exist_ok=True)
    return own_folder(Path(job_dir) / SCRATCH, fresh=True)


def stop_all(processes: list[Any], grace_s: float = 5.0, poll_s: float = 0.1) -> None:
    """SIGTERM every live worker and every process it started, SIGKILL what is left after ``grace_s``
    seconds, and reap the workers: at most about ``2 * grace_s`` seconds.

    SIGINT and SIGTERM are held meanwhile (:func:`flopsweep.signals.signals_deferred`) and raised once
    every worker is reaped; one that comes cuts the grace short (SIGKILL at once). Was: a second Ctrl-C
    (or SIGTERM) while a rank tore down (``destroy_process_group``, DeepSpeed's threads; a rank ignores
    SIGINT) raised inside this function and left that rank running: the run was recorded and its line
    said, then the job process waited on the rank at its exit (``multiprocessing``'s ``atexit`` join)
    with both signals ignored (:func:`flopsweep.signals.work_done`): only SIGKILL ended it."""
    import psutil

    with signals_deferred() as held:
        tree = []
        for p in processes:
            if p.exitcode is None:
                try:
                    root = psutil.Process(p.pid)
                    tree += [root, *root.children(recursive=True)]
                except psutil.NoSuchProcess:
                    pass
        for proc in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.terminate()
        alive, deadline = tree, time.monotonic() + grace_s
        while alive and not held and time.monotonic() < deadline:  # a signal held: no more grace
            _, alive = psutil.wait_procs(alive, timeout=poll_s)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(alive, timeout=grace_s)
        for p in processes:
            p.join(grace_s)


SHM_DIR = Path("/dev/shm")
"""Where Linux's ``shm_open`` keeps its named segments (glibc maps a name to a file here)."""


def deepspeed_shm_names(master_addr: str, master_port: int, ranks: range) -> list[str]:
    """The POSIX shared-memory names DeepSpeed's CPU all-reduce (``ShareMemCommBuilder``, on the CPU
    accelerator when every rank is on one host) creates, one per rank of 67 MB:
    ``deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_<MASTER_PORT>_<rank>``
    (``deepspeed/ops/csrc/cpu/comm/shm.cpp``, ``shm_initialize``). DeepSpeed 0.19 never unlinks them."""
    return [f"deepspeed_allreduce_buffer_{os.getuid()}_{master_addr}_{master_port}_{r}" for r in ranks]


def remove_deepspeed_shm(master_addr: str, master_port: int, ranks: range, shm_dir: Path = SHM_DIR) -> int:
    """Unlink this launch's DeepSpeed all-reduce segments (:func:`deepspeed_shm_names`) once its
    ranks are stopped; otherwise every CPU DeepSpeed run leaves 67 MB per rank in ``/dev/shm``
    (memory, not disk) until the machine reboots. Only a regular file this user owns, of exactly
    these names, is removed: the port is this launch's store's, held until its ranks ended. Returns
    how many were removed; a name that is absent or not removable is left alone."""
    removed = 0
    for name in deepspeed_shm_names(master_addr, master_port, ranks):
        path = shm_dir / name
        try:
            st = path.lstat()
            if st.st_uid == os.getuid() and stat.S_ISREG(st.st_mode):
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed
