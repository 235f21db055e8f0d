"""YAML front end: a recipe file → :class:`~tdsched.schedules.dsl.recipe.Recipe`.

The file is loaded with PyYAML's safe loader, keeping every node's line so each error
names ``file:line: field`` and says what is allowed. The YAML is the same steps as the
Python API, as data: ``- tile: {sizes: [64, 64, 0], loop: forall, mapping: workgroup}``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from tdsched.recipes.models import MODELS
from tdsched.recipes.workloads import GENERATORS
from tdsched.targets.target import TARGET_NAMES
from tdsched.transform_lib.match import OP_KINDS, AttrValue

from ..base.errors import RecipeError, Where
from ..base.files import read_user_text
from ..dsl.options import Kind, StepOption, step_options
from ..dsl.recipe import (
    METRICS,
    Baseline,
    KernelSchedule,
    LoweringConfig,
    Recipe,
    Tolerance,
    WorkloadSpec,
    name_problem,
)
from ..dsl.shape_table import ENTRY_OPTIONS, RULES, ShapeEntry, ShapeTable
from ..dsl.space import Axis, ParamValue, SearchSpace, build_space, int_range, pow2_range
from ..dsl.steps import STEPS, Step
from ..dsl.values import MATCH_FIELDS, OPS_FIELDS, IntOrParam, MatchSpec
from .recipe_trust import (
    UNTRUSTED,
    Trust,
    flag_problem,
    python_workload_message,
    unsafe_flag_message,
)
from .yaml_nodes import Node, compose, construct, optional

RECIPE_FIELDS = {
    "name": "recipe name",
    "description": "free text",
    "workload": "what to compute",
    "targets": f"list of {', '.join(TARGET_NAMES)}",
    "parameters": "NAME: default value",
    "tolerance": "atol / rtol",
    "graph": "whole-module schedule steps",
    "kernels": "kernel schedules",
    "baseline": "what to time against (default: IREE's default build)",
    "compile_flags": "extra iree-compile flags for the scheduled build",
    "metrics": f"extra figures to report: {', '.join(METRICS)}",
    "space": "values 'tdsched sweep' tries per parameter",
    "constraints": "expressions every swept candidate must satisfy",
    "shapes": "tuned parameters per workload shape: key, rule, entries",
    "provenance": "where a frozen recipe came from (informational)",
}
"""A recipe file's top-level keys (the JSON Schema describes the same keys)."""

WORKLOAD_FIELDS = {
    "generator": f"a generated kernel: {', '.join(GENERATORS)}",
    "model": f"a model-builder model: {', '.join(MODELS)} or FILE.py[:FUNCTION]",
    "args": "generator or model arguments",
    "via": "how a model is lowered: builder (default) or onnx (export, then import)",
    "file": "a .mlir (linalg or TOSA) or .onnx file, relative to the recipe",
    "format": "the file's format: auto (default), linalg, tosa, onnx",
    "function": "entry function of the file",
}
KERNEL_FIELDS = {
    "name": "kernel schedule name",
    "match": "which dispatch root ops it applies to",
    "schedule": "transform-dialect strategy steps",
    "config": "lowering config for IREE's own pipeline",
    "workgroup_size": "GPU threads [x, y, z] for a Vulkan strategy",
    "targets": f"the targets it applies to ({', '.join(TARGET_NAMES)}; default all)",
    "when": "a condition on the parameters: leave the kernel schedule out unless it holds",
}
CONFIG_FIELDS = {
    "tile_sizes": "level: sizes; levels workgroup, vector, reduction, inner (x86) or "
    "workgroup, thread, reduction (vulkan)",
    "workgroup_size": "GPU workgroup size [x, y, z]",
    "pipeline": "IREE codegen pipeline name",
    "root": "true (default): the op is its dispatch's root and sets the pipeline; false: "
    "tile sizes for another op of the dispatch (x86, no workgroup level)",
}
CONFIG_LEVELS = ("workgroup", "thread", "reduction", "vector", "inner")
"""Tiling levels a lowering config names (``workgroup`` is required of a root config)."""


def load_recipe(path: str | Path, trust: Trust = UNTRUSTED) -> Recipe:
    """Load and validate a YAML recipe file; ``trust``: what the user granted it beyond
    the rule of :mod:`.recipe_trust` (nothing by default)."""
    path = Path(path)
    return parse_recipe(read_user_text(path, "recipe"), str(path), trust)


