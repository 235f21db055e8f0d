"""Where a ``tdsched tune`` stands, kept in ``OUT/tune-state.json`` between runs.

The budget of a tune is its total over every run into the same folder: a re-run with the
same ``--budget`` sweeps nothing new (it writes the model recipe from what was found and
checks it), and a larger ``--budget`` spends only the difference. The state says how much
was spent and, per task, what its rounds found; it is rewritten (atomically) after every
round, so a tune killed at any point resumes with every finished round.

A task's saved state is used only while it still describes the same task (its root op
and loop bounds) and the same template (the recipe file's digest): a template the user
edited starts that task afresh. A state written for another model, target or thread
count is set aside, so its numbers are never mixed with the new run's.

A state file tdsched did not write (edited by hand into other types or ranges, a
folder in its place) is refused in one line naming the file and the field
(:func:`read_state`), before the tune does any work.

``history`` has a line per round, over every run: the budget spent when it ended, the
task it swept, that task's best speedup and the model's estimated speedup then (what
``tdsched tune --plot`` draws). A state written before it existed has none.

``spent_s`` is wall time of whole runs (:mod:`.budget`): after the sweeps it is saved
with the steps before them, and once the command ends (:func:`record_finish`) with the
steps after them too, whose time is kept as ``after_s`` beside the profile's
``profile_s``, so the next run estimates those steps from this machine and model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.files import write_atomically
from ..measure.status import Status
from ..sweep.database import Result

STATE_FILE = "tune-state.json"
VERSION = 1


@dataclass
class TuneState:
    """What earlier runs spent and found; ``tasks`` maps a task name to its state."""

    identity: dict[str, Any]
    spent_s: float = 0.0
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    """One entry per round: ``spent_s``, ``task``, ``speedup``, ``estimate``."""
    profile_s: float | None = None
    """The profile of IREE's default build of the model in the last finished run that
    ran the steps after the sweeps, in seconds (written by :func:`record_finish`)."""
    after_s: float | None = None
    """That run's steps after the sweeps, in seconds."""

    def after_per_profile(self) -> float | None:
        """The steps after the sweeps in units of the profile, as the last finished run
        measured them (``None``: no run finished)."""
        if self.after_s is None or not self.profile_s:
            return None
        return self.after_s / self.profile_s


class StateError(ValueError):
    """The state file is not one tdsched wrote (edited by hand, or not a file): a
    ValueError, reported in one line naming the file and the field."""


def load_state(folder: Path, identity: Mapping[str, Any]) -> tuple[TuneState, str | None]:
    """The state saved in ``folder`` for ``identity`` (model, target, threads), or a
    fresh one with a note saying why the saved one was set aside (``None``: nothing
    was set aside). Raises :class:`StateError` as :func:`read_state` does."""
    fresh = TuneState(dict(identity))
    path = folder / STATE_FILE
    saved = read_state(folder)
    if saved is None:
        return fresh, None
    if saved["version"] != VERSION:
        return fresh, f"{path}: written by another version of tdsched; starting afresh"
    if saved["identity"] != dict(identity):
        return fresh, (
            f"{path}: written for {saved['identity']}, not {dict(identity)}; the "
            "budget starts afresh (the database's candidates are still reused)"
        )
    history = saved.get("history", [])
    state = TuneState(dict(identity), float(saved["spent_s"]), saved["tasks"], history)
    state.profile_s, state.after_s = saved.get("profile_s"), saved.get("after_s")
    return state, None


def read_state(folder: Path) -> dict[str, Any] | None:
    """The state file in ``folder`` as saved (``None``: there is none), every field
    checked, unless another version of tdsched wrote it (``version`` differs). Raises
    :class:`StateError` for a file that is not a state tdsched wrote: a negative
    ``spent_s`` would make the budget endless, other fields would fail the tune later."""
    path = folder / STATE_FILE
    if not path.exists():
        return None
    saved = _read(path)
    if saved.get("version", VERSION) != VERSION:
        return saved
    try:
        _STATE(saved, "")
    except _Invalid as exc:
        raise StateError(
            f"{path}: {exc.where}: {exc.what}; correct it, or delete the file to start the "
            "budget afresh (OUT/tune.db keeps the candidates)"
        ) from None
    return saved


