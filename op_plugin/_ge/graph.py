"""Reading a GE GraphDef's structure: input references and a deterministic topological order."""
from __future__ import annotations

import heapq
from collections import defaultdict
from typing import NamedTuple

from .._base.errors import OpPluginError


class GeGraphError(OpPluginError):
    """A GE graph is malformed: duplicate node names, a dangling input, a cycle."""


class DataRef(NamedTuple):
    """A data input: the producing node's name and its output index."""

    node: str
    index: int


class ControlRef(NamedTuple):
    """A control edge (`"name:-1"`): ordering only, no value."""

    node: str


def parse_input(text: str) -> DataRef | ControlRef | None:
    """`"name:i"` -> DataRef; `"name:-1"` -> ControlRef; `""` (an optional input left unfed) -> None."""
    if text == "":
        return None
    name, sep, index = text.rpartition(":")
    if not sep:
        return DataRef(text, 0)
    if index == "-1":
        return ControlRef(name)
    return DataRef(name, int(index))


def topological_order(ops, error: type[GeGraphError] = GeGraphError) -> list:
    """The OpDefs in an order where every node comes after its producers; ties keep graph order.

    Ready nodes are taken by graph position (a heap), so the order is deterministic and close to
    TorchAir's, in O(n log n). `error` is the exception type raised for a malformed graph.
    """
    by_name = {op.name: op for op in ops}
    if len(by_name) != len(ops):
        raise error("GE graph has several nodes with the same name")
    waiting_on = {}
    users = defaultdict(list)
    for op in ops:
        producers = set()
        for text in op.input:
            parsed = parse_input(text)
            if parsed is None:
                continue
            if parsed.node not in by_name:
                raise error(f"node {op.name!r} ({op.type}) reads {text!r}, but the graph has no node {parsed.node!r}")
            producers.add(parsed.node)
        waiting_on[op.name] = len(producers)
        for name in producers:
            users[name].append(op.name)
    position = {op.name: i for i, op in enumerate(ops)}
    ready = [(position[name], name) for name, count in waiting_on.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(by_name[name])
        for user in users[name]:
            waiting_on[user] -= 1
            if waiting_on[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(ops):
        stuck = sorted(name for name, count in waiting_on.items() if count > 0)
        raise error(f"GE graph has a cycle; nodes never ready: {stuck}")
    return order


def op_types(graph_def) -> list[str]:
    """Op types of a GraphDef's nodes in topological order."""
    return [op.type for op in topological_order(list(graph_def.op))]