def parse_recipe(text: str, filename: str, trust: Trust = UNTRUSTED) -> Recipe:
    """Parse YAML recipe ``text``; errors cite ``filename``. A flag or workload the
    :mod:`.recipe_trust` rule refuses, and ``trust`` does not allow, is a RecipeError."""
    root = compose(text, filename)
    if root is None:
        raise RecipeError(Where(filename, 1), "the recipe file is empty")
    top = Node(root, Where(filename, root.start_mark.line + 1)).mapping(
        RECIPE_FIELDS, required=("name", "workload")
    )
    base = Path(filename).parent
    targets = (
        tuple(t.choice(TARGET_NAMES) for t in top["targets"].sequence())
        if "targets" in top
        else ("x86",)
    )
    if not targets:
        raise top["targets"].fail(f"list at least one target ({', '.join(TARGET_NAMES)})")
    parameters = _parameters(top["parameters"]) if "parameters" in top else ()
    return Recipe(
        name=_name(top["name"]),
        description=optional(top, "description", Node.text, ""),
        workload=_workload(top["workload"], base, trust),
        targets=targets,
        parameters=parameters,
        graph=tuple(_step(s) for s in top["graph"].sequence()) if "graph" in top else (),
        kernels=tuple(_kernel(k) for k in top["kernels"].sequence()) if "kernels" in top else (),
        tolerance=_tolerance(top["tolerance"]) if "tolerance" in top else Tolerance(),
        baseline=_baseline(top["baseline"], trust) if "baseline" in top else Baseline(),
        compile_flags=_flags(top["compile_flags"], trust) if "compile_flags" in top else (),
        metrics=tuple(m.choice(METRICS) for m in top["metrics"].sequence())
        if "metrics" in top
        else (),
        space=_space(top.get("space"), top.get("constraints"), dict(parameters)),
        shapes=_shapes(top["shapes"]) if "shapes" in top else None,
        source=filename,
    )


def _name(node: Node) -> str:
    """The recipe name, checked here too so that the error names its line."""
    name = node.text()
    problem = name_problem(name)
    if problem:
        raise node.fail(problem)
    return name


def _space(
    axes: Node | None, constraints: Node | None, parameters: dict[str, ParamValue]
) -> SearchSpace:
    """``space: {NAME: [values] | {from, to, step} | {pow2: [low, high]}}`` and
    ``constraints: [expression, ...]``."""
    parsed: list[Axis] = []
    if axes is not None:
        for name, axis in axes.entries("NAME: values").items():
            parsed.append(Axis(name, _axis_values(axis), axis.where))
    texts = [(c.text(), c.where) for c in constraints.sequence()] if constraints else []
    return build_space(parsed, texts, parameters)


def _axis_values(node: Node) -> tuple[ParamValue, ...]:
    if isinstance(node.node, yaml.SequenceNode):
        values = tuple(item.scalar() for item in node.sequence())
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise node.fail(f"a swept value must be a number or a string, got {value!r}")
        return values
    f = node.mapping(
        {
            "from": "first integer",
            "to": "last integer (inclusive)",
            "step": "increment, default 1",
            "pow2": "[low, high]: the powers of two between them",
        }
    )
    if "pow2" in f:
        if len(f) > 1:
            raise node.fail("give either 'pow2: [low, high]' or 'from'/'to'/'step', not both")
        bounds = [item.integer() for item in f["pow2"].sequence()]
        if len(bounds) != 2:
            raise f["pow2"].fail("expected [low, high]")
        return pow2_range(bounds[0], bounds[1], f["pow2"].where)
    if "from" not in f or "to" not in f:
        raise node.fail(
            "expected a list of values, {from: A, to: B, step: S} or {pow2: [low, high]}"
        )
    step = f["step"].integer() if "step" in f else 1
    return int_range(f["from"].integer(), f["to"].integer(), step, node.where)


def _parameters(node: Node) -> tuple[tuple[str, ParamValue], ...]:
    params = []
    for name, item in node.entries("NAME: default value").items():
        value = item.scalar()
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise item.fail(f"a parameter default must be a number or a string, got {value!r}")
        params.append((name, value))
    return tuple(params)


