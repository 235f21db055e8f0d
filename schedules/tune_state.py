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

``history`` has a line per round, over every run: the budget spent when it ended, the
task it swept, that task's best speedup and the model's estimated speedup then (what
``tdsched tune --plot`` draws). A state written before it existed has none.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import write_atomically

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


def load_state(folder: Path, identity: Mapping[str, Any]) -> tuple[TuneState, str | None]:
    """The state saved in ``folder`` for ``identity`` (model, target, threads), or a
    fresh one with a note saying why the saved one was set aside (``None``: nothing
    was set aside)."""
    fresh = TuneState(dict(identity))
    path = folder / STATE_FILE
    if not path.exists():
        return fresh, None
    try:
        saved = json.loads(path.read_text())
        if saved.get("version") != VERSION or not isinstance(saved.get("tasks"), dict):
            return fresh, f"{path}: written by another version of tdsched; starting afresh"
        if saved.get("identity") != dict(identity):
            return fresh, (
                f"{path}: written for {saved.get('identity')}, not {dict(identity)}; the "
                "budget starts afresh (the database's candidates are still reused)"
            )
        history = saved.get("history", [])
        if not isinstance(history, list):
            raise TypeError(f"'history' is a {type(history).__name__}, not a list")
        return TuneState(dict(identity), float(saved["spent_s"]), saved["tasks"], history), None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return fresh, f"{path}: unreadable ({exc}); starting afresh"


def save_state(folder: Path, state: TuneState) -> None:
    """Write ``state`` into ``folder`` (atomically)."""
    document = {
        "version": VERSION,
        "identity": state.identity,
        "spent_s": round(state.spent_s, 3),
        "tasks": state.tasks,
        "history": state.history,
    }
    write_atomically(folder / STATE_FILE, json.dumps(document, indent=1).encode())


def record_tasks(folder: Path, tasks: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace the saved states of ``tasks`` (name -> state) in ``folder``'s state file,
    which this run wrote, keeping everything else in it (no file: a tune that ran no
    round and resumed none, whose tasks have nothing to keep)."""
    path = folder / STATE_FILE
    if not path.exists():
        return
    document = json.loads(path.read_text())
    document["tasks"].update({name: dict(state) for name, state in tasks.items()})
    write_atomically(path, json.dumps(document, indent=1).encode())


def digest(path: Path) -> str:
    """A template file's digest: a saved task state holds only for the same template."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
