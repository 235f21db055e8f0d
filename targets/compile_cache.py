"""A content-keyed cache of iree-compile's modules: identical builds compile once.

Opt-in: ``TDSCHED_COMPILE_CACHE`` names a folder (an absolute path, so child processes
started elsewhere share it); unset or empty, nothing is cached. The test suite sets it for
its session, so the same small builds, made again by many tests in process, in ``tdsched``
child processes and in sweep workers, compile once (docs/testing.md).

A command's key holds everything its build depends on:

- the compiler: IREE's version, and the path, size and modification time of iree-compile
  and of the ``libIREECompiler`` library beside it;
- this machine's CPU (``/proc/cpuinfo``), which builds for ``host`` target;
- every argument, in order, except the output path; an argument that names an existing
  file (the input module, the transform library, the linker) counts by its content's
  hash, not its path, so the same build from another temporary folder hits.

A command that may do anything beyond writing its one module is never cached: a flag whose
name says it writes files (``dump``, ``...-to``, ``...-dir``), a value that looks like a
path but is no file, an argument that is neither a flag nor a file, input from stdin,
anything but exactly one output file. Such commands always run, and so does a build whose
first try failed: only builds that :func:`~tdsched.targets.compiler.run_compile` accepted
are stored (its caller's precondition for :func:`store`).

A hit's module is byte for byte the first build's. IREE records the input file's path in a
module (its debug locations, in the VM module and in each dispatch's binary), so a hit
names the file the first build compiled; the code is the same. What that build printed is
returned with its paths (input, library, output) replaced by the request's.

Entries are written atomically (a temporary file in the folder, then :func:`os.replace`;
the module before its record), so processes sharing the folder never read half an entry.
Nothing is evicted: delete the folder to empty it. Each hit and store appends a line to
``events.log`` in the folder (event, key, the build's seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import iree.compiler.version

from .cpu_isa import cpuinfo

ENV = "TDSCHED_COMPILE_CACHE"

_OUTPUT_FLAGS = ("-o", "--o", "-output-file", "--output-file")
_PHASE_FLAGS = ("--compile-to", "--compile-from")
"""Flags ending in ``-to``/``-from`` whose value is a compilation phase, not a path."""
_WRITES = re.compile(r"dump|-(to|dir|directory)$")
"""A flag name that says the flag writes files beside the module."""
_PATH_CHARACTERS = ("/", "\\", "~")


@dataclass(frozen=True)
class Key:
    """Where a command's build is (or will be) cached."""

    folder: Path
    digest: str
    output: Path
    """The command's output file: a hit is copied there."""
    paths: tuple[str, ...]
    """The paths the digest leaves out, in the command's order (output first), to put the
    request's own paths in place of the first build's in what it printed."""

    @property
    def module(self) -> Path:
        return self.folder / f"{self.digest}.vmfb"

    @property
    def record(self) -> Path:
        return self.folder / f"{self.digest}.json"


def key(command: Sequence[str]) -> Key | None:
    """The cache key of an iree-compile ``command`` (as ``compile_command`` builds it);
    ``None`` when caching is off or the command may not be cached."""
    folder = os.environ.get(ENV)
    if not folder or not command:
        return None
    parts = [*_compiler(command[0]), *_host()]
    outputs: list[str] = []
    paths: list[str] = []
    args = iter(command[1:])
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in _OUTPUT_FLAGS:
            outputs.append(value if eq else next(args, ""))
        elif arg == "-":
            return None  # the input is read from stdin
        elif not arg.startswith("-"):
            if not os.path.isfile(arg):
                return None  # the value of a flag given apart, or not a file
            parts.append(_content(arg))
            paths.append(arg)
        elif name not in _PHASE_FLAGS and _WRITES.search(name):
            return None
        elif eq and os.path.isfile(value):
            parts.append(f"{name}={_content(value)}")
            paths.append(value)
        elif any(c in value for c in _PATH_CHARACTERS):
            return None
        else:
            parts.append(arg)
    if len(outputs) != 1 or outputs[0] in ("", "-"):
        return None
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()
    return Key(Path(folder), digest, Path(outputs[0]), (outputs[0], *paths))


def load(key: Key) -> tuple[str, str] | None:
    """On a hit, copy the cached module to ``key.output`` and return what its build printed
    (stdout, stderr); ``None`` on a miss, or when the copy fails (the compile then runs and
    fails as it would)."""
    try:
        record = json.loads(key.record.read_text())
        ours = dict(zip(record["paths"], key.paths, strict=True))
        printed = _replace(record["stdout"], ours), _replace(record["stderr"], ours)
        shutil.copyfile(key.module, key.output)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _log(key, "hit", record["seconds"])
    return printed


def store(key: Key, stdout: str, stderr: str, seconds: float) -> None:
    """Cache the module at ``key.output``, built in ``seconds``, and what its build printed.
    Precondition: the build succeeded. A cache that cannot be written stores nothing."""
    record = {"paths": key.paths, "stdout": stdout, "stderr": stderr, "seconds": seconds}
    try:
        key.folder.mkdir(parents=True, exist_ok=True)
        _write(key.module, lambda tmp: shutil.copyfile(key.output, tmp))
        _write(key.record, lambda tmp: Path(tmp).write_text(json.dumps(record)))
        _log(key, "store", seconds)
    except OSError:
        pass


@lru_cache(maxsize=4)
def _compiler(tool: str) -> tuple[str, ...]:
    """IREE's version, and where iree-compile and its library are, with their size and
    modification time (an IREE rebuilt in place)."""
    here = Path(tool).resolve()
    files = [here, *sorted(here.parent.glob("libIREECompiler*"))]
    stats = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.exists()]
    return (f"iree {iree.compiler.version.VERSION}", json.dumps(stats))


@lru_cache(maxsize=1)
def _host() -> tuple[str, ...]:
    info = cpuinfo()
    fields = ("vendor_id", "cpu family", "model", "model name", "flags")
    return (platform.machine(), *(info.get(f, "") for f in fields))


def _content(path: str) -> str:
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _replace(text: str, paths: dict[str, str]) -> str:
    """``text`` with each key of ``paths`` replaced by its value, in one pass."""
    changed = {old: new for old, new in paths.items() if old != new}
    if not changed:
        return text
    pattern = "|".join(re.escape(p) for p in sorted(changed, key=len, reverse=True))
    return re.sub(pattern, lambda m: changed[m.group(0)], text)


def _write(path: Path, fill: Callable[[str], object]) -> None:
    """Write ``path`` atomically: ``fill(tmp)`` writes a temporary file beside it, which
    then replaces it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    os.close(fd)
    try:
        fill(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _log(key: Key, event: str, seconds: float) -> None:
    """Append one line to the folder's log (one short write: processes do not mix lines)."""
    try:
        with open(key.folder / "events.log", "a") as log:
            log.write(f"{event} {key.digest[:16]} {seconds:.2f}\n")
    except OSError:
        pass