SHAPES_FIELDS = {
    "key": "the parameters that give the workload's shape, e.g. [M, N, K]",
    "rule": f"how a shape between entries is served: {' or '.join(RULES)}",
    "entries": "one mapping per shape: the key values, then the tuned parameter values",
}


def load_shape_table(path: Path) -> ShapeTable:
    """The ``shapes`` table of the YAML recipe at ``path`` (what ``sweep --shape``
    writes), for a Python recipe to use; its parameters are checked by the recipe that
    takes it."""
    recipe = load_recipe(path)
    if recipe.shapes is None:
        raise RecipeError(Where(str(path), None, "shapes"), "this recipe has no shapes table")
    return recipe.shapes


def _shapes(node: Node) -> ShapeTable:
    f = node.mapping(SHAPES_FIELDS, required=("key", "entries"))
    key = tuple(k.text() for k in f["key"].sequence())
    if not key:
        raise f["key"].fail("name at least one parameter, e.g. [M, N, K]")
    entries = []
    for item in f["entries"].sequence():
        fields = item.entries("of key values and tuned parameter values")
        missing = [name for name in key if name not in fields]
        if missing:
            raise item.fail(f"missing key value(s) {', '.join(missing)} (key: {list(key)})")
        params = []
        for name, value in fields.items():
            if name in key or name in ENTRY_OPTIONS:
                continue
            scalar = value.scalar()
            if isinstance(scalar, bool) or not isinstance(scalar, int | float | str):
                raise value.fail(f"a tuned value must be a number or a string, got {scalar!r}")
            params.append((name, scalar))
        entries.append(
            ShapeEntry(
                shape=tuple((name, _key_value(fields[name])) for name in key),
                params=tuple(params),
                iree_default=fields["iree_default"].flag() if "iree_default" in fields else False,
                note=fields["note"].text() if "note" in fields else "",
                threads=fields["threads"].integer() if "threads" in fields else None,
                isa=fields["isa"].text() if "isa" in fields else None,
                cpu=fields["cpu"].text() if "cpu" in fields else None,
                gpu=fields["gpu"].text() if "gpu" in fields else None,
                where=item.where,
            )
        )
    rule = f["rule"].choice(RULES) if "rule" in f else "nearest"
    return ShapeTable(key, tuple(entries), rule, node.where)  # type: ignore[arg-type]


def _key_value(node: Node) -> int | str:
    """A shape table key value: an integer (a size) or a string (``constant``); the
    recipe checks it against its parameter's type."""
    value = node.scalar()
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise node.fail(f"a key value must be an integer or a string, got {value!r}")
    return value


def _tolerance(node: Node) -> Tolerance:
    f = node.mapping({"atol": "absolute tolerance", "rtol": "relative tolerance"})
    default = Tolerance()
    return Tolerance(
        atol=optional(f, "atol", Node.number, default.atol),
        rtol=optional(f, "rtol", Node.number, default.rtol),
    )


def _baseline(node: Node, trust: Trust) -> Baseline:
    f = node.mapping({"flags": "extra iree-compile flags, e.g. [--iree-opt-data-tiling]"})
    return Baseline(flags=_flags(f["flags"], trust) if "flags" in f else (), where=node.where)


def _flags(node: Node, trust: Trust) -> tuple[str, ...]:
    """A list of iree-compile flags (each starting with ``--``), each one the recipe
    file may pass (:func:`.recipe_trust.flag_problem`) unless ``trust`` allows any."""
    flags = []
    for item in node.sequence():
        flag = item.text()
        if not flag.startswith("--"):
            raise item.fail(f"expected an iree-compile flag starting with '--', got {flag!r}")
        problem = None if trust.unsafe_flags else flag_problem(flag)
        if problem is not None:
            raise item.fail(unsafe_flag_message(flag, problem))
        flags.append(flag)
    return tuple(flags)


