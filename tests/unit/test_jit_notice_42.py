"""DeepSpeed's build line says whose later runs load the op it builds (docs/reliability-13.md #974): it said
``once per machine``, but the cache is per Python environment and its Python, torch and DeepSpeed versions
(``deepspeed_backend.extensions_dir``), or the ``TORCH_EXTENSIONS_DIR`` the user set: a second environment
on the machine, or a torch upgrade, built the op again after the line said it would not."""

from __future__ import annotations

from flopsweep.jit_ops import SHM_COMM, build_notice


def test_the_line_names_the_environment_whose_cache_it_fills() -> None:
    line = build_notice([SHM_COMM], "/home/u/.cache/flopsweep/torch_extensions/py311-x", environ={})
    assert line is not None and "once per machine" not in line
    assert line.startswith(
        "DeepSpeed is building its extension before the first step, once for this Python environment and "
        "its Python, torch and DeepSpeed versions (another builds its own): deepspeed_shm_comm ("
    )
    assert line.endswith(
        "Later runs load it from the cache, /home/u/.cache/flopsweep/torch_extensions/py311-x."
    )


def test_a_torch_extensions_dir_of_the_user_s_is_said_shared() -> None:
    line = build_notice([SHM_COMM], "/scratch/ext", environ={"TORCH_EXTENSIONS_DIR": "/scratch/ext"})
    assert (
        line is not None and "once for the TORCH_EXTENSIONS_DIR set here (shared by every environment" in line
    )
    assert build_notice([], "/scratch/ext", environ={}) is None


def test_flopsweep_s_own_folder_put_in_torch_extensions_dir_is_not_said_the_user_s():
    """docs/reliability-13.md row 1013: ``prepare`` sets ``TORCH_EXTENSIONS_DIR`` to its own folder before the
    line is made; the line still names the environment's cache, not a folder shared by every environment."""
    from flopsweep.jit_ops import OWN_DIR_MARK

    own = {
        "TORCH_EXTENSIONS_DIR": "/c/flopsweep/torch_extensions/x",
        OWN_DIR_MARK: "/c/flopsweep/torch_extensions/x",
    }
    line = build_notice([SHM_COMM], own["TORCH_EXTENSIONS_DIR"], environ=own)
    assert line is not None and "once for this Python environment and its Python, torch and DeepSpeed" in line
    users = {**own, "TORCH_EXTENSIONS_DIR": "/scratch/ext"}  # the user's own folder, set after
    assert "shared by every environment" in (build_notice([SHM_COMM], "/scratch/ext", environ=users) or "")
