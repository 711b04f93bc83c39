"""What one walk of a function's body tells the rules that ask, computed once per function per file.

`SemanticModel.function_facts(def_node)` walks the body on the first question (nested defs, lambdas and
classes included, as a search of the body would) and keeps:

- `calls`: every call, in the walk's order (rules resolve their callees when they ask, with the scopes of
  that moment: names the function binds further down are not bound yet);
- `assignments`: `name = value` (plain name targets), each name's values in the walk's order;
- `iterated_names`: names a `for` or a comprehension iterates directly (`for chunk in resp`);
- `reads_field(name, fields)`: the body reads one of `fields` off `name` (`name.usage`,
  `getattr(name, "usage", None)`);
- `label_names`: names the body tests against a one-word literal (`"yes" in answer`, `verdict == "relevant"`,
  `answer.lower().startswith("no")`, `label in ("a", "b")`): what a model asked for a label answers.

Purely syntactic: no catalog knowledge, nothing resolved. The small syntactic helpers rules share about
tests (`tested_empty`, `root_names`, `first_word`, `annotation_name`) live here too.
"""

from __future__ import annotations

import re

import libcst as cst

from llmdoctor.scan.fastwalk import code_children

WORD_MAX = 12  # `"yes"`, `"relevant"`, `"irrelevant"`: a label word, not a phrase
NORMALISING_METHODS = frozenset({"strip", "lower", "upper", "casefold", "lstrip", "rstrip", "title"})
FIRST_WORD = re.compile(r"[\s\W_]*([A-Za-z]+)")


class FunctionFacts:
    """The facts of one def's body (see the module docstring); built by `SemanticModel.function_facts`."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.calls: list[cst.Call] = []
        self.assignments: dict[str, list[cst.BaseExpression]] = {}
        self.iterated_names: set[str] = set()
        self._attributes: dict[str, set[str]] = {}  # name -> attributes read off it
        self._getattrs: dict[str, list[cst.SimpleString]] = {}  # name -> `getattr(name, "<field>")` fields
        self._comparisons: list[cst.Comparison] = []
        self._labels: set[str] | None = None
        calls, assignments, attributes = self.calls, self.assignments, self._attributes
        stack: list[cst.CSTNode] = [function.body]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is cst.Attribute:
                if type(node.value) is cst.Name:
                    attributes.setdefault(node.value.value, set()).add(node.attr.value)
            elif kind is cst.Call:
                calls.append(node)
                if type(node.func) is cst.Name and node.func.value == "getattr" and len(node.args) >= 2:
                    owner, field = node.args[0].value, node.args[1].value
                    if type(owner) is cst.Name and type(field) is cst.SimpleString:
                        self._getattrs.setdefault(owner.value, []).append(field)
            elif kind is cst.Assign:
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        assignments.setdefault(target.target.value, []).append(node.value)
            elif kind is cst.Comparison:
                self._comparisons.append(node)
            elif (kind is cst.For or kind is cst.CompFor) and type(node.iter) is cst.Name:
                self.iterated_names.add(node.iter.value)
            stack.extend(code_children(node))

    def reads_field(self, name: str, fields: frozenset[str]) -> bool:
        """The body reads one of `fields` off `name`: `name.usage`, `getattr(name, "usage", ...)`."""
        if not fields.isdisjoint(self._attributes.get(name, ())):
            return True
        return any(field.evaluated_value in fields for field in self._getattrs.get(name, ()))

    @property
    def label_names(self) -> set[str]:
        """Names tested against a one-word literal: the model was asked for a label (computed on first use)."""
        if self._labels is None:
            found = self._labels = set()
            for node in self._comparisons:
                left = node.left
                for target in node.comparisons:
                    right = target.comparator
                    if isinstance(target.operator, (cst.In, cst.NotIn)):
                        if _word(left):
                            found.update(_tested_name(right))
                        elif isinstance(right, (cst.Tuple, cst.List, cst.Set)) and right.elements and all(
                                _word(el.value) for el in right.elements):
                            found.update(_tested_name(left))
                    elif isinstance(target.operator, (cst.Equal, cst.NotEqual)):
                        if _word(right):
                            found.update(_tested_name(left))
                        elif _word(left):
                            found.update(_tested_name(right))
                    left = right
            for node in self.calls:
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("startswith", "endswith") \
                        and node.args and _word(node.args[0].value):
                    found.update(_tested_name(node.func.value))
        return self._labels


def _word(expr: cst.BaseExpression) -> bool:
    """A one-word string literal (`"yes"`, `"RELEVANT"`): what a model asked for a label answers."""
    if not isinstance(expr, cst.SimpleString):
        return False
    value = expr.evaluated_value
    return isinstance(value, str) and 0 < len(value) <= WORD_MAX and value.isalpha()


def _tested_name(expr: cst.BaseExpression) -> set[str]:
    """The name a test reads, through normalising calls: `answer`, `answer.strip().lower()`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value in NORMALISING_METHODS:
        expr = expr.func.value
    return {expr.value} if isinstance(expr, cst.Name) else set()