def _workload(node: Node, base: Path, trust: Trust) -> WorkloadSpec:
    f = node.mapping(WORKLOAD_FIELDS)
    sources = [k for k in ("generator", "model", "file") if k in f]
    if len(sources) != 1:
        raise node.fail("give exactly one of 'generator', 'model' (both with 'args') or 'file'")
    for key, needs in (("via", "model"), ("format", "file"), ("function", "file")):
        if key in f and needs not in f:
            raise f[key].fail(f"'{key}' applies to a '{needs}' workload only")
    args: list[tuple[str, IntOrParam | str]] = []
    if "args" in f:
        if "file" in f:
            raise f["args"].fail("a 'file' workload takes no 'args'")
        for key, value in f["args"].mapping({k: "argument" for k in _arg_names(f["args"])}).items():
            scalar = value.scalar()
            if isinstance(scalar, bool) or not isinstance(scalar, int | str):
                raise value.fail(f'expected an integer, a string or a "${{PARAM}}", got {scalar!r}')
            args.append((key, scalar))
    if "model" in f and f["model"].text() not in MODELS and not trust.python_workload:
        raise f["model"].fail(python_workload_message(f["model"].text()))
    file = None
    if "file" in f:
        file = str((base / f["file"].text()).resolve()) if base else f["file"].text()
    return WorkloadSpec(
        generator=optional(f, "generator", Node.text, None),
        args=tuple(args),
        file=file,
        function=optional(f, "function", Node.text, None),
        model=optional(f, "model", Node.text, None),
        via=optional(f, "via", Node.text, "builder"),
        format=optional(f, "format", Node.text, "auto"),
        base=str(base) if base else None,
        where=node.where,
    )


def _arg_names(node: Node) -> list[str]:
    if not isinstance(node.node, yaml.MappingNode):
        raise node.fail("expected a mapping of generator arguments")
    return [str(construct(k, node.where)) for k, _ in node.node.value]


def _match_spec(node: Node, fields: dict[str, Node]) -> MatchSpec:
    kind = optional(fields, "kind", lambda n: n.choice(OP_KINDS), None)
    if not {"op", "attributes", "layer"} & set(fields) and kind is None:
        raise node.fail("give at least one of 'op', 'kind', 'layer' or 'attributes' to select ops")
    return MatchSpec(
        op=optional(fields, "op", Node.text, None),
        kind=kind,  # type: ignore[arg-type]
        shape=optional(fields, "shape", Node.ints, None),
        dtype=optional(fields, "dtype", Node.text, "f32"),
        attributes=optional(fields, "attributes", _attributes, ()),
        layers=optional(fields, "layer", _names, ()),
        inputs=optional(fields, "inputs", Node.integer, None),
        **_used_by(fields),
        body=optional(fields, "body", Node.text, None),
    )


USED_BY_FIELDS = {"op": "name of the op using the result", "inputs": "its number of inputs"}


def _used_by(fields: dict[str, Node]) -> dict[str, Any]:
    """``used_by: NAME`` or ``used_by: {op: NAME, inputs: N}`` as MatchSpec fields."""
    node = fields.get("used_by")
    if node is None:
        return {}
    if not isinstance(node.node, yaml.MappingNode):
        return {"used_by": node.text()}
    user = node.mapping(USED_BY_FIELDS, required=("op",))
    return {
        "used_by": user["op"].text(),
        "used_by_inputs": optional(user, "inputs", Node.integer, None),
    }


def _attributes(node: Node) -> tuple[tuple[str, AttrValue | None], ...]:
    """``[NAME, ...]`` (unit attributes) or ``{NAME: VALUE}`` (string, bool, int, float)."""
    if not isinstance(node.node, yaml.MappingNode):
        return tuple((item.text(), None) for item in node.sequence())
    pairs: list[tuple[str, AttrValue | None]] = []
    for name, child in node.entries("of attribute names to values").items():
        value = child.scalar()
        if not isinstance(value, str | bool | int | float):
            raise child.fail(f"expected a string, boolean or number, got {value!r}")
        pairs.append((name, value))
    return tuple(pairs)


def _names(node: Node) -> tuple[str, ...]:
    """One name (a layer, a pattern, an op), or a list of them."""
    items = node.sequence() if isinstance(node.node, yaml.SequenceNode) else [node]
    return tuple(item.text() for item in items)


