"""``metrics.git_state``: the commit a record was made from and whether its tracked files differ from it
(``system.git_sha``, ``system.git_dirty``), read from a real git checkout made here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from flopsweep.metrics import git_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "code.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def test_a_clean_checkout_gives_its_commit_and_not_dirty(repo: Path) -> None:
    assert git_state(repo) == (_git(repo, "rev-parse", "HEAD"), False)


def test_an_edited_tracked_file_makes_the_checkout_dirty(repo: Path) -> None:
    (repo / "code.py").write_text("x = 2\n")
    sha, dirty = git_state(repo)
    assert (sha, dirty) == (_git(repo, "rev-parse", "HEAD"), True)
    assert len(sha) == 40


def test_an_untracked_file_leaves_the_checkout_clean(repo: Path) -> None:
    (repo / "notes.txt").write_text("scratch\n")
    assert git_state(repo)[1] is False


def test_a_folder_outside_any_checkout_gives_nothing(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    ceiling = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in ceiling.items():
            mp.setenv(k, v)
        assert git_state(tmp_path / "plain") == (None, None)


def test_a_repository_without_a_commit_gives_nothing(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    assert git_state(tmp_path) == (None, None)
