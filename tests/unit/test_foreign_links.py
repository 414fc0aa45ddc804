"""Another user's symbolic link in the middle of an output folder's path (a fresh user's trial, session 24):
``hydra.sweep.dir=/tmp/x/link/sub`` with ``link`` planted by another user was followed in silence, while a
link as the last part was refused. Now such a link anywhere on the path is refused before anything is made
(the command line, the sweep's and run's callbacks, the lock), and again where each job makes its folders
(:func:`flopsweep.safe_folders.job_folder`, ``own_folder``, ``private_folder``, the job's log); a link of this
user's (or root's) in the middle, the usual ``outputs -> /scratch/me/outputs``, stays allowed.

A link of another user is made here as root does (``os.lchown`` of a link this test made); without root
the tests that need one are skipped, saying why."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from flopsweep.files import RecordUnwritable
from flopsweep.links import foreign_link
from flopsweep.safe_folders import job_folder, own_folder, private_folder

OTHER_UID = 65534
"""``nobody``: the owner of the planted link (neither this user nor root)."""


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """``(link, target)``: ``tmp_path/shared/link -> tmp_path/theirs``, the link owned by
    :data:`OTHER_UID`; skipped when this process cannot give a link away (only root can)."""
    target, shared = tmp_path / "theirs", tmp_path / "shared"
    target.mkdir()
    shared.mkdir()
    link = shared / "link"
    link.symlink_to(target)
    try:
        os.lchown(link, OTHER_UID, -1)
    except PermissionError:
        pytest.skip("needs root: only root can make a symbolic link owned by another user (os.lchown)")
    assert os.lstat(link).st_uid == OTHER_UID
    return link, target


def _untouched(target: Path) -> None:
    assert list(target.iterdir()) == [], "something was written through the other user's link"


def test_the_first_link_of_another_user_on_the_path_is_found_with_its_owner(tmp_path: Path) -> None:
    link, target = _planted(tmp_path)
    (tmp_path / "mine").symlink_to(tmp_path / "shared")  # this user's link, above the planted one
    assert foreign_link(link / "sub" / "0") == (link, OTHER_UID)
    assert foreign_link(link) == (link, OTHER_UID)  # the last part too
    assert foreign_link(tmp_path / "mine" / "link" / "sub") == (link, OTHER_UID)  # named by its real place
    assert foreign_link(tmp_path / "shared" / "x" / ".." / "link" / "sub") is not None  # `..` not folded
    assert foreign_link(tmp_path / "shared" / "missing" / "sub") is None
    assert foreign_link(tmp_path / "mine" / "sub") is None


def test_the_walk_looks_at_each_component_at_most_once_and_lists_no_folder(
    tmp_path: Path, monkeypatch
) -> None:
    """Bounded: one ``os.lstat`` per component of the path at most (here a deep missing tail), and no
    ``os.scandir``/``os.listdir`` (a folder of a million entries costs nothing)."""
    seen: list[str] = []
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda p, *a, **k: seen.append(str(p)) or real_lstat(p, *a, **k))
    monkeypatch.setattr(os, "scandir", None)
    monkeypatch.setattr(os, "listdir", None)
    path = tmp_path.joinpath(*(["d"] * 50), "..", "e")
    assert foreign_link(path) is None
    assert 0 < len(seen) <= len(path.parts) - 1 and len(set(seen)) == len(seen)


def test_a_relative_path_is_walked_from_the_current_folder(tmp_path: Path, monkeypatch) -> None:
    link, _ = _planted(tmp_path)
    monkeypatch.chdir(link.parent)
    assert foreign_link("link/sub") == (link, OTHER_UID)
    assert foreign_link("elsewhere/sub") is None


@pytest.mark.parametrize("key", ["hydra.sweep.dir", "hydra.run.dir"])
def test_the_command_line_refuses_a_folder_through_another_user_s_link(tmp_path: Path, key: str) -> None:
    """Before Hydra starts (``command_line_checks.output_dir_problem``): one line naming the key, the
    value, the link, its owner and the fix; nothing is made through the link."""
    from run import output_dir_problem

    link, target = _planted(tmp_path)
    value = f"{link}/sub"
    line = output_dir_problem([f"{key}={value}"])
    owner = f"symbolic link of another user (uid {OTHER_UID}, nobody)"
    why = "never followed: what is written there would go where that user points it"
    fix = f"choose another folder (one no other user's link leads through), or have {link} removed"
    assert line == f"Invalid config: {key}={value}: {link} is a {owner}; {why}. Fix: {fix}."
    assert "\n" not in line
    _untouched(target)


@pytest.mark.parametrize("key", ["hydra.sweep.dir", "hydra.run.dir"])
def test_the_callback_refuses_a_configured_folder_with_exit_2_and_no_lock(
    tmp_path: Path, key: str, capsys
) -> None:
    """A folder set by a config file or Hydra's default (``outputs/`` planted by another user), which the
    command line did not name: the sweep's and run's callback refuse it (exit 2, one line) before the lock
    or any folder is made."""
    from flopsweep.callbacks import _lock_or_exit

    link, target = _planted(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        _lock_or_exit(link / "multirun" / "2026-01-01", key)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"flopsweep: Invalid config: {key}={link}/multirun/")
    assert f"{link} is a symbolic link of another user (uid {OTHER_UID}" in err
    _untouched(target)


def test_the_lock_refuses_a_folder_through_another_user_s_link(tmp_path: Path) -> None:
    from flopsweep.locks import SweepBusy, lock_sweep_dir

    link, target = _planted(tmp_path)
    with pytest.raises(SweepBusy, match=f"{link} is a symbolic link of another user"):
        lock_sweep_dir(link / "sweep")
    _untouched(target)


def test_a_job_refuses_a_link_planted_after_the_sweep_started(tmp_path: Path) -> None:
    """The checks before launch passed (no link then); the link planted since is refused where each job
    makes its folders, one line naming it and its owner, and nothing is made through it."""
    link, target = _planted(tmp_path)
    for make in (job_folder, private_folder, own_folder):
        with pytest.raises(RecordUnwritable) as caught:
            make(link / "sweep" / "0" if make is not own_folder else link / "0")
        assert f"{link} is a symbolic link of another user (uid {OTHER_UID}" in str(caught.value)
        assert caught.value.fix.startswith("choose another folder")
    with pytest.raises(RecordUnwritable):
        own_folder(link / "scratch", fresh=True)  # a scratch folder's contents are never removed there
    _untouched(target)


def test_the_job_log_goes_to_the_console_only_below_another_user_s_link(tmp_path: Path, capsys) -> None:
    from flopsweep.hydrafiles import JobLogHandler

    link, target = _planted(tmp_path)
    (target / "0").mkdir()  # the job's folder exists there (the other user made it)
    handler = JobLogHandler(str(link / "0" / "run.log"))
    handler.emit(logging.makeLogRecord({"msg": "a log line"}))
    handler.close()
    assert f"{link} is a symbolic link of another user" in capsys.readouterr().err
    assert list((target / "0").iterdir()) == []


def test_the_other_output_paths_refuse_another_user_s_link(tmp_path: Path, monkeypatch) -> None:
    """The analysis's ``--output`` (and ``--plot``, ``--notebook``: one check), the profile's trace folder,
    the probe cache (not kept, with a warning) and DeepSpeed's built ops (refused)."""
    from analysis.output import OutputError, check_output
    from flopsweep.compute_probe import CACHE_ENV, cache_folder
    from flopsweep.profile import trace_dir_problem

    link, target = _planted(tmp_path)
    with pytest.raises(
        OutputError, match=f"^--output {link}/report.md: {link} is a symbolic link of another"
    ):
        check_output(link / "report.md", [], "--output")
    assert trace_dir_problem(link / "0" / "profile").endswith("so no trace is written there")
    monkeypatch.setenv(CACHE_ENV, str(link / "probes"))
    with pytest.warns(UserWarning, match=f"{link} is a symbolic link of another user"):
        assert cache_folder("cpu") is None
    _untouched(target)