# ---------------------------------------------------------------------------------------- tests and literals

def tested_empty(test: cst.BaseExpression) -> set[str]:
    """Root names an `if` test finds empty: `not x`, `x is None`, `x == ""`, `len(x) == 0`, `*empty*(x.content)`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return root_names([test.expression])
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return tested_empty(test.left) | tested_empty(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        empty_literal = (isinstance(target.comparator, cst.Name) and target.comparator.value == "None") or (
            isinstance(target.comparator, cst.SimpleString) and target.comparator.evaluated_value == "") or (
            isinstance(target.comparator, cst.Integer) and target.comparator.value == "0")
        if empty_literal and isinstance(target.operator, (cst.Is, cst.Equal)):
            left = test.left
            if isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "len":
                return root_names([a.value for a in left.args])
            return root_names([left])
    if isinstance(test, cst.Call):
        name = test.func.attr.value if isinstance(test.func, cst.Attribute) else (
            test.func.value if isinstance(test.func, cst.Name) else "")
        if "empty" in name.lower():
            return root_names([a.value for a in test.args])
    return set()


def root_names(exprs) -> set[str]:
    """The names under attribute and subscript chains: `msg.content` -> `msg`, `data["x"][0]` -> `data`."""
    roots = set()
    for expr in exprs:
        while isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        if isinstance(expr, cst.Name):
            roots.add(expr.value)
    return roots


def first_word(expr: cst.BaseExpression) -> str | None:
    """The first word of a string literal or f-string's text, lower case (`"ERROR. No chunks"` -> `error`)."""
    text = None
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        text = value if isinstance(value, str) else None
    elif isinstance(expr, cst.FormattedString) and expr.parts and isinstance(expr.parts[0], cst.FormattedStringText):
        text = expr.parts[0].value
    if not text:
        return None
    match = FIRST_WORD.match(text)
    return match.group(1).lower() if match else None


def annotation_name(annotation: cst.BaseExpression) -> str | None:
    """The last name of an annotation: `int` -> `int`, `datetime.datetime` -> `datetime`; None otherwise."""
    if isinstance(annotation, cst.Name):
        return annotation.value
    if isinstance(annotation, cst.Attribute):
        return annotation.attr.value
    return None


_OWN_SCOPE_ENDS = (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)


def holds(node: cst.CSTNode, kinds: tuple[type, ...]) -> bool:
    """Whether a statement of `kinds` (`return`, `break`) lies under `node` for `node`'s own flow: not inside a
    nested loop (its `break` ends that loop), function, class or lambda."""
    stack = list(node.children)
    while stack:
        child = stack.pop()
        if isinstance(child, kinds):
            return True
        if not isinstance(child, _OWN_SCOPE_ENDS):
            stack.extend(child.children)
    return False
