"""What every command asks to have evaluated: one :class:`Request`.

``tdsched run``, a regression gate's entry and a sweep's workers all evaluate a recipe
at some parameters, for one build, on inputs drawn from one seed, against the recipe's
tolerance (or a tighter one), with what the command line granted the recipe file. That
is a :class:`Request`; each command's own request holds one beside its policy (rounds
to time, a gate and a time cap, a screening budget) instead of declaring those fields
again, so a request-level setting is added here once. A request crosses to child
processes and sweep workers as JSON (:meth:`Request.to_json` / :meth:`Request.from_json`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..compile.build_target import RECIPE_DEFAULT, BuildTarget
from ..compile.pipeline import Plan, plan
from ..dsl.space import ParamValue
from ..frontends.loading import load
from ..frontends.recipe_trust import UNTRUSTED, Trust


@dataclass(frozen=True)
class Request:
    """One recipe to evaluate: where it is, what it is built for, at which parameters.

    ``recipe`` is a recipe file's path or a shipped recipe's name; ``build`` the target
    (None: the recipe's first), machine and threads; ``params`` override the recipe's
    parameters; ``seed`` draws the random inputs; ``tolerance`` (``atol`` / ``rtol``)
    overrides the recipe's own where given; ``trust`` is what the command line granted
    the recipe file (:mod:`..frontends.recipe_trust`).
    """

    recipe: str
    build: BuildTarget = RECIPE_DEFAULT
    params: dict[str, ParamValue] = field(default_factory=dict)
    seed: int = 0
    tolerance: dict[str, float] | None = None
    trust: Trust = UNTRUSTED

    def plan(self) -> Plan:
        """Load the recipe and plan it for this request's build and parameters, its
        tolerance the recipe's with this request's overrides (raises the recipe's errors:
        :data:`~.evaluation.EVALUATION_ERRORS`)."""
        p = plan(load(self.recipe, self.trust), self.build, self.params)
        if not self.tolerance:
            return p
        tolerance = dataclasses.replace(p.recipe.tolerance, **self.tolerance)
        return dataclasses.replace(p, recipe=dataclasses.replace(p.recipe, tolerance=tolerance))

    def to_json(self) -> dict[str, Any]:
        """The request as JSON values (what crosses to a child process or a worker)."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Request:
        """The request :meth:`to_json` gave as ``data``."""
        return Request(
            **{
                **data,
                "build": BuildTarget.from_json(data["build"]),
                "trust": Trust(**data["trust"]),
            }
        )