def test_the_deepspeed_ops_folder_refuses_another_user_s_link(tmp_path: Path) -> None:
    from flopsweep.deepspeed_backend import extensions_dir

    link, target = _planted(tmp_path)
    with pytest.raises(RecordUnwritable, match="symbolic link of another user"):
        extensions_dir({"XDG_CACHE_HOME": str(link / "cache")})
    _untouched(target)


def test_this_user_s_own_link_in_the_middle_is_followed(tmp_path: Path) -> None:
    """``outputs -> /scratch/me/outputs``: the usual HPC layout, allowed everywhere a folder is made."""
    from flopsweep.hydrafiles import output_folder_problem
    from flopsweep.locks import lock_sweep_dir

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "outputs").symlink_to(scratch)
    sweep = tmp_path / "outputs" / "sweep"
    assert foreign_link(sweep / "0") is None
    assert output_folder_problem("hydra.sweep.dir", str(sweep)) is None
    lock_sweep_dir(sweep).close()
    assert job_folder(sweep / "0") == sweep / "0" and (scratch / "sweep" / "0").is_dir()
    assert private_folder(sweep / ".submitit").is_dir() and (scratch / "sweep" / ".submitit").is_dir()
    line = output_folder_problem("hydra.sweep.dir", str(tmp_path / "outputs"))  # the last part: refused
    assert line is not None and "is a symbolic link" in line


def _own_link_through(tmp_path: Path, name: str = "own2") -> tuple[Path, Path, Path]:
    """``(own, link, target)``: ``tmp_path/own2 -> tmp_path/shared/link/sub``, ``own2`` this user's (root
    here) and ``link`` another user's, as a fresh user's trial planted them (session 24)."""
    link, target = _planted(tmp_path)
    (target / "sub").mkdir()
    own = tmp_path / name
    own.symlink_to(link / "sub")
    assert os.lstat(own).st_uid in (os.geteuid(), 0)
    return own, link, target


