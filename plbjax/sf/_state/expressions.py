"""Placement constraint expressions: parse once, then select nodes by their properties.

Semantics follow Service Fabric's own evaluator (microsoft/service-fabric,
src/prod/src/Common/Expression.cpp and Operators.cpp; its caller is
ServiceDomain::IsServiceBlockNode in Reliability/LoadBalancing/ServiceDomain.cpp):

* Precedence, loosest first: ``||``, ``&&``, comparisons, then ``!``. Because
  ``!`` binds tightest, ``!A == B`` is not a negated comparison (SF can never
  evaluate it), so it is rejected here: write ``!(A == B)``.
* A comparison always has a property name on the left and a literal value on
  the right. Names are case-sensitive (SF looks them up in a std::map).
* Comparing numbers: if both the property value and the literal parse whole as
  numbers (like C's wcstod), the comparison is numeric. Otherwise ``==``/``!=``
  compare the strings exactly, *case-sensitively*: ``true`` and ``True`` differ.
  A Python bool property value becomes the string ``"true"``/``"false"``.
  ``<, <=, >, >=`` on values that are not numbers are an error.
* SF's other comparisons are supported too: ``^`` (the property value starts with
  the literal) and ``!^`` (it does not), which are errors on numbers; and
  ``FDPolicy ~ Nonpacking`` / ``PlacePolicy ~ NonPartially``, which are
  policy settings, not filters, so they always count as true.
  The primary-only operators ``^P``/``!^P`` are not supported and raise BadInput.
* Errors: a property missing on the node, or an error listed above, makes the
  *whole* expression false for that node. SF checks both sides of ``&&``/``||``
  before combining them, and ``!`` passes the error through, so
  ``!(Missing == x)`` and ``Ok == 1 || Missing == x`` are both false.
* An empty expression selects every node (SF's Build("") is the literal
  ``true``); here a whitespace-only one does too. A lone ``true``/``false`` is a
  constant. Values may be quoted ('a b' or "a b"); SF itself has no quoting.
* Not modelled: SF's Uri-aware equality and prefix tests for values that parse as
  URIs (e.g. ``fd:/dc1``); here they are compared as plain strings.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import numpy as np

from plbjax.errors import BadInput

PropertyValue = str | int | float | bool
Properties = Mapping[str, PropertyValue]

# Longest spelling first, so that '>=' wins over '>' and '!^P' over '!^' and '!'.
_OPERATORS = ("!^P", "^P", "==", "!=", ">=", "<=", "&&", "||", "!^", "<", ">", "!", "(", ")", "^", "~")
_COMPARISONS = frozenset({"==", "!=", ">=", "<=", "<", ">", "^", "!^"})
_WORD_EXTRA = "_.-:/@#+"  # besides letters and digits, these may appear in bare words
_NUMBER = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.IGNORECASE)


def _text(value: PropertyValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _number(value: PropertyValue) -> float | None:
    """The value as a number when SF would read it as one, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value == "":
        return 0.0  # wcstod reads nothing and stops at the terminator: SF counts "" as 0
    return float(value) if _NUMBER.fullmatch(value) else None


# ---------------------------------------------------------------- syntax tree
# evaluate() returns True/False, or None for an evaluation error (SF's
# OperationResult error), which makes the whole expression false.


@dataclass(frozen=True)
class Const:
    value: bool

    def evaluate(self, props: Properties) -> bool | None:
        return self.value


@dataclass(frozen=True)
class Compare:
    name: str
    op: str
    value: str
    number: float | None = field(init=False, repr=False, compare=False)  # the value, read once

    def __post_init__(self) -> None:
        object.__setattr__(self, "number", _number(self.value))

    def evaluate(self, props: Properties) -> bool | None:
        if self.name not in props:
            return None
        raw = props[self.name]
        left, right = _number(raw), self.number
        if left is not None and right is not None:
            return {
                "==": left == right,
                "!=": left != right,
                ">=": left >= right,
                "<=": left <= right,
                ">": left > right,
                "<": left < right,
            }.get(self.op)
        text = _text(raw)  # ordering comparisons are not in this table: an error on text
        return {
            "==": text == self.value,
            "!=": text != self.value,
            "^": text.startswith(self.value),
            "!^": not text.startswith(self.value),
        }.get(self.op)


@dataclass(frozen=True)
class Policy:
    """``FDPolicy ~ Nonpacking`` and the like: a setting, always true as a filter."""

    name: str
    value: str

    def evaluate(self, props: Properties) -> bool | None:
        return True


@dataclass(frozen=True)
class Not:
    operand: Node

    def evaluate(self, props: Properties) -> bool | None:
        result = self.operand.evaluate(props)
        return None if result is None else not result


@dataclass(frozen=True)
class BoolOp:
    op: str  # "&&" or "||"
    terms: tuple[Node, ...]

    def evaluate(self, props: Properties) -> bool | None:
        results = [term.evaluate(props) for term in self.terms]  # no short cut, as in SF
        if None in results:
            return None
        return all(results) if self.op == "&&" else any(results)


Node = Const | Compare | Policy | Not | BoolOp


