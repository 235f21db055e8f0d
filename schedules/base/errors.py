"""Recipe errors that point at the file, line and field that caused them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    """Where a recipe value came from: a file (or Python recipe), a line and a field path."""

    file: str | None = None
    line: int | None = None
    field: str = ""

    def child(self, field: str, line: int | None = None) -> Where:
        """The location of a sub-field (``field`` appended to this path)."""
        if not self.field or field.startswith("["):
            path = f"{self.field}{field}"
        else:
            path = f"{self.field}.{field}"
        return Where(self.file, line if line is not None else self.line, path)

    def __str__(self) -> str:
        place = self.file or "<recipe>"
        if self.line is not None:
            place += f":{self.line}"
        return f"{place}: {self.field}" if self.field else place


class RecipeError(ValueError):
    """A recipe is invalid. ``str()`` gives ``file:line: field: problem``."""

    def __init__(self, where: Where, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class ScheduleNotApplied(RecipeError):
    """A schedule step matched nothing, so the build would not be the scheduled one
    (``tdsched regress`` reports it as ``not applied``, distinct from other errors)."""
