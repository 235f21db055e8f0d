"""The workload generators are documented from their registry: every argument has a
meaning, the committed page is what the registry writes, and a bad argument names what
the generator takes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tdsched.recipes.workloads import GENERATORS, generate
from tdsched.recipes.workloads.generator_docs import page
from tdsched.targets.workload import WorkloadError

PAGE = Path(__file__).resolve().parent.parent / "docs" / "generators.md"


@pytest.mark.parametrize("name", list(GENERATORS))
def test_every_argument_of_a_generator_has_a_meaning(name: str) -> None:
    generator = GENERATORS[name]
    assert [p.name for p in generator.parameters()] == list(generator.arguments)
    assert all(meaning.strip() for meaning in generator.arguments.values())
    assert generator.summary


def test_the_committed_page_is_written_from_the_registry() -> None:
    assert PAGE.read_text() == page(), (
        "docs/generators.md is out of date: run "
        f"`{sys.executable} -m tdsched.recipes.workloads.generator_docs docs/generators.md`"
    )
    assert "| `weights` | `input` |" in PAGE.read_text()


def test_an_unknown_or_missing_argument_names_what_the_generator_takes() -> None:
    with pytest.raises(WorkloadError) as caught:
        generate("softmax", {"M": 8, "rows": 4})
    message = str(caught.value)
    assert "generator softmax: unknown argument 'rows'; argument 'N' is required" in message
    assert "It takes M, N, dtype=f32 (docs/generators.md#softmax)" in message
