"""The `size:` language: a small, safe expression language for output shapes.

An expression is parsed with `ast.parse` (parsing only, nothing is executed), checked against a
whitelist and a tiny type system when the YAML file is loaded, and compiled into plain closures.
Evaluation never calls Python's eval/exec, and it keeps symbolic sizes symbolic: `max`/`min` use
`torch.sym_max`/`torch.sym_min` (the builtins would guard and specialise a SymInt), and `//`, `%`,
`+`, `-`, `*` go straight to SymInt arithmetic.

Grammar: argument names, `.shape`, `.dim()`, `len()`, indexing and slicing, `*` unpacking inside a
list, `+ - * // %`, unary `-`, `max`/`min`, integer literals and list literals.
"""
from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .schema import ArgKind, Schema


class SizeExprError(ValueError):
    pass


class _T(enum.Enum):
    """Static types of sub-expressions."""

    TENSOR = "a tensor"
    TENSORS = "a list of tensors"
    INT = "an integer"
    INTS = "a list of integers"


_ARG_TYPE = {
    ArgKind.TENSOR: _T.TENSOR,
    ArgKind.OPTIONAL_TENSOR: _T.TENSOR,
    ArgKind.TENSOR_LIST: _T.TENSORS,
    ArgKind.INT: _T.INT,
    ArgKind.INT_LIST: _T.INTS,
}

Evaluator = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class SizeExpr:
    """A checked `size:` expression, ready to evaluate on an op's bound arguments."""

    text: str
    names: frozenset[str]
    _evaluate: Evaluator
    tree: ast.expr  # the checked syntax tree, for generators that translate the rule (op-plugin opproto)

    def evaluate(self, args: Mapping[str, Any]) -> list:
        """Evaluate on the bound arguments (real, fake or meta tensors); returns a list of (Sym)ints."""
        for name in self.names:
            if args.get(name, 0) is None:
                raise SizeExprError(f"size '{self.text}' uses argument '{name}', which is None in this call")
        return list(self._evaluate(args))


def compile_size_expr(text: str, schema: Schema) -> SizeExpr:
    """Check `text` against the grammar and the op's arguments; raises SizeExprError."""
    if not isinstance(text, str) or not text.strip():
        raise SizeExprError("expected a non-empty string such as \"[*x.shape[:-1], w.shape[0]]\"")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise SizeExprError(f"cannot parse '{text}': {exc.msg}") from None
    _check_cost(tree, text)
    compiler = _Compiler(schema, text)
    typ, fn = compiler.compile(tree.body)
    if typ is not _T.INTS:
        raise SizeExprError(f"'{text}' is {typ.value}; a size must be a list of integers, e.g. \"[{text}]\" or x.shape")
    return SizeExpr(text, frozenset(compiler.names), fn, tree.body)


# Bounds on one expression: its size (the compiler recurses per node) and how many of * // % it
# has, whose symbolic forms sympy must simplify on every dynamic-shape compile (15 of them took 27 s).
MAX_NODES = 120
MAX_NONLINEAR = 8
MAX_LITERAL = (1 << 63) - 1


def _check_cost(tree: ast.AST, text: str) -> None:
    nodes = list(ast.walk(tree))  # iterative: safe on any depth ast.parse accepted
    if len(nodes) > MAX_NODES:
        raise SizeExprError(f"'{text[:60]}...' is too long ({len(nodes)} syntax nodes, at most {MAX_NODES}); "
                            "write the rule as a Meta function")
    nonlinear = sum(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.FloorDiv, ast.Mod)) for n in nodes)
    if nonlinear > MAX_NONLINEAR:
        raise SizeExprError(f"'{text[:60]}' has {nonlinear} of * // % (at most {MAX_NONLINEAR}): symbolic shapes "
                            "would cost seconds per compile; write the rule as a Meta function")


