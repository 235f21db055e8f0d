"""Files and folders a command writes, checked right after its arguments are parsed: an
output that could not be written, or that is one of the command's inputs, is refused in
one line (exit status 2) before any work, not found by a traceback after an hour of it.

The policy, the same for every option that writes (``-o``, ``--plot``, ``--csv``,
``--best-out``, ``--db``, ``--out``, ...):

* tdsched never creates a missing folder for a path you give: it names the folder and
  says to create it (a typo in a path fails at once, not after the work);
* a folder where a file goes, a file where a folder goes, a folder you may not write in,
  and a file you may not write are refused;
* an output that is one of the command's inputs (``tdsched report DB --csv DB``), or that
  another option writes too, is refused, whatever path spells it (links included).

A command declares its paths where it declares its options (:func:`writes`,
:func:`reads`); ``tdsched`` checks them all with :func:`check_paths` once the command
line is parsed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import RecipeError
from ..frontends.shipped import find_recipe

_WRITTEN = "_tdsched_written"
_READ = "_tdsched_read"
"""Namespace attributes (set as the parser's defaults) listing the command's paths."""


@dataclass(frozen=True)
class _Written:
    dest: str
    name: str
    folder: bool
    stdout: bool
    when: tuple[str, ...]


@dataclass(frozen=True)
class _Read:
    dest: str
    name: str
    file_of: Callable[[str], Path | None]


def writes(
    parser: argparse.ArgumentParser,
    action: argparse.Action,
    *,
    folder: bool = False,
    stdout: bool = False,
    when: tuple[str, ...] = (),
) -> None:
    """Declare that ``action``'s value (an option of ``parser``) is a file the command
    writes (``folder``: a folder it creates and writes in; ``stdout``: ``-`` means
    standard output); ``when``: only when one of these options (dests) is given."""
    spec = _Written(action.dest, _name(action), folder, stdout, when)
    parser.set_defaults(**{_WRITTEN: [*(parser.get_default(_WRITTEN) or []), spec]})


def reads(
    parser: argparse.ArgumentParser,
    action: argparse.Action,
    file_of: Callable[[str], Path | None] = Path,
) -> None:
    """Declare that ``action``'s value names a file the command reads; ``file_of`` turns
    the value into that file (``None`` when it names no file, e.g. a shipped name)."""
    spec = _Read(action.dest, _name(action), file_of)
    parser.set_defaults(**{_READ: [*(parser.get_default(_READ) or []), spec]})


def recipe_file(spec: str) -> Path | None:
    """The file a RECIPE argument names: a path, or a shipped recipe's file."""
    try:
        return find_recipe(spec)
    except RecipeError:
        return None  # the command says so when it loads it


def model_file(spec: str) -> Path | None:
    """The file a MODEL argument names (``net.py:FUNCTION``, ``net.onnx``, ``net.mlir``);
    ``None`` for a shipped model's name."""
    path = Path(spec.partition(":")[0])
    return path if path.suffix in (".py", ".onnx", ".mlir") else None


def check_paths(args: argparse.Namespace) -> None:
    """Refuse (ValueError, one line) an output of ``args`` that cannot be written or that
    is one of its inputs or another option's output (see the module's policy)."""
    written = [
        (spec, Path(value))
        for spec in getattr(args, _WRITTEN, [])
        if (value := getattr(args, spec.dest)) is not None
        and not (spec.stdout and value == "-")
        and (not spec.when or any(getattr(args, when) for when in spec.when))
    ]
    for spec, path in written:
        check_output(path, spec.name, spec.folder)
    files = [(spec, path) for spec, path in written if not spec.folder]
    inputs = list(_inputs(args))
    for i, (spec, path) in enumerate(files):
        for other, other_path in files[:i]:
            if _same(path, other_path):
                raise ValueError(
                    f"{other.name} and {spec.name} both write {path}; give each its own file"
                )
        for read, name, source in inputs:
            if read.dest != spec.dest and _same(path, source):
                raise ValueError(
                    f"{spec.name} {path}: the same file as {read.name} {name}, which this "
                    "command reads; writing it would destroy it: give another path"
                )


def check_output(path: Path, name: str, folder: bool = False) -> None:
    """Refuse ``path`` (given as option ``name``) when the command could not write it
    there: see the module's policy."""
    where = f"{name} {path}"
    if path.is_dir() and not folder:
        raise ValueError(f"{where}: is a folder; give the path of a file")
    if path.exists() and folder and not path.is_dir():
        raise ValueError(f"{where}: is a file; give a folder (it is created if missing)")
    parent = path.parent
    if not parent.exists():
        raise ValueError(f"{where}: no folder {parent}; create it first (mkdir -p {parent})")
    if not parent.is_dir():
        raise ValueError(f"{where}: {parent} is a file, not a folder")
    writable = path if path.exists() else parent
    if not os.access(writable, os.W_OK | (os.X_OK if writable.is_dir() else 0)):
        what = "folder" if writable.is_dir() else "file"
        raise ValueError(
            f"{where}: the {what} {writable} is read-only to you; make it writable or give "
            "another path"
        )


def _inputs(args: argparse.Namespace) -> Iterator[tuple[_Read, str, Path]]:
    """Each file the command reads: its declaration, the value naming it, the file."""
    for spec in getattr(args, _READ, []):
        value = getattr(args, spec.dest)
        for text in value if isinstance(value, list) else [value]:
            if text is None:
                continue
            found = spec.file_of(str(text))
            if found is not None and found.is_file():
                yield spec, str(text), found


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same file on disk (a link to it
    included), or, where one does not exist yet, the same resolved path."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _name(action: argparse.Action) -> str:
    """How the user wrote the option: its long flag, or a positional's metavar."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    return str(action.metavar or action.dest.upper())
