"""Session 40 (docs/reliability-11.md #701): ``hydra.run.dir=out,x`` (a folder with a comma;
``hydra.sweep.dir`` alike) was refused with ``Fix: give one value, e.g. hydra.run.dir=out``, a folder the
user did not mean, and ``'hydra.run.dir=a b,c'`` with ``hydra.run.dir=a b``, two words to a shell. Now a
comma in a string key of Hydra's own schema is offered quoted for Hydra
(:func:`flopsweep.shown_overrides.string_word`: ``'hydra.run.dir="out,x"'``), each fix one shell word, and
the interrupted sweep's resume hint names its folder the same way. Each fix is typed back through a shell's
split into ``run.py``'s refusal and Hydra's parser. No process."""

from __future__ import annotations

import re
import shlex

import pytest

from flopsweep.hydra_keys import is_string_key
from flopsweep.shown_overrides import _string_of, string_word


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


WORD = r"'[^']*'|[^\s'(]+"
"""One shell word of a fix: single-quoted, or without spaces."""


@pytest.mark.parametrize(
    ("typed", "meant", "first"),
    [
        ("hydra.run.dir=out,x", "out,x", "out"),
        ("hydra.run.dir=a b,c", "a b,c", "a b"),
        ("hydra.sweep.dir=/tmp/out,x", "/tmp/out,x", "/tmp/out"),
        ("hydra.sweep.subdir=${hydra.job.num},x", "${hydra.job.num},x", "${hydra.job.num}"),
    ],
)
def test_a_comma_in_a_folder_key_is_offered_quoted_and_each_fix_is_accepted_typed_back(typed, meant, first):
    line = refusal(["-m", "model=gpt-tiny", "device=cpu", typed])
    key = typed.partition("=")[0]
    assert line is not None and line.startswith(
        f"Invalid config: {typed}: Hydra sweeps the job's config only"
    )
    shape = (
        rf"Fix: quote the value for one folder named (.*?): ({WORD}) \(the outer quotes are the shell's\), "
        rf"or give one value, e\.g\. ({WORD}) \(one sweep per value\)\.$"
    )
    found = re.search(shape, line)
    assert found is not None, line
    assert found.group(1) == meant
    for word, value in ((found.group(2), meant), (found.group(3), first)):
        (back,) = shlex.split(word)  # one word to the shell
        assert (
            back.partition("=")[0] == key and _string_of(back) == value
        )  # what Hydra reads: the folder meant
        assert refusal(["-m", "model=gpt-tiny", "device=cpu", back]) is None


def test_string_word_quotes_only_where_hydra_or_the_shell_needs_it():
    assert string_word("hydra.run.dir", "outputs/run1") == "hydra.run.dir=outputs/run1"
    assert string_word("hydra.run.dir", "/tmp/a b") == "hydra.run.dir='/tmp/a b'"
    assert string_word("hydra.run.dir", "out,x") == """'hydra.run.dir="out,x"'"""
    assert string_word("hydra.run.dir", "runs[1]") == """'hydra.run.dir="runs[1]"'"""
    assert string_word("hydra.run.dir", 'say "a,b"') == """'hydra.run.dir='"'"'say "a,b"'"'"''"""
    for value in ("out,x", "runs[1]", 'say "a,b"', "it's,x", "a b"):
        (back,) = shlex.split(string_word("hydra.sweep.dir", value))
        assert _string_of(back) == value, back
    assert is_string_key("hydra.run.dir") and is_string_key("hydra.job.name")
    assert not is_string_key("hydra.job.chdir") and not is_string_key("hydra.launcher.slots")


def test_the_resume_hint_names_a_folder_with_a_comma_as_hydra_reads_it(tmp_path):
    from flopsweep.job.resume import resume_hint

    folder = tmp_path / "sweep,2"
    folder.mkdir()
    hint = resume_hint(["-m", "seed=1,2"], str(folder))
    word = re.search(rf"with resume=true and ({WORD}) finishes the sweep", hint).group(1)
    (back,) = shlex.split(word)
    assert _string_of(back) == str(folder) and word == f"""'hydra.sweep.dir="{folder}"'"""