def _kernel(node: Node) -> KernelSchedule:
    f = node.mapping(KERNEL_FIELDS, required=("name", "match"))
    if ("schedule" in f) == ("config" in f):
        raise node.fail(
            "give exactly one of 'schedule' (a strategy) or 'config' (a lowering config)"
        )
    match_node = f["match"]
    return KernelSchedule(
        name=f["name"].text(),
        match=_match_spec(match_node, match_node.mapping(MATCH_FIELDS)),
        steps=tuple(_step(s) for s in f["schedule"].sequence()) if "schedule" in f else (),
        config=_config(f["config"]) if "config" in f else None,
        workgroup_size=optional(f, "workgroup_size", Node.ints, None),
        targets=tuple(t.choice(TARGET_NAMES) for t in f["targets"].sequence())
        if "targets" in f
        else None,
        when=optional(f, "when", Node.text, None),
        where=node.where,
    )


def _config(node: Node) -> LoweringConfig:
    f = node.mapping(CONFIG_FIELDS, required=("tile_sizes",))
    root = optional(f, "root", Node.flag, True)
    levels = f["tile_sizes"].mapping(
        {level: "sizes" for level in CONFIG_LEVELS}, required=("workgroup",) * root
    )
    return LoweringConfig(
        tile_sizes=tuple((level, sizes.ints()) for level, sizes in levels.items()),
        workgroup_size=optional(f, "workgroup_size", Node.ints, None),
        pipeline=optional(f, "pipeline", Node.text, None),
        root=root,
        where=node.where,
    )


def _step(node: Node) -> Step:
    """One schedule step, ``{primitive: {option: value, ...}}``, read by its registry entry."""
    if not isinstance(node.node, yaml.MappingNode) or len(node.node.value) != 1:
        raise node.fail(f"a step is a mapping with one key, the primitive: {', '.join(STEPS)}")
    key_node, _ = node.node.value[0]
    primitive = str(construct(key_node, node.where))
    if primitive not in STEPS:
        raise RecipeError(
            node.where.child(primitive, key_node.start_mark.line + 1),
            f"unknown primitive {primitive!r}; available: {', '.join(STEPS)}",
        )
    step = node.mapping({primitive: "step arguments"})[primitive]
    cls = STEPS[primitive].cls
    options = list(step_options(cls))
    allowed: dict[str, str] = {}
    for opt in options:
        allowed.update(MATCH_FIELDS if opt.spec.inline else {opt.key: _describe(opt)})
    required = tuple(o.key for o in options if o.required and not o.spec.inline)
    fields = step.mapping(allowed, required)
    values = {opt.name: _read_option(opt, step, fields) for opt in options}
    return cls(**{k: v for k, v in values.items() if v is not _ABSENT}, where=step.where)


_ABSENT = object()
"""An optional option the step does not give: the dataclass default applies."""


def _describe(opt: StepOption) -> str:
    """The one-line help of an option in 'unknown field' and 'missing field' errors."""
    if opt.spec.kind is Kind.CHOICE:
        return f"{' or '.join(opt.spec.choices)}, default {opt.default}"
    return opt.spec.doc


def _read_option(opt: StepOption, step: Node, fields: dict[str, Node]) -> Any:
    """An option's value as its kind reads it from YAML (checks follow in the model)."""
    kind = opt.spec.kind
    if opt.spec.inline:
        return _match_spec(step, {k: v for k, v in fields.items() if k in MATCH_FIELDS})
    node = fields.get(opt.key)
    if node is None:
        return _ABSENT
    if kind is Kind.MATCH:
        return _match_spec(node, node.mapping(MATCH_FIELDS))
    if kind is Kind.OPS:
        return _match_spec(node, node.mapping(OPS_FIELDS))
    if kind is Kind.INT_GROUPS:
        if isinstance(node.node, yaml.ScalarNode) and node.scalar() == "auto":
            return None
        if not isinstance(node.node, yaml.SequenceNode):
            raise node.fail("expected 'auto' or a list of loop groups, e.g. [[0], [1, 2]]")
        return tuple(group.ints() for group in node.sequence())
    readers: dict[Kind, Callable[[Node], Any]] = {
        Kind.HANDLE: Node.text,
        Kind.CONDITION: Node.text,
        Kind.INT: Node.int_or_param,
        Kind.INTS: Node.ints,
        Kind.FLAG: Node.flag,
        Kind.CHOICE: lambda n: n.choice(opt.spec.choices),
    }
    return readers[kind](node)
