"""The cache folder a fix suggests, and the cache folders a run makes, are this user's own
(docs/reliability-14.md rows 1030 and 1031).

Session 42's refusal of an unusable home (row 1000) suggested ``XDG_CACHE_HOME=$TMPDIR/flopsweep-cache-<uid>``
without looking at what sat there: a link or a folder another user planted at that name in a shared ``/tmp``
received the caches typed back (DeepSpeed's ops built there run as this user's code). A folder of another
user is made here as root does (``os.chown``); without root that test is skipped, saying why.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from flopsweep.cache_home import cache_problem, make_cache_folder, not_ours
from flopsweep.config import ConfigError
from flopsweep.files import RecordUnwritable

OTHER_UID = 65534
"""``nobody``: the owner of a planted folder (neither this user nor root)."""


def _fix_env(error: ConfigError) -> dict[str, str]:
    """The variable the fix sets, as typed back: ``set NAME=VALUE (...)``."""
    name, _, value = error.fix.removeprefix("set ").split(" ")[0].partition("=")
    return {name: value}


def _refusal(env: dict[str, str]) -> ConfigError | None:
    return cache_problem(backend="deepspeed", device="cpu", compile_blocks=False, environ=env)


@pytest.fixture
def shared_tmp(tmp_path: Path, monkeypatch) -> Path:
    """A temporary folder of its own (``tempfile.gettempdir()``), and a current folder where no ``.cache``
    can be made (``/proc``), so that the fix suggests ``<tmp>/flopsweep-cache-<uid>``."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.chdir("/proc")
    return tmp


def test_a_planted_link_at_the_suggested_folder_is_skipped_and_the_fix_is_accepted(
    shared_tmp: Path, tmp_path: Path
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    planted = shared_tmp / f"flopsweep-cache-{os.getuid()}"
    planted.symlink_to(theirs)
    env = {"HOME": "/proc/nohome"}
    error = _refusal(env)
    assert error is not None and error.key == "HOME"
    assert _fix_env(error) == {"XDG_CACHE_HOME": f"{planted}-2"}
    fixed = {**env, **_fix_env(error)}
    assert _refusal(fixed) is None  # typed back: accepted
    made = make_cache_folder(Path(f"{planted}-2") / "flopsweep" / "torch_extensions", Path(f"{planted}-2"))
    assert made.is_dir() and os.stat(f"{planted}-2").st_mode & 0o777 == 0o700
    assert list(theirs.iterdir()) == []


def test_a_folder_of_another_user_is_neither_suggested_nor_used(shared_tmp: Path) -> None:
    planted = shared_tmp / f"flopsweep-cache-{os.getuid()}"
    planted.mkdir(mode=0o777)
    try:
        os.chown(planted, OTHER_UID, -1)
    except PermissionError:
        pytest.skip("needs root: only root can make a folder owned by another user (os.chown)")
    error = _refusal({"HOME": "/proc/nohome"})
    assert error is not None and _fix_env(error) == {"XDG_CACHE_HOME": f"{planted}-2"}
    theirs = _refusal({"XDG_CACHE_HOME": str(planted)})  # set by hand: refused before launch
    assert theirs is not None and theirs.key == "XDG_CACHE_HOME"
    assert theirs.problem == (
        f"DeepSpeed's extension cache {planted}/flopsweep/torch_extensions is not this user's own: "
        f"{planted} is a folder of another user (uid {OTHER_UID})"
    )
    assert _refusal({"XDG_CACHE_HOME": str(planted), **_fix_env(theirs)}) is None
    with pytest.raises(RecordUnwritable, match=f"{planted} is a folder of another user"):
        make_cache_folder(planted / "flopsweep" / "torch_extensions", planted)
    assert list(planted.iterdir()) == []


def test_a_link_below_the_cache_base_is_refused_and_nothing_is_made_through_it(tmp_path: Path) -> None:
    base, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    base.mkdir()
    elsewhere.mkdir()
    (base / "flopsweep").symlink_to(elsewhere)  # even this user's own: the run's folders are real ones
    with pytest.raises(RecordUnwritable) as refused:
        make_cache_folder(base / "flopsweep" / "torch_extensions" / "py311", base)
    assert refused.value.line == (
        f"cache folder {base}/flopsweep/torch_extensions/py311: {base}/flopsweep is a symbolic link "
        f"(uid {os.getuid()}); a cache folder is never made through one"
    )
    assert list(elsewhere.iterdir()) == []
    assert "is a symbolic link" in (not_ours(base, base / "flopsweep" / "x") or "")


def test_the_user_s_own_link_as_the_base_is_followed(tmp_path: Path) -> None:
    """``~/.cache -> /scratch/me/.cache``: the usual HPC layout stays allowed."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "cache").symlink_to(scratch)
    assert _refusal({"XDG_CACHE_HOME": str(tmp_path / "cache")}) is None
    made = make_cache_folder(tmp_path / "cache" / "flopsweep" / "probes", tmp_path / "cache")
    assert made.is_dir() and (scratch / "flopsweep" / "probes").is_dir()


def test_deepspeed_s_ops_folder_is_made_private_by_the_one_maker(tmp_path: Path) -> None:
    from flopsweep.deepspeed_backend import extensions_dir

    where = Path(extensions_dir({"XDG_CACHE_HOME": str(tmp_path / "c")}))
    assert where.parent == tmp_path / "c" / "flopsweep" / "torch_extensions"
    assert {os.stat(p).st_mode & 0o777 for p in (where, where.parent, tmp_path / "c")} == {0o700}
    (tmp_path / "d" / "flopsweep").mkdir(parents=True)
    (tmp_path / "d" / "flopsweep" / "torch_extensions").symlink_to(tmp_path)
    with pytest.raises(RecordUnwritable, match="is a symbolic link"):
        extensions_dir({"XDG_CACHE_HOME": str(tmp_path / "d")})
