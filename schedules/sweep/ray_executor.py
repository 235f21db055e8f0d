"""The Ray backend of ``tdsched sweep --executor ray``: the same sweep on a Ray cluster.

Compiles run anywhere: each candidate is a Ray task (``--jobs`` in flight) that builds
it in a temporary folder of whichever node runs it and returns the ``.vmfb`` bytes; the
driver writes them to the candidate's artifact path. No filesystem is shared: the recipe
file's bytes travel with the work (:class:`ShippedRecipe`), and so do the artifacts (and
with ``--keep-temps`` each candidate's build folder, as a zip archive).

Benchmarks run on a node that has the target's device: one Ray actor holding a
:class:`~.compile_and_bench.Bench`, placed on a node that declares the custom resource
``tdsched_<target>`` (``tdsched_x86``, ``tdsched_vulkan``). It receives IREE default's
build when it is created and each candidate's build with each request.

Failures stay the candidate's, as with the local pool: a compile task past
``Limits.compile_s`` is force-cancelled (``timeout``); a task whose worker process died
(SIGSEGV, the memory killer) is ``crashed``; a benchmark past ``Limits.run_s`` or whose
actor died gets the actor killed and replaced. Ray is imported only when an executor is
made, so tdsched works without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import socket
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import iree.compiler.version
from tdsched.targets.racing import RaceResult
from tdsched.targets.target import TARGET_NAMES

from ..base.files import write_atomically
from ..compile.build_folders import move_compile_script
from ..measure.status import Status
from .compile_and_bench import Bench, compile_candidate, compile_default
from .executor import Limits, WorkerError, WorkerFailure, guarded_bench
from .faults import VARIABLE as FAULTS_VARIABLE
from .messages import (
    BenchJob,
    BenchOutcome,
    CompileJob,
    CompileOutcome,
    RaceJob,
    SweepContext,
)

BASELINE_KEY = "baseline"
CLOSE_S = 30.0
"""How long an idle benchmark actor has to remove its folder before it is killed."""


class RayUnavailable(ValueError):
    """Ray is not installed, the cluster cannot be reached, or it has no node for the target."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or :class:`RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(
            f"--executor ray needs Ray ({exc}); install it with: pip install 'tdsched[ray]'"
        ) from None
    return ray


def device_resource(target: str) -> str:
    """The custom Ray resource a node declares when it can benchmark ``target``."""
    return f"tdsched_{target}"


def start_local(num_cpus: int) -> None:
    """Start a Ray instance on this machine for sweeps: ``num_cpus`` compile slots, and
    this node declared able to benchmark every target (``tdsched_x86``, ``tdsched_vulkan``).

    A :class:`RayExecutor` made afterwards in this process uses it and leaves it running;
    ``ray.shutdown()`` stops it.
    """
    import_ray().init(
        num_cpus=num_cpus,
        resources={device_resource(t): 1 for t in TARGET_NAMES},
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )


@dataclass(frozen=True)
class ShippedRecipe:
    """The recipe file as the driver read it, sent to every worker.

    Precondition for ``workload: {file: ...}`` recipes: the referenced ``.mlir`` file is at
    the same path on every node (only the recipe file itself travels).
    """

    path: str
    content: bytes

    @classmethod
    def read(cls, path: str) -> ShippedRecipe:
        return cls(path, Path(path).read_bytes())

    def local_path(self) -> str:
        """A path on this node holding exactly these bytes: the original path when it has
        them (same machine, shared or identical checkout), else a copy in the temp folder."""
        original = Path(self.path)
        if original.is_file() and original.read_bytes() == self.content:
            return self.path
        digest = hashlib.sha256(self.content).hexdigest()[:16]
        copy = Path(tempfile.gettempdir()) / "tdsched-ray-recipes" / digest / original.name
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(copy, self.content)
        return str(copy)


