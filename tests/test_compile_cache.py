"""The compile cache (``TDSCHED_COMPILE_CACHE``, targets/compile_cache.py): an identical
build is copied from it without running iree-compile; any change in what a build reads is
a miss; failed builds and builds that write more than their module are never cached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tdsched.targets import compile_cache, compiler, make_target
from tdsched.targets.compiler import CompileError, CompileRequest, compile_command, run_compile
from tdsched.targets.runtime import LoadedModule

ADD = """
func.func @add(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %r = arith.addf %a, %b : tensor<16xf32>
  return %r : tensor<16xf32>
}
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of the test's own (the session's is shared by every test)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(compile_cache.ENV, str(folder))
    return folder


def _source(folder: Path, text: str = ADD, name: str = "add.mlir") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / name
    source.write_text(text)
    return source


def _events(cache: Path) -> list[str]:
    log = cache / "events.log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("iree-compile ran: the build was not taken from the cache")


@pytest.mark.usefixtures("iree")
def test_an_identical_build_is_copied_without_running_iree_compile(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    target = make_target("x86")
    first = run_compile(
        CompileRequest(_source(tmp_path / "one"), target, tmp_path / "one" / "add.vmfb")
    )
    assert _events(cache) == ["store"]
    # The same text in another folder, built to another file: the paths do not count.
    monkeypatch.setattr(compiler, "_invoke", _refuse)
    monkeypatch.setenv(compiler.VERBOSE_ENV, "1")
    capfd.readouterr()
    source = _source(tmp_path / "two", name="other.mlir")
    hit = run_compile(CompileRequest(source, target, tmp_path / "two" / "out.vmfb"))
    assert _events(cache) == ["store", "hit"]
    assert hit.output == tmp_path / "two" / "out.vmfb" and str(source) in hit.command
    assert hit.output.read_bytes() == first.output.read_bytes()
    # The command line is printed as for a compile, and nothing else.
    assert capfd.readouterr().err == f"{compiler.VERBOSE_PREFIX}{' '.join(hit.command)}\n"
    a, b = np.arange(16, dtype=np.float32), np.ones(16, dtype=np.float32)
    np.testing.assert_array_equal(
        LoadedModule(hit.output, "local-sync", "add").invoke([a, b])[0], a + b
    )


@pytest.mark.usefixtures("iree")
def test_a_failed_build_is_not_cached(cache: Path, tmp_path: Path) -> None:
    source = _source(tmp_path, ADD.replace("arith.addf", "arith.nosuchop"))
    request = CompileRequest(source, make_target("x86"), tmp_path / "bad.vmfb")
    for _ in range(2):
        with pytest.raises(CompileError, match="iree-compile failed"):
            run_compile(request)
    # iree-compile exits 0 when the transform library does not load; that is a failure too.
    library = _source(tmp_path, "module { this is not mlir }", "lib.mlir")
    request = CompileRequest(_source(tmp_path), make_target("x86"), tmp_path / "a.vmfb", library)
    with pytest.raises(CompileError, match="could not load the kernel transform library"):
        run_compile(request)
    assert _events(cache) == [] and not any(cache.glob("*.vmfb"))


# ---- the key (no build: computed from the command line and the files it names) ----------


def _key(
    folder: Path, text: str = ADD, flags: tuple[str, ...] = (), library: str | None = None
) -> str | None:
    source = _source(folder, text)
    lib = _source(folder, library, "lib.mlir") if library is not None else None
    request = CompileRequest(source, make_target("x86"), folder / "out.vmfb", lib, flags)
    key = compile_cache.key(compile_command(request))
    return None if key is None else key.digest


def test_the_key_is_what_a_build_reads_not_where_it_is(cache: Path, tmp_path: Path) -> None:
    base = _key(tmp_path / "a", library="// one")
    assert base is not None and _key(tmp_path / "b", library="// one") == base
    assert _key(tmp_path / "c", ADD.replace("16", "32"), library="// one") != base
    assert _key(tmp_path / "d", flags=("--iree-opt-level=O3",), library="// one") != base
    assert _key(tmp_path / "e", library="// two") != base
    assert _key(tmp_path / "f") != base  # no library


def test_builds_that_write_more_than_their_module_are_not_cached(
    cache: Path, tmp_path: Path
) -> None:
    dump = f"--iree-hal-dump-executable-files-to={tmp_path / 'dumps'}"
    assert _key(tmp_path, flags=(dump,)) is None
    assert _key(tmp_path, flags=("--iree-hal-dump-executable-files-to=dumps",)) is None
    assert _key(tmp_path, flags=(f"--some-flag={tmp_path / 'no-such-file'}",)) is None
    assert _key(tmp_path, flags=("--compile-to=executable-configurations",)) is not None
    assert compile_cache.key(["iree-compile", "-", f"-o={tmp_path / 'm.vmfb'}"]) is None  # stdin
    source = str(_source(tmp_path))
    assert compile_cache.key(["iree-compile", source, "-o=-"]) is None  # to stdout
    assert compile_cache.key(["iree-compile", source]) is None  # no output file


def test_nothing_is_cached_when_the_variable_is_empty_or_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(compile_cache.ENV, "")
    assert _key(tmp_path) is None
    monkeypatch.delenv(compile_cache.ENV)
    assert _key(tmp_path) is None


def test_a_hit_reports_its_own_paths_in_what_the_build_printed(cache: Path, tmp_path: Path) -> None:
    def key(folder: Path) -> compile_cache.Key:
        command = ["iree-compile", str(_source(folder)), f"-o={folder / 'out.vmfb'}"]
        found = compile_cache.key(command)
        assert found is not None
        return found

    first, second = key(tmp_path / "a"), key(tmp_path / "b")
    assert first.digest == second.digest and compile_cache.load(second) is None
    first.output.write_bytes(b"a module")
    warning = "{}:3:8: warning: something\n"
    compile_cache.store(first, "", warning.format(tmp_path / "a" / "add.mlir"), 1.5)
    assert compile_cache.load(second) == ("", warning.format(tmp_path / "b" / "add.mlir"))
    assert second.output.read_bytes() == b"a module"
    assert _events(cache) == ["store", "hit"]
    assert not list(cache.glob(".*.tmp")), "temporary files were replaced or removed"