def _read(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (JSON's strict numbers: no NaN, no Infinity)."""
    if path.is_dir():
        raise StateError(f"{path}: is a folder, where tdsched tune keeps its state file; remove it")
    try:
        document = json.loads(path.read_text(), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError) as exc:
        raise StateError(f"{path}: cannot read the tune state ({exc})") from None
    except (ValueError, RecursionError) as exc:
        what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise StateError(
            f"{path}: not a tune state, not JSON ({what}); delete the file to start afresh"
        ) from None
    if not isinstance(document, dict):
        raise StateError(
            f"{path}: not a tune state: a JSON {_json_type(document)}, not an object; "
            "delete the file to start afresh"
        )
    return document


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


class _Invalid(Exception):
    """A field of the state file that is not as tdsched writes it."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(where, what)
        self.where, self.what = where or "the top level", what


_Check = Callable[[object, str], None]
"""Checks a value found at a field (``tasks.t0.rounds``), raising :class:`_Invalid`."""


def _kind(what: str, test: Callable[[Any], bool]) -> _Check:
    def check(value: object, where: str) -> None:
        if not test(value):
            raise _Invalid(where, f"expected {what}, got {_shown(value)}")

    return check


def _shown(value: object) -> str:
    """``value`` as JSON where that is short, else what it is (``a list``)."""
    if value is None or isinstance(value, int | float | str):
        text = json.dumps(value)
        if len(text) <= 40:
            return text
    kind = _json_type(value)
    return f"an {kind}" if kind == "object" else f"a {kind}"


def _or_null(check: _Check) -> _Check:
    def either(value: object, where: str) -> None:
        if value is not None:
            check(value, where)

    return either


def _fields(required: Mapping[str, _Check], optional: Mapping[str, _Check], closed: bool) -> _Check:
    """An object with the ``required`` fields and maybe the ``optional`` ones (``closed``:
    no other)."""

    def check(value: object, where: str) -> None:
        _OBJECT(value, where)
        assert isinstance(value, dict)
        for name, field_check in {**required, **optional}.items():
            if name in value:
                field_check(value[name], f"{where}.{name}".lstrip("."))
            elif name in required:
                raise _Invalid(where, f"the field {name!r} is missing")
        unknown = sorted(set(value) - set(required) - set(optional))
        if closed and unknown:
            raise _Invalid(where, f"unknown field {unknown[0]!r}")

    return check


def _values(check: _Check) -> _Check:
    """An object whose every value passes ``check``."""

    def check_all(value: object, where: str) -> None:
        _OBJECT(value, where)
        assert isinstance(value, dict)
        for key, item in value.items():
            check(item, f"{where}.{key}")

    return check_all


def _items(check: _Check) -> _Check:
    """A list whose every item passes ``check``."""

    def check_all(value: object, where: str) -> None:
        _LIST(value, where)
        assert isinstance(value, list)
        for index, item in enumerate(value):
            check(item, f"{where}[{index}]")

    return check_all


def _json_type(value: object) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_OBJECT = _kind("an object", lambda v: isinstance(v, dict))
_LIST = _kind("a list", lambda v: isinstance(v, list))
_TEXT = _kind("a string", lambda v: isinstance(v, str))
_FLAG = _kind("true or false", lambda v: isinstance(v, bool))
_NUMBER = _kind("a number", _is_number)
_INTEGER = _kind("an integer", lambda v: type(v) is int)
_COUNT = _kind("an integer >= 0", lambda v: type(v) is int and v >= 0)
_SECONDS = _kind("a number of seconds >= 0", lambda v: _is_number(v) and v >= 0)
_SPEEDUP = _kind("a speedup > 0", lambda v: _is_number(v) and v > 0)
_STATUS = _kind(
    f"a status ({', '.join(Status)})", lambda v: isinstance(v, str) and v in set(Status)
)
_BY_TYPE: dict[type, _Check] = {
    str: _TEXT,
    float: _NUMBER,
    int: _INTEGER,
    dict: _OBJECT,
    Status: _STATUS,
}


def _result_check() -> _Check:
    """A recorded candidate (:class:`~..sweep.database.Result`), checked by its fields'
    types."""
    hints = typing.get_type_hints(Result)
    required: dict[str, _Check] = {}
    optional: dict[str, _Check] = {}
    for f in dataclasses.fields(Result):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        base = typing.get_origin(args[0]) or args[0]
        check = _BY_TYPE[base]
        if type(None) in args:
            check = _or_null(check)
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        (required if no_default else optional)[f.name] = check
    return _fields(required, optional, closed=True)


_RESULT = _or_null(_result_check())
_TASK = _fields(
    {
        "root": _TEXT,
        "template": _or_null(_TEXT),
        "rounds": _COUNT,
        "candidates": _COUNT,
        "failed": _COUNT,
        "spent_s": _SECONDS,
        "last_gain": _NUMBER,
        "valid": _COUNT,
        "exhausted": _FLAG,
        "best": _RESULT,
    },
    # absent from the states of earlier versions of tdsched
    {
        "best_packed": _RESULT,
        "raced": _values(_items(_SPEEDUP)),
        "wrong_in_model": _values(_TEXT),
    },
    closed=False,
)
_ROUND = _fields(
    {
        "spent_s": _SECONDS,
        "task": _TEXT,
        "speedup": _or_null(_SPEEDUP),
        "estimate": _or_null(_SPEEDUP),
    },
    {},
    closed=False,
)
_STATE = _fields(
    {"version": _INTEGER, "identity": _OBJECT, "spent_s": _SECONDS, "tasks": _values(_TASK)},
    {"history": _items(_ROUND), "profile_s": _SECONDS, "after_s": _SECONDS},
    closed=False,
)


def save_state(folder: Path, state: TuneState) -> None:
    """Write ``state`` into ``folder`` (atomically)."""
    document = {
        "version": VERSION,
        "identity": state.identity,
        "spent_s": round(state.spent_s, 3),
        "tasks": state.tasks,
        "history": state.history,
    }
    for name in ("profile_s", "after_s"):
        value = getattr(state, name)
        if value is not None:
            document[name] = round(value, 3)
    write_atomically(folder / STATE_FILE, json.dumps(document, indent=1).encode())


def record_finish(folder: Path, spent_s: float, profile_s: float, after_s: float | None) -> None:
    """Record in ``folder``'s state, which this run wrote, that the run ended with
    ``spent_s`` of the budget spent, its profile having taken ``profile_s`` and the steps
    after the sweeps ``after_s`` (``None``: they did not run, ``--no-check``; the last
    measured pair is kept). No file: a run that wrote none."""
    fields = {"spent_s": round(spent_s, 3)}
    if after_s is not None:
        fields |= {"profile_s": round(profile_s, 3), "after_s": round(after_s, 3)}
    _update(folder, lambda saved: fields)


def record_tasks(folder: Path, tasks: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace the saved states of ``tasks`` (name -> state) in ``folder``'s state file,
    which this run wrote, keeping everything else in it (no file: a tune that ran no
    round and resumed none, whose tasks have nothing to keep)."""
    _update(
        folder, lambda saved: {"tasks": saved["tasks"] | {n: dict(s) for n, s in tasks.items()}}
    )


def _update(folder: Path, change: Callable[[dict[str, Any]], Mapping[str, Any]]) -> None:
    """Set the fields ``change`` gives for the saved state in ``folder``'s state file,
    keeping the rest (no file: nothing)."""
    saved = read_state(folder)
    if saved is not None:
        document = saved | dict(change(saved))
        write_atomically(folder / STATE_FILE, json.dumps(document, indent=1).encode())


def digest(path: Path) -> str:
    """A template file's digest: a saved task state holds only for the same template."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