def _check_reachable(address: str) -> None:
    """Fail at once when nothing listens at a ``HOST:PORT`` address: Ray itself retries
    an unreachable cluster for minutes. Other forms (``auto``) are left to Ray."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise RayUnavailable(
            f"--ray-address {address}: no Ray cluster answers there ({exc}); start one with "
            f"ray start --head --port={port}, or omit --ray-address for a local instance"
        ) from None


def on_node(context: SweepContext, recipe: ShippedRecipe, baseline: Path) -> SweepContext:
    """``context`` on this node: its recipe where ``recipe`` landed here, its IREE
    default build at ``baseline``."""
    request = replace(context.request, recipe=recipe.local_path())
    return replace(context, request=request, baseline_artifact=str(baseline))


def build_remote(
    context: SweepContext, recipe: ShippedRecipe, job: CompileJob | None, iree_version: str
) -> tuple[CompileOutcome, bytes | None, bytes | None]:
    """Ray task body: build ``job`` (IREE's default when ``None``) on this node; its
    outcome, the ``.vmfb`` bytes when it built, and when the job keeps its build folder
    (``--keep-temps``), that folder as a zip archive for the driver to unpack there.

    ``iree_version`` is the driver's: the sweep's keys name it, so a node with another
    IREE refuses to build rather than record another compiler's code under them.
    """
    key = job.key if job else BASELINE_KEY
    if iree_version != iree.compiler.version.VERSION:
        message = (
            f"node {socket.gethostname()} has IREE {iree.compiler.version.VERSION}, the "
            f"sweep's driver {iree_version}; install the same IREE on every node"
        )
        return CompileOutcome(key, Status.COMPILE_FAILED, 0.0, message), None, None
    with tempfile.TemporaryDirectory(prefix="tdsched-ray-") as tmp:
        built = Path(tmp) / "built.vmfb"
        kept = Path(tmp) / "build" if job is not None and job.build_dir else None
        here = on_node(context, recipe, built)
        if job is None:
            outcome = compile_default(here, key)
        else:
            build_dir = str(kept) if kept else None
            outcome = compile_candidate(
                here, replace(job, artifact=str(built), build_dir=build_dir)
            )
        data = built.read_bytes() if outcome.status is Status.OK else None
        return outcome, data, _kept_archive(kept, job)


def _kept_archive(kept: Path | None, job: CompileJob | None) -> bytes | None:
    """The build folder kept on this node, as a zip archive whose ``compile.sh`` names
    the files where the driver unpacks them (``job.build_dir``)."""
    if kept is None or job is None or job.build_dir is None or not kept.is_dir():
        return None
    move_compile_script(kept, Path(job.build_dir))
    return zip_folder(kept)


def zip_folder(folder: Path) -> bytes:
    """Every file under ``folder`` (paths relative to it, modes kept), as a zip archive."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder))
    return buffer.getvalue()


def unzip_folder(data: bytes, folder: Path) -> None:
    """Unpack a :func:`zip_folder` archive into ``folder``, file modes included (the
    kept ``compile.sh`` stays executable)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            path = Path(archive.extract(info, folder))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                path.chmod(mode)


def worker_error(exc: Any) -> WorkerError:
    """A ``ray.exceptions.RayTaskError`` (the remote code raised) as the local pool
    reports it: the exception's type and message, the remote traceback (Ray's text of
    the error) kept aside."""
    cause = exc.cause
    return WorkerError(f"{type(cause).__name__}: {cause}", str(exc))


class BenchServer:
    """Ray actor body: a :class:`~.compile_and_bench.Bench` fed with builds shipped from the driver.

    Received builds live in this process's temporary folder for one request each; the
    folder goes with :meth:`close` (Ray kills an actor without running its finalizers).
    """

    def __init__(self, context: SweepContext, recipe: ShippedRecipe, baseline: bytes) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="tdsched-ray-bench-")
        path = Path(self._folder.name) / "baseline.vmfb"
        path.write_bytes(baseline)
        self._bench = Bench(on_node(context, recipe, path))

    def ready(self) -> bool:
        """Answers once the actor is placed and its bench set up."""
        return True

    def close(self) -> None:
        """Remove the temporary folder: the actor is about to be stopped."""
        self._folder.cleanup()

    def bench(self, job: BenchJob, artifact: bytes) -> BenchOutcome:
        with tempfile.TemporaryDirectory(dir=self._folder.name) as tmp:
            path = Path(tmp) / "candidate.vmfb"
            path.write_bytes(artifact)
            return self._bench.run(replace(job, artifact=str(path)))

    def time_baseline(self) -> dict[str, float | int]:
        return self._bench.time_baseline()

    def race(self, artifacts: Mapping[str, bytes], settings: dict[str, Any]) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(dir=self._folder.name) as tmp:
            paths = {}
            for number, (key, data) in enumerate(artifacts.items()):
                paths[key] = str(Path(tmp) / f"{number}.vmfb")
                Path(paths[key]).write_bytes(data)
            return self._bench.race(RaceJob(paths, settings)).as_dict()


class RayExecutor:
    """Compiles on any node of a Ray cluster, benchmarks on a node with the target device.

    ``address`` is a cluster to join (``ray.init(address=...)``); without it the executor
    starts a local instance (see :func:`start_local`) and stops it in :meth:`close`. A
    Ray connection this process already has is used as it is and left open.
    """

    def __init__(
        self, jobs: int | None, limits: Limits | None = None, *, address: str | None = None
    ) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.limits = limits or Limits()
        self.address = address
        self._ray = import_ray()
        self._started = False
        self._context: SweepContext | None = None
        self._recipe: Any = None
        """ObjectRef of the :class:`ShippedRecipe`."""
        self._task: Any = None
        """The remote :func:`build_remote`."""
        self._actor_class: Any = None
        """The remote :class:`BenchServer`."""
        self._actor: Any = None

    def start(self, context: SweepContext) -> None:
        ray = self._ray
        self._kill_actor(orderly=True)
        if not ray.is_initialized():
            self._connect()
        resource = device_resource(context.target)
        if ray.cluster_resources().get(resource, 0) < 1:
            self.close()
            raise RayUnavailable(
                f"no node of the Ray cluster{f' at {self.address}' if self.address else ''} "
                f"can benchmark {context.target}: start the nodes that have the device with "
                f"ray start --resources='{{\"{resource}\": 1}}'"
            )
        self._context = context
        self._recipe = ray.put(ShippedRecipe.read(context.request.recipe))
        # Every worker gets the driver's fault rules (none when unset), whatever the
        # environment its node was started with.
        env = {"env_vars": {FAULTS_VARIABLE: os.environ.get(FAULTS_VARIABLE, "")}}
        self._task = ray.remote(build_remote).options(num_cpus=1, max_retries=0, runtime_env=env)
        self._actor_class = ray.remote(BenchServer).options(
            num_cpus=0, resources={resource: 1}, max_restarts=0, runtime_env=env
        )

    def _connect(self) -> None:
        if self.address is None:
            start_local(self.jobs)
        else:
            _check_reachable(self.address)
            try:
                self._ray.init(
                    address=self.address, log_to_driver=False, logging_level=logging.WARNING
                )
            except ConnectionError as exc:
                raise RayUnavailable(
                    f"cannot join the Ray cluster at {self.address}: {exc}"
                ) from None
        self._started = True

    def _ready(self) -> SweepContext:
        assert self._context is not None, "start() first"
        return self._context

    # -- compiling ------------------------------------------------------------------

    def compile(self, jobs: Sequence[CompileJob]) -> Iterator[CompileOutcome]:
        return self._builds(list(jobs))

    def compile_default(self) -> CompileOutcome:
        return next(self._builds([None]))

    def _builds(self, jobs: list[CompileJob | None]) -> Iterator[CompileOutcome]:
        """Build ``jobs`` (``None``: IREE default), ``self.jobs`` at a time, yielding each
        outcome as it finishes; a build's time limit counts from its submission."""
        ray = self._ray
        context = self._ready()
        waiting = list(reversed(jobs))
        running: dict[Any, tuple[CompileJob | None, float]] = {}
        try:
            while waiting or running:
                while waiting and len(running) < self.jobs:
                    job = waiting.pop()
                    ref = self._task.remote(
                        context, self._recipe, job, iree.compiler.version.VERSION
                    )
                    running[ref] = (job, time.monotonic())
                first_deadline = min(t for _, t in running.values()) + self.limits.compile_s
                done, _ = ray.wait(
                    list(running),
                    num_returns=1,
                    timeout=max(0.0, first_deadline - time.monotonic()),
                )
                for ref in done:
                    job, submitted = running.pop(ref)
                    yield self._built(ref, job, time.monotonic() - submitted)
                for ref, (job, submitted) in list(running.items()):
                    if time.monotonic() - submitted >= self.limits.compile_s:
                        ray.cancel(ref, force=True)
                        del running[ref]
                        yield self._outcome(
                            job, Status.TIMEOUT, f"no result within {self.limits.compile_s:.0f} s"
                        )
        finally:
            for ref in running:
                ray.cancel(ref, force=True)

    def _built(self, ref: Any, job: CompileJob | None, seconds: float) -> CompileOutcome:
        """The finished task's outcome; a build is written to its artifact path here."""
        exceptions = self._ray.exceptions
        try:
            outcome, data, kept = self._ray.get(ref)
        except exceptions.RayTaskError as exc:
            return self._outcome(job, Status.COMPILE_FAILED, str(worker_error(exc)), seconds)
        except exceptions.RayError as exc:
            return self._outcome(job, Status.CRASHED, f"the Ray worker died: {exc}", seconds)
        if data is not None:
            write_atomically(Path(job.artifact if job else self._ready().baseline_artifact), data)
        if kept is not None and job is not None and job.build_dir:
            unzip_folder(kept, Path(job.build_dir))
        assert isinstance(outcome, CompileOutcome)
        return outcome

    def _outcome(
        self,
        job: CompileJob | None,
        status: Status,
        error: str,
        seconds: float | None = None,
    ) -> CompileOutcome:
        return CompileOutcome(
            job.key if job else BASELINE_KEY,
            status,
            self.limits.compile_s if seconds is None else seconds,
            error,
        )

    # -- benchmarking ---------------------------------------------------------------

    def bench(self, job: BenchJob) -> BenchOutcome:
        def measure() -> BenchOutcome:
            artifact = Path(job.artifact).read_bytes()
            outcome = self._call("bench", self.limits.run_s, job, artifact)
            assert isinstance(outcome, BenchOutcome)
            return outcome

        return guarded_bench(job.key, measure)

    def time_baseline(self) -> dict[str, Any]:
        timing: dict[str, Any] = self._call("time_baseline", self.limits.run_s)
        return timing

    def race(self, job: RaceJob) -> RaceResult:
        artifacts = {key: Path(path).read_bytes() for key, path in job.artifacts.items()}
        limit = self.limits.run_s * max(1, len(artifacts)) + job.settings["time_cap_s"]
        return RaceResult.from_dict(self._call("race", limit, artifacts, job.settings))

    def _call(self, method: str, timeout_s: float, *args: Any) -> Any:
        """Run ``method`` on the benchmark actor. A timeout or the actor's death kills it
        (the next call makes a new one) and raises :class:`WorkerFailure`; an exception
        raised by the method becomes a :class:`WorkerError`."""
        ray = self._ray
        try:
            ref = getattr(self._bench_actor(timeout_s), method).remote(*args)
            return ray.get(ref, timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            self._kill_actor()
            raise WorkerFailure(Status.TIMEOUT, f"no answer within {timeout_s:.0f} s") from None
        except ray.exceptions.RayTaskError as exc:
            raise worker_error(exc) from None
        except ray.exceptions.RayError as exc:
            self._kill_actor()
            raise WorkerFailure(Status.CRASHED, f"the benchmark actor died: {exc}") from None

    def _bench_actor(self, timeout_s: float) -> Any:
        """The benchmark actor, made when there is none: placed on a node with the
        target's resource, given IREE default's build, waited for up to ``timeout_s``."""
        if self._actor is not None:
            return self._actor
        ray = self._ray
        context = self._ready()
        baseline = Path(context.baseline_artifact).read_bytes()
        self._actor = self._actor_class.remote(context, self._recipe, baseline)
        try:
            ray.get(self._actor.ready.remote(), timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            self._kill_actor()
            raise RayUnavailable(
                f"no node with the resource {device_resource(context.target)} took the "
                f"benchmark actor and set it up within {timeout_s:.0f} s (another sweep may "
                "hold the node)"
            ) from None
        return self._actor

    def _kill_actor(self, orderly: bool = False) -> None:
        """Stop the benchmark actor. ``orderly``: it is idle, so it is first asked to
        remove its folder (not when it timed out or died: it would not answer)."""
        if self._actor is None:
            return
        if orderly:
            # a dead or hung actor is killed anyway
            with contextlib.suppress(Exception):
                self._ray.get(self._actor.close.remote(), timeout=CLOSE_S)
        self._ray.kill(self._actor)
        self._actor = None

    def close(self) -> None:
        """Stop the benchmark actor, and Ray itself when this executor started it."""
        if self._ray.is_initialized():
            self._kill_actor(orderly=True)
            if self._started:
                self._ray.shutdown()
        self._actor = None
        self._started = False
