"""ONNX node names, which become layer names, kept through the opset upgrade.

Every node is named before ONNX's version converter runs. The converter keeps the nodes it
adapts in place (with their names) but leaves the nodes it creates unnamed: constants that
carry former attributes, a ``Resize`` replacing an ``Upsample``, the ``Flatten`` and
``Reshape`` around an opset-9 ``Softmax`` (whose axis meant "flatten from here").
:func:`restore_names` gives each of those the name of the model node it stands for, traced
through the data flow, so all ops of one model node stay one layer.

The graph's name becomes the entry function's (:func:`function_name`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx


def function_name(graph_name: str) -> str:
    """The entry function's name for a graph named ``graph_name``: any text is a legal
    graph name (``torch-jit-export``, as older ``torch.onnx.export`` writes), but IREE
    names the dispatches after the function and tdsched finds them by that name, so it is
    kept to letters, digits and ``_`` (``torch_jit_export``; no name: ``main``)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", graph_name) or "main"
    return f"_{name}" if name[0].isdigit() else name


def name_nodes(graph: onnx.GraphProto) -> None:
    """Give every node a unique name. Names in the model are kept (the first of
    duplicates); an unnamed node is named after its op type, a repeated name is kept as
    the base, and ``_<index>`` is appended until the name is unused."""
    reserved = {node.name for node in graph.node if node.name}
    used: set[str] = set()
    for index, node in enumerate(graph.node):
        if not node.name or node.name in used:
            node.name = _free_name(node.name or node.op_type, index, used | reserved)
        used.add(node.name)


def name_unnamed(graph: onnx.GraphProto) -> None:
    """Name the nodes that have no name as :func:`name_nodes` does, leaving named ones
    (which may share a name: the nodes one model node was converted to) as they are."""
    used = {node.name for node in graph.node if node.name}
    for index, node in enumerate(graph.node):
        if not node.name:
            node.name = _free_name(node.op_type, index, used)
            used.add(node.name)


def _free_name(base: str, index: int, used: set[str]) -> str:
    """``base``, with ``_<index>`` appended until it is not in ``used``."""
    name = base
    while name in used:
        name = f"{name}_{index}"
    return name


def restore_names(original: Sequence[onnx.NodeProto], graph: onnx.GraphProto) -> None:
    """Name the nodes of the converted ``graph`` that the version converter created
    after the ``original`` node (all named) each stands for; untraceable ones stay unnamed.

    The converter either replaces a node (the original name is gone; the new node reads
    the original node's inputs, its output may get a fresh value name) or puts adapters
    around a node it keeps (constants for former attributes, a reshape before or after).
    So a created node stands for, in this order:

    1. the original producer of a value it writes (an adapter after a node, writing that
       node's former output);
    2. the original node, now gone, that read a value it reads (the replacement);
    3. the one node all its consumers stand for (an adapter before a node).
    """
    kept = {node.name for node in graph.node}
    producer = {value: node.name for node in original for value in node.output if value}
    gone_readers: dict[str, set[str]] = {}
    for node in original:
        if node.name not in kept:
            for value in node.input:
                gone_readers.setdefault(value, set()).add(node.name)
    origin: dict[int, str] = {}
    for index, node in enumerate(graph.node):
        if node.name:
            continue
        found = {producer[v] for v in node.output if v in producer}
        found = found or set().union(*(gone_readers.get(v, set()) for v in node.input))
        if len(found) == 1:
            origin[index] = found.pop()
    consumers = _consumers(graph.node)
    for index in reversed(range(len(graph.node))):  # consumers before their producers
        node = graph.node[index]
        if node.name:
            origin[index] = node.name
        elif index not in origin:
            users = {origin.get(u) for v in node.output for u in consumers.get(v, ())}
            if len(users) == 1 and None not in users:
                origin[index] = str(users.pop())
    for index, name in origin.items():
        graph.node[index].name = name


def _consumers(nodes: Iterable[onnx.NodeProto]) -> dict[str, list[int]]:
    """For each value, the indices of the nodes that read it."""
    found: dict[str, list[int]] = {}
    for index, node in enumerate(nodes):
        for value in node.input:
            found.setdefault(value, []).append(index)
    return found
