"""``device=cuda`` where ``CUDA_VISIBLE_DEVICES`` leaves torch no GPU says how its value does it: ids of GPUs
that are not here, ``-1``, ``NoDevFiles``, a UUID (docs/reliability-14.md row 1036). The decision function
(``local_gpus.hidden_words``) is tested with this machine's GPU count given, so no GPU is needed.

Was: ``CUDA_VISIBLE_DEVICES=7`` on a 1-GPU machine and ``CUDA_VISIBLE_DEVICES=NoDevFiles`` (a batch system's
value for a job given no GPU) both said ``(CUDA_VISIBLE_DEVICES='7' shows it only the GPUs named)``, and
``NoDevFiles`` was not taken as hiding every GPU (``local_gpus.gpus_hidden``).
"""

from __future__ import annotations

import pytest

from flopsweep.job.device_fix import no_gpu_words
from flopsweep.local_gpus import gpus_hidden, hidden_words

VAR = "CUDA_VISIBLE_DEVICES"
SET_0, UNSET = f"set {VAR}=0 (a GPU of this machine), or unset {VAR}", f"unset {VAR}"
NO_ID = "names no GPU: 'NoDevFiles' is not an index or a GPU-/MIG- UUID, so it hides every GPU"
NONE_SEEN = "shows it only the GPUs named, and torch sees none of them"


@pytest.mark.parametrize(
    ("value", "physical", "how", "fix"),
    [
        ("7", 1, "names GPU 7, and this machine has 1 GPU (index 0)", SET_0),
        ("3,0", 2, "names GPU 3, and this machine has 2 GPUs (indices 0 to 1)", SET_0),
        ("7", 0, "names GPU 7, and this machine has none", None),
        ("-1", 4, "hides every GPU from this process", UNSET),
        ("", None, "hides every GPU from this process", UNSET),
        ("NoDevFiles", 4, NO_ID, UNSET),
        ("GPU-1234abcd", 2, NONE_SEEN, UNSET),
        ("0", 1, NONE_SEEN, UNSET),
    ],
)  # fmt: skip
def test_each_value_says_how_it_leaves_no_gpu(value: str, physical: int | None, how: str, fix: str | None):
    assert hidden_words(VAR, value, physical) == (how, fix)


def test_the_suggested_value_names_a_gpu_of_the_machine_and_is_not_refused_again():
    _, fix = hidden_words(VAR, "7", 2)
    assert fix is not None and fix.startswith(f"set {VAR}=0 ")
    shown = fix.removeprefix(f"set {VAR}=").split(" ")[0]
    assert gpus_hidden({VAR: shown}) is None  # typed back: not a value that hides every GPU
    assert not hidden_words(VAR, shown, 2)[0].startswith("names GPU")  # nor one of a GPU not here


def test_no_dev_files_hides_every_gpu_and_ids_do_not():
    assert gpus_hidden({VAR: "NoDevFiles"}) == "CUDA_VISIBLE_DEVICES='NoDevFiles'"
    assert gpus_hidden({VAR: "-1"}) is not None and gpus_hidden({VAR: ""}) is not None
    assert gpus_hidden({VAR: "0,1"}) is None and gpus_hidden({VAR: "GPU-1234abcd"}) is None


def test_the_job_s_line_names_the_variable_and_its_value(monkeypatch):
    for other in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(VAR, "NoDevFiles")
    problem, fix = no_gpu_words()
    assert problem == f"no CUDA GPU is visible (CUDA_VISIBLE_DEVICES='NoDevFiles' {NO_ID})"
    assert fix == f"unset {VAR}, or run on a GPU machine"
