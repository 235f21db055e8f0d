"""What a recipe *file* may make tdsched do: describe a build, never run a program or write
a file of its choosing.

A YAML recipe is data: someone else's tuned recipe must be as safe to run as a config file.
Two of its fields could reach further, so they are held to a rule unless the user grants
more on the command line (never from the recipe):

- ``compile_flags`` and ``baseline.flags`` go to iree-compile, whose options include ones
  that name a program to run (``--iree-llvmcpu-embedded-linker-path``), files to write
  (``--iree-hal-dump-executable-sources-to``, ``--o``) or to read and link
  (``--iree-hal-substitute-executable-object``). A recipe file may pass iree-compile's own
  ``--iree-*`` options only, none whose name says it takes a program, a file or a folder,
  and no value that is a path (:func:`flag_problem`); ``--allow-unsafe-flags`` lifts the rule.
- ``workload.model: FILE.py`` runs a Python file; ``--allow-python-workload`` allows it.

(A ``workload.file`` is compiled, never run, and may hold no runtime code: no grant lifts
:mod:`tdsched.recipes.lowering.runtime_code`'s rule.)

Python recipes are code by design: running one runs it, so these rules do not apply to them.
"""

from __future__ import annotations

from dataclasses import dataclass

ALLOW_UNSAFE_FLAGS = "--allow-unsafe-flags"
ALLOW_PYTHON_WORKLOAD = "--allow-python-workload"

SAFE_FLAG_PREFIX = "--iree-"
"""A recipe file's flags are iree-compile's own options: LLVM's and MLIR's generic ones
(``--exec-on-ir-change``, ``--mlir-print-ir-tree-dir``, ``--o``) include programs and paths."""

UNSAFE_WORDS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "dir",
        "dump",
        "output",
        "linker",
        "plugin",
        "library",
        "listing",
        "zip",
        "substitute",
        "search",
        "patch",
        "patched",
        "dotgraph",
        "artifacts",
        "ptxas",
        "parameter",
        "parameters",
        "export",
        "import",
        "splat",
    }
)
"""Words (between hyphens) of an ``--iree-*`` option's name that mark it as naming a
program, a file or a folder: to run, write, read or link (parameter files included)."""

UNSAFE_PHRASES = (
    "preprocess-executables",
    "pass-pipeline",
    "link-bitcode",
    "link-embedded",
    "link-static",
)
"""Word sequences that do the same: a preprocessing program, a pass pipeline (whose
passes take file options of their own), bitcode to link, or the choice of linker."""

UNSAFE_LAST_WORDS = frozenset({"to", "from", "with"})
"""Last words of IREE options that take where to write (``-to``), what to read
(``-from``) or a program to run (``-with``)."""

PATH_CHARACTERS = ("/", "\\", "~")
"""A flag value holding one of these names a path."""


@dataclass(frozen=True)
class Trust:
    """What the user granted a recipe file on the command line beyond the rule above."""

    unsafe_flags: bool = False
    """``--allow-unsafe-flags``: pass every ``compile_flags`` / ``baseline.flags`` entry."""
    python_workload: bool = False
    """``--allow-python-workload``: a ``workload.model: FILE.py`` may run."""


UNTRUSTED = Trust()
"""Nothing granted: the default wherever a recipe file is loaded."""


def flag_problem(flag: str) -> str | None:
    """Why a recipe file may not pass ``flag`` to iree-compile (None: it may).

    Precondition: ``flag`` starts with ``--`` (the front end checks that first)."""
    name, _, value = flag.partition("=")
    if not name.startswith(SAFE_FLAG_PREFIX):
        return f"a recipe file may pass iree-compile's own {SAFE_FLAG_PREFIX}* options only"
    words = name.removeprefix("--").split("-")
    hyphenated = f"-{name.removeprefix('--')}-"
    named = sorted(UNSAFE_WORDS.intersection(words))
    named += [p for p in UNSAFE_PHRASES if f"-{p}-" in hyphenated]
    if words[-1] in UNSAFE_LAST_WORDS:
        named.append(f"...-{words[-1]}")
    if named:
        words_said = ", ".join(repr(n) for n in named)
        return f"its name ({words_said}) says it names a program, a file or a folder"
    if any(c in value for c in PATH_CHARACTERS):
        return "its value is a path"
    return None


def unsafe_flag_message(flag: str, problem: str) -> str:
    """The error for a refused flag: what, why, and the user's way through."""
    return (
        f"refused {flag!r}: {problem}, and a recipe file must not make tdsched run a program "
        f"or touch files outside its build folder; if you trust this recipe, pass "
        f"{ALLOW_UNSAFE_FLAGS} to the command (see docs/recipes.md, 'What a recipe file may do')"
    )


def python_workload_message(model: str) -> str:
    """The error for a recipe file whose workload is a Python file."""
    return (
        f"refused model {model!r}: a Python model file runs code, and a recipe file must not "
        f"make tdsched run a program; if you trust it, pass {ALLOW_PYTHON_WORKLOAD} to the "
        "command (see docs/recipes.md, 'What a recipe file may do')"
    )


def trust_options(trust: Trust) -> list[str]:
    """The command-line options that grant ``trust`` (for a printed command to repeat)."""
    return [ALLOW_UNSAFE_FLAGS] * trust.unsafe_flags + [ALLOW_PYTHON_WORKLOAD] * (
        trust.python_workload
    )
