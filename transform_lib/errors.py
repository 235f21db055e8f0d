"""Errors raised while building transform IR."""


class ScheduleError(ValueError):
    """A schedule primitive was asked for something its preconditions forbid.

    The message names the primitive, the offending value and what is allowed, so the
    recipe front ends can attach the file, line and field it came from.
    """