def test_a_trusted_link_s_target_is_walked_for_another_user_s_link(tmp_path: Path) -> None:
    """``own2 -> shared/link/sub``: this user's (or root's) link is followed, and the other user's
    link its target passes through is found, absolute or relative target, through a chain of trusted
    links; the run's folder and the analysis's ``--output`` there are refused, nothing written."""
    from analysis.output import OutputError, check_output
    from flopsweep.hydrafiles import output_folder_problem

    own, link, target = _own_link_through(tmp_path)
    assert foreign_link(own / "z") == (link, OTHER_UID)  # the link named by its real place
    assert foreign_link(own) == (link, OTHER_UID)  # a trusted link as the last part: its target walked
    (tmp_path / "rel").symlink_to("shared/link/sub")  # relative: read from the link's folder
    (tmp_path / "chain").symlink_to("rel")
    assert foreign_link(tmp_path / "chain" / "z" / "0") == (link, OTHER_UID)
    (tmp_path / "up").symlink_to("shared/x/..")  # the target's ``..`` taken where it stands
    assert foreign_link(tmp_path / "up" / "link" / "z") == (link, OTHER_UID)
    assert foreign_link(tmp_path / "up" / "z") is None
    line = output_folder_problem("hydra.run.dir", f"{own}/z")
    assert line is not None and line.startswith(
        f"Invalid config: hydra.run.dir={own}/z: {link} is a symbolic"
    )
    with pytest.raises(OutputError, match=f"^--output {own}/x.csv: {link} is a symbolic link of another"):
        check_output(own / "x.csv", [], "--output")
    with pytest.raises(RecordUnwritable, match=f"{link} is a symbolic link of another user"):
        job_folder(own / "z" / "0")
    assert list((target / "sub").iterdir()) == []


def test_a_link_loop_is_unreachable_and_the_hops_are_bounded(tmp_path: Path, monkeypatch) -> None:
    """More than 40 links (the kernel's ``MAXSYMLINKS``) is a path the kernel refuses (``ELOOP``) and
    makes nothing below: None, after at most 41 ``os.lstat`` of the links; 40 are followed, and another
    user's link behind them is found."""
    import errno

    from flopsweep.links import MAX_LINK_HOPS

    link, _ = _planted(tmp_path)
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    seen: list[str] = []
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda p, *a, **k: seen.append(str(p)) or real_lstat(p, *a, **k))
    assert foreign_link(tmp_path / "a" / "z") is None
    assert len(seen) == len(tmp_path.parts) - 1 + MAX_LINK_HOPS + 1
    monkeypatch.setattr(os, "lstat", real_lstat)

    def chain(name: str, hops: int) -> Path:
        """``name0 -> name1 -> ... -> shared``: ``hops`` links of this user's."""
        for n in range(hops):
            (tmp_path / f"{name}{n}").symlink_to(f"{name}{n + 1}" if n + 1 < hops else "shared")
        return tmp_path / f"{name}0"

    kept, over = chain("k", MAX_LINK_HOPS), chain("o", MAX_LINK_HOPS + 1)
    assert os.path.isdir(kept)  # the kernel follows 40
    with pytest.raises(OSError) as caught:
        os.stat(over)
    assert caught.value.errno == errno.ELOOP  # and no more: nothing below is reached
    assert foreign_link(kept / "link" / "z") == (link, OTHER_UID)
    assert foreign_link(over / "link" / "z") is None


def test_an_interpolated_subdir_through_another_user_s_link_is_refused_at_the_sweep_start(
    tmp_path: Path, hydra_compose, monkeypatch, capsys
) -> None:
    """``SUB=../shared/link/x ... 'hydra.sweep.subdir=${oc.env:SUB}'``: the command line's check sees no
    ``..``; the sweep's start resolves the subdir for job 0 and refuses its folder, exit 2, one line,
    before the lock or any folder is made. The default subdir in a clean folder passes."""
    from flopsweep.callbacks import SweepSummary, job_folders_problem

    link, target = _planted(tmp_path)
    sweep = tmp_path / "sweep"
    monkeypatch.setenv("SUB", "../shared/link/x")
    config = hydra_compose.config(
        [f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${oc.env:SUB}"], hydra=True
    )
    with pytest.raises(SystemExit) as exit_:
        SweepSummary().on_multirun_start(config)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    shown = f"hydra.sweep.subdir=${{oc.env:SUB}} (job 0's folder {sweep}/../shared/link/x)"
    assert err == (
        f"flopsweep: Invalid config: {shown}: {link} is a symbolic link of another user (uid {OTHER_UID}, "
        "nobody); never followed: what is written there would go where that user points it. Fix: choose "
        f"another folder (one no other user's link leads through), or have {link} removed\n"
    )
    assert not os.path.lexists(sweep) and list(target.iterdir()) == []
    assert config.hydra.sweep.subdir == "../shared/link/x"  # the config itself is left as it was
    assert job_folders_problem(hydra_compose.config([f"hydra.sweep.dir={sweep}"], hydra=True)) is None