class _Compiler:
    def __init__(self, schema: Schema, text: str):
        self.schema = schema
        self.text = text
        self.names: set[str] = set()

    def fail(self, node: ast.AST, message: str) -> SizeExprError:
        snippet = ast.get_source_segment(self.text.strip(), node) or self.text
        return SizeExprError(f"in '{self.text}': {message} (at '{snippet}')")

    def compile(self, node: ast.AST) -> tuple[_T, Evaluator]:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise self.fail(node, f"{type(node).__name__} is not allowed; the size language has names, .shape, "
                                  ".dim(), len(), indexing, slicing, [*list], + - * // %, max, min and integers")
        return method(node)

    def expect(self, node: ast.AST, *wanted: _T) -> Evaluator:
        typ, fn = self.compile(node)
        if typ not in wanted:
            raise self.fail(node, f"expected {' or '.join(w.value for w in wanted)}, got {typ.value}")
        return fn

    def _Name(self, node: ast.Name):
        arg = self.schema.arg(node.id)
        if arg is None:
            names = ", ".join(a.name for a in self.schema.args)
            raise self.fail(node, f"unknown name '{node.id}'; the op's arguments are: {names}")
        typ = _ARG_TYPE.get(arg.kind)
        if typ is None:
            raise self.fail(node, f"argument '{node.id}' is {arg.kind.value}; sizes can use tensors, "
                                  "tensor lists, ints and int lists")
        self.names.add(node.id)
        name = node.id
        return typ, lambda a: a[name]

    def _Constant(self, node: ast.Constant):
        if type(node.value) is not int:
            raise self.fail(node, "only integer literals are allowed")
        value = node.value
        if value > MAX_LITERAL:  # a size is an int64 in GE and in the generated infer functions
            raise self.fail(node, f"the integer literal is larger than {MAX_LITERAL} (sizes are int64)")
        return _T.INT, lambda a: value

    def _Attribute(self, node: ast.Attribute):
        if node.attr != "shape":
            raise self.fail(node, f"'.{node.attr}' is not allowed; use .shape or .dim()")
        base = self.expect(node.value, _T.TENSOR)
        return _T.INTS, lambda a: tuple(base(a).shape)

    def _Call(self, node: ast.Call):
        if node.keywords:
            raise self.fail(node, "keyword arguments are not allowed")
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr != "dim" or node.args:
                raise self.fail(node, "the only method is .dim()")
            base = self.expect(func.value, _T.TENSOR)
            return _T.INT, lambda a: base(a).dim()
        if not isinstance(func, ast.Name) or func.id not in ("len", "max", "min"):
            raise self.fail(node, "the only functions are len, max and min")
        if func.id == "len":
            if len(node.args) != 1:
                raise self.fail(node, "len takes one argument")
            inner = self.expect(node.args[0], _T.INTS, _T.TENSORS)
            return _T.INT, lambda a: len(inner(a))
        if len(node.args) < 2:
            raise self.fail(node, f"{func.id} takes two or more integers")
        parts = [self.expect(arg, _T.INT) for arg in node.args]
        combine = torch.sym_max if func.id == "max" else torch.sym_min

        def reduce(a):
            result = parts[0](a)
            for part in parts[1:]:
                result = combine(result, part(a))
            return result

        return _T.INT, reduce

    def _Subscript(self, node: ast.Subscript):
        base_type, base = self.compile(node.value)
        if base_type not in (_T.INTS, _T.TENSORS):
            raise self.fail(node, f"cannot index {base_type.value}")
        if isinstance(node.slice, ast.Slice):
            parts = [self.expect(p, _T.INT) if p is not None else None
                     for p in (node.slice.lower, node.slice.upper, node.slice.step)]
            return base_type, lambda a: tuple(base(a))[slice(*(p(a) if p else None for p in parts))]
        index = self.expect(node.slice, _T.INT)
        element = _T.INT if base_type is _T.INTS else _T.TENSOR
        return element, lambda a: base(a)[index(a)]

    def _List(self, node: ast.List):
        parts = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                parts.append((True, self.expect(element.value, _T.INTS)))
            else:
                parts.append((False, self.expect(element, _T.INT)))

        def build(a):
            out = []
            for starred, fn in parts:
                if starred:
                    out.extend(fn(a))
                else:
                    out.append(fn(a))
            return tuple(out)

        return _T.INTS, build

    def _Tuple(self, node: ast.Tuple):
        raise self.fail(node, "use a list [..] for sizes, not a tuple")

    def _UnaryOp(self, node: ast.UnaryOp):
        if not isinstance(node.op, ast.USub):
            raise self.fail(node, "the only unary operator is -")
        inner = self.expect(node.operand, _T.INT)
        return _T.INT, lambda a: -inner(a)

    _BINOPS = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
               ast.FloorDiv: lambda x, y: x // y, ast.Mod: lambda x, y: x % y}

    def _BinOp(self, node: ast.BinOp):
        op = self._BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"operator {type(node.op).__name__} is not allowed; use + - * // %")
        left_type, left = self.compile(node.left)
        right_type, right = self.compile(node.right)
        if left_type is _T.INT and right_type is _T.INT:
            return _T.INT, lambda a: op(left(a), right(a))
        if isinstance(node.op, ast.Add) and left_type is right_type is _T.INTS:
            return _T.INTS, lambda a: tuple(left(a)) + tuple(right(a))
        raise self.fail(node, f"cannot apply {type(node.op).__name__} to {left_type.value} and {right_type.value}")