@dataclass(frozen=True)
class Expression:
    """An immutable parsed placement constraint expression."""

    source: str
    root: Node
    property_names: frozenset[str]

    def matches(self, properties: Properties) -> bool:
        return self.root.evaluate(properties) is True

    def names(self) -> frozenset[str]:
        """The property names the expression reads."""
        return self.property_names


# -------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Token:
    kind: str  # "op", "word", "quoted" or "end"
    text: str
    col: int  # 1-based


def _error(source: str, message: str) -> BadInput:
    return BadInput(f"PlacementConstraints '{source}': {message}")


def _tokenize(source: str) -> list[_Token]:
    tokens, i, n = [], 0, len(source)
    while i < n:
        c, col = source[i], i + 1
        if c.isspace():
            i += 1
        elif c in "'\"":
            end = source.find(c, i + 1)
            if end < 0:
                raise _error(source, f"unterminated string starting at column {col}")
            tokens.append(_Token("quoted", source[i + 1 : end], col))
            i = end + 1
        elif c.isalnum() or c in _WORD_EXTRA:
            end = i
            while end < n and (source[end].isalnum() or source[end] in _WORD_EXTRA):
                end += 1
            tokens.append(_Token("word", source[i:end], col))
            i = end
        else:
            op = next((op for op in _OPERATORS if source.startswith(op, i)), None)
            if op is None:
                hint = {"=": "==", "&": "&&", "|": "||"}.get(c)
                hint = f" (did you mean '{hint}'?)" if hint else ""
                raise _error(source, f"unexpected character '{c}' at column {col}{hint}")
            if op in ("^P", "!^P"):
                raise _error(source, f"primary-only operator '{op}' at column {col} is not supported")
            tokens.append(_Token("op", op, col))
            i += len(op)
    tokens.append(_Token("end", "", n + 1))
    return tokens


class _Parser:
    """Recursive descent: or := and ('||' and)*;  and := unary ('&&' unary)*;
    unary := '!' unary | '(' or ')' | NAME cmp VALUE | true | false."""

    def __init__(self, source: str):
        self.source = source
        self.tokens = _tokenize(source)
        self.pos = 0
        self.names: set[str] = set()

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        self.pos += 1
        return self.tokens[self.pos - 1]

    def at(self, op: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text == op

    def fail(self, token: _Token, expected: str) -> NoReturn:
        what = "end of expression" if token.kind == "end" else f"'{token.text}'"
        raise _error(self.source, f"unexpected {what} at column {token.col} (expected {expected})")

    def parse(self) -> Node:
        if self.peek().kind == "end":
            return Const(True)
        node = self.or_()
        if self.peek().kind != "end":
            self.fail(self.peek(), "'&&', '||' or end of expression")
        return node

    def or_(self) -> Node:
        return self.chain("||", self.and_)

    def and_(self) -> Node:
        return self.chain("&&", self.unary)

    def chain(self, op: str, operand) -> Node:
        terms = [operand()]
        while self.at(op):
            self.take()
            terms.append(operand())
        return terms[0] if len(terms) == 1 else BoolOp(op, tuple(terms))

    def unary(self) -> Node:
        if self.at("!"):
            self.take()
            following = self.peek()
            if following.kind in ("word", "quoted") and following.text not in ("true", "false"):
                self.fail(following, "'(' after '!', which binds tighter than comparisons: write !(...)")
            return Not(self.unary())
        if self.at("("):
            opening = self.take()
            node = self.or_()
            if not self.at(")"):
                self.fail(self.peek(), f"')' to close '(' at column {opening.col}")
            self.take()
            return node
        return self.comparison()

    def comparison(self) -> Node:
        left = self.peek()
        if left.kind not in ("word", "quoted"):
            self.fail(left, "a property name, '(' or '!'")
        self.take()
        op = self.peek()
        if op.kind == "op" and (op.text in _COMPARISONS or op.text == "~"):
            self.take()
            right = self.peek()
            if right.kind not in ("word", "quoted"):
                self.fail(right, f"a value after '{op.text}'")
            self.take()
            if op.text == "~":
                return Policy(left.text, right.text)
            self.names.add(left.text)
            return Compare(left.text, op.text, right.text)
        if left.kind == "word" and left.text in ("true", "false"):
            return Const(left.text == "true")
        self.fail(op, f"a comparison operator after '{left.text}'")


@functools.lru_cache(maxsize=4096)
def _parse_cached(source: str) -> Expression:
    parser = _Parser(source)
    root = parser.parse()
    return Expression(source, root, frozenset(parser.names))


def parse(source: str | None) -> Expression:
    """Parse a placement constraint; None or blank selects every node. Raises BadInput."""
    if source is None:
        source = ""
    if not isinstance(source, str):
        raise BadInput(f"PlacementConstraints must be a string, not {type(source).__name__}")
    return _parse_cached(source)


def node_mask(source: str | None, node_properties: Sequence[Properties]) -> np.ndarray:
    """bool[len(node_properties)]: which nodes the expression selects."""
    expression = parse(source)
    return np.fromiter((expression.matches(p) for p in node_properties), dtype=bool, count=len(node_properties))
