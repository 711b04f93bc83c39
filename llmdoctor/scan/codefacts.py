"""What CPython's own parser (`ast`, in C, ~10x faster than libcst) tells about a file, in one walk.

- `CodeFacts.code_text()`: what the code spells out, for the pre-filters' second stage (prefilter.py):
  every identifier of the grammar, every dotted attribute chain, the Python keywords, `async def` once per
  coroutine function and `<kwarg>=None` per keyword argument given a literal None. No comments, docstrings
  or string contents.
- `units`: the parts regions.py may leave out of libcst's parse, each with the words it holds, the calls it
  makes (callee chains), the names and attributes it binds, what it imports, whether it holds an
  `async def`; and the module-level bindings, so a unit's names can be followed to what they were bound to.

A unit is a def or class outside any def (module level, possibly under `if`/`try`...), a def or class
directly in the body of a class unit, or a simple statement of the module's own body over `MIN_LINES` lines or
more, or of `MIN_CHARS` characters or more on fewer lines (a data table, a long call), that imports nothing. What is inside a def belongs to that def's unit.
"""

from __future__ import annotations

import ast
import keyword as _keyword
import re
import warnings
from dataclasses import dataclass, field

KEYWORDS = " ".join([*_keyword.kwlist, *getattr(_keyword, "softkwlist", [])])

_SCALAR_TYPES = frozenset({"identifier", "int", "string", "constant"})
_SKIPPED_TYPES = frozenset({"expr_context", "boolop", "operator", "unaryop", "cmpop", "type_ignore"})


def _grammar() -> tuple[dict[type, tuple[str, ...]], dict[type, tuple[str, ...]]]:
    """Per ast node type: its fields of ASDL type `identifier`, and its fields that may hold nodes worth
    entering (read from the classes' signatures, e.g. `FunctionDef(identifier name, arguments args, ...)`)."""
    identifiers: dict[type, tuple[str, ...]] = {}
    nodes: dict[type, tuple[str, ...]] = {}
    for value in vars(ast).values():
        if not (isinstance(value, type) and issubclass(value, ast.AST) and value.__doc__ and value._fields):
            continue
        signature = re.match(r"\w+\((.*)\)\s*$", value.__doc__.strip().splitlines()[0])
        if signature is None:
            continue
        for declared in signature.group(1).split(","):
            kind, _, name = declared.strip().partition(" ")
            kind = kind.rstrip("*?")
            if name not in value._fields:
                continue
            if kind == "identifier":
                identifiers[value] = (*identifiers.get(value, ()), name)
            elif kind not in _SCALAR_TYPES and kind not in _SKIPPED_TYPES:
                nodes[value] = (*nodes.get(value, ()), name)
    return identifiers, nodes


IDENTIFIER_FIELDS, NODE_FIELDS = _grammar()
# the methods that put a value into a container (`parts.append(chunk)`): the container holds it from there on
COLLECTING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "add"})

MIN_LINES = 3  # a unit over fewer lines is never left out: the saving would not pay for the bookkeeping
MIN_CHARS = 1_000  # ... unless it is a statement this long (a 1.8 MB one-line list: 66 s and 4.5 GB in libcst)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = ("body", "orelse", "finalbody")  # statement lists of compound statements (plus handlers, cases)


@dataclass(eq=False)
class Facts:
    """What a stretch of code spells out, binds and calls."""

    words: set[str] = field(default_factory=set)  # identifiers, attribute and keyword names, import parts
    strings: set[str] = field(default_factory=set)  # string constants that are identifiers (`d["messages"]`)
    stored_attrs: set[str] = field(default_factory=set)  # `x.attr = ...` (any assignment target)
    stored_names: set[str] = field(default_factory=set)  # names bound (targets, imports), not parameters
    called: set[str] = field(default_factory=set)  # each callee's last name: `f` in f(), `create` in a.create()
    calls: set[tuple[str, ...]] = field(default_factory=set)  # callee chains from a name: ("c", "create")
    params: set[str] = field(default_factory=set)  # annotated parameters (an instance of the annotation)
    imports: set[str] = field(default_factory=set)  # dotted names imported: module, module.name
    self_names: set[str] = field(default_factory=set)  # methods: the first parameter (`self`, `cls`)
    is_async: bool = False  # it is, or holds, an `async def`

    def add(self, other: Facts) -> None:
        for name in _SET_FIELDS:
            getattr(self, name).update(getattr(other, name))
        self.is_async = self.is_async or other.is_async

    def copy(self) -> Facts:
        return Facts(**{name: set(getattr(self, name)) for name in _SET_FIELDS}, is_async=self.is_async)


_SET_FIELDS = tuple(name for name, spec in Facts.__dataclass_fields__.items() if name != "is_async")
_NOTHING: frozenset[str] = frozenset()


def _compact(facts: Facts) -> None:
    """Share one empty frozenset for the fields a unit left empty (most of its ten: 200 bytes each, 190 MB
    for 100,000 small functions). A unit is read-only once read; `Facts.copy` makes sets again."""
    fields = facts.__dict__
    for name in _SET_FIELDS:
        if not fields[name]:
            fields[name] = _NOTHING


@dataclass(eq=False, kw_only=True)
class Unit(Facts):
    node: ast.stmt  # a def, a class, or a simple statement of the module's body
    parent: Unit | None  # the class unit holding this method or nested class; None at module level
    children: list[Unit] = field(default_factory=list)  # class units: methods and nested classes
    annotated: dict[str, set[str]] = field(default_factory=dict)  # class units: `name: T` -> its words
    alone: bool = True  # statement units: no other statement shares its first or last line
    block: int = 0  # id() of the statement list holding it (units of one list are siblings)
    position: int = 0  # its index in that list

    @property
    def is_class(self) -> bool:
        return type(self.node) is ast.ClassDef

    @property
    def is_def(self) -> bool:
        return type(self.node) in _DEFS


@dataclass
class CodeFacts:
    units: list[Unit]  # module-level units; class units hold theirs in `children`
    outside: Facts  # the module-level code outside every unit (imports, short statements, `if`/`try` blocks)
    extras: list[str]  # chains, `async def`, `<kwarg>=None`
    bound_by: dict[str, set[str]]  # module-level name -> words of the statements (or headers) binding it
    module_imports: list[tuple[str, str]]  # (local name, qualified name) of module-level imports, in order
    assigned: set[str]  # names bound by module-level statements other than imports (and defs, classes)
    tree: ast.Module | None = None  # CPython's tree of the file (parseguard.py measures its nesting)

    @property
    def words(self) -> set[str]:
        """The words outside every unit."""
        return self.outside.words

    def code_text(self) -> str:
        words = set(self.words)
        stack = list(self.units)
        while stack:
            unit = stack.pop()
            words |= unit.words
            stack.extend(unit.children)
        return " ".join([KEYWORDS, *self.extras, *words])

    def release(self) -> None:
        """Break the unit <-> parent cycles (once nothing reads the facts), so that reference counting frees
        the units and the tree they point into as soon as the file is done."""
        for unit in self.every_unit():
            unit.parent = None
            unit.children = []

    def every_unit(self) -> list[Unit]:
        out, stack = [], list(self.units)
        while stack:
            unit = stack.pop()
            out.append(unit)
            stack.extend(unit.children)
        return out


def parse_python(source: str) -> ast.Module | None:
    """CPython's tree of `source`, or None when `ast` cannot parse it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc.: libcst's parse is the one that reports
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def read_code(source: str, tree: ast.Module | None = None) -> CodeFacts | None:
    """The facts of `source` (parsed as `tree` when given), or None when `ast` cannot parse it."""
    if tree is None:
        tree = parse_python(source)
        if tree is None:
            return None
    reader = _Reader()
    reader.statements(tree.body, None, reader.outside, module_level=True, top=True)
    facts = CodeFacts(units=reader.units, outside=reader.outside, extras=reader.extras,
                      bound_by=reader.bound_by, module_imports=reader.module_imports, assigned=reader.assigned,
                      tree=tree)
    return facts


class _Reader:
    def __init__(self) -> None:
        self.units: list[Unit] = []
        self.outside = Facts()
        self.extras: list[str] = []
        self.bound_by: dict[str, set[str]] = {}
        self.module_imports: list[tuple[str, str]] = []
        self.assigned: set[str] = set()

    def statements(self, body: list, klass: Unit | None, bucket, *, module_level: bool, top: bool = False) -> None:
        for index, statement in enumerate(body):
            kind = type(statement)
            if kind in _DEFS or kind is ast.ClassDef:
                unit = Unit(node=statement, parent=klass, block=id(body), position=index)
                (klass.children if klass is not None else self.units).append(unit)
                if kind is ast.ClassDef:
                    self.collect([getattr(statement, name, None) for name in NODE_FIELDS[kind] if name != "body"],
                                 unit)
                    unit.words.add(statement.name)
                    self.statements(statement.body, unit, unit, module_level=False)
                    unit.is_async = unit.is_async or any(child.is_async for child in unit.children)
                else:
                    self.collect([statement], unit)
                    if klass is not None:  # (a staticmethod's first parameter too: never fewer candidates)
                        positional = [*statement.args.posonlyargs, *statement.args.args]
                        if positional:
                            unit.self_names.add(positional[0].arg)
                _compact(unit)
                continue
            if kind is ast.AnnAssign and klass is not None and type(statement.target) is ast.Name:
                site = Facts()  # `client: OpenAI` in a class body types `self.client` in its methods
                self.collect([statement], site)
                klass.annotated.setdefault(statement.target.id, set()).update(site.words)
                bucket.add(site)
                continue
            headers = [getattr(statement, name, None) for name in NODE_FIELDS.get(kind, ()) if name not in _BLOCKS
                       and name not in ("handlers", "cases")]
            blocks = [getattr(statement, name, None) or [] for name in _BLOCKS if name in NODE_FIELDS.get(kind, ())]
            for handler in getattr(statement, "handlers", None) or ():  # except clauses
                headers.extend((handler.type, handler.name and ast.Name(handler.name, ast.Store())))
                blocks.append(handler.body)
            for case in getattr(statement, "cases", None) or ():  # match cases
                headers.extend((case.pattern, case.guard))
                blocks.append(case.body)
            if not blocks:
                headers = [statement]
            if module_level:
                site = Facts()
                if top and not blocks and kind is not ast.Import and kind is not ast.ImportFrom and (
                        (statement.end_lineno or 0) - statement.lineno + 1 >= MIN_LINES
                        or (statement.end_col_offset or 0) - statement.col_offset >= MIN_CHARS):
                    site = Unit(node=statement, parent=None, alone=_alone(body, index), block=id(body),
                                position=index)
                    self.units.append(site)
                self.collect(headers, site)
                if type(site) is Unit:
                    _compact(site)
                if kind is ast.Import or kind is ast.ImportFrom:  # each name brings its own qualified name
                    targets = _import_targets(statement)
                    self.module_imports.extend(targets)
                    for local, qualified in targets:
                        self.bound_by.setdefault(local, set()).update((local, *qualified.split(".")))
                else:
                    self.assigned |= site.stored_names
                    for name in site.stored_names:
                        self.bound_by.setdefault(name, set()).update(site.words)
                if type(site) is Facts:  # (a unit's facts stay its own)
                    bucket.add(site)
            else:
                self.collect(headers, bucket)
            for block in blocks:
                self.statements(block, klass, bucket, module_level=module_level)

    def collect(self, roots: list, bucket) -> None:
        """Add what the subtrees under `roots` spell out to `bucket`, with the names they bind (assignment
        and loop targets, walrus, `as` names, parameters, imports, match captures) and the names they call."""
        words, strings, extras = bucket.words, bucket.strings, self.extras
        stored, called, calls, params = bucket.stored_names, bucket.called, bucket.calls, bucket.params
        fields_of, node_fields = IDENTIFIER_FIELDS, NODE_FIELDS
        name_node, attribute, keyword_arg, constant, call = ast.Name, ast.Attribute, ast.keyword, ast.Constant, ast.Call
        store = ast.Store
        stack: list = []
        for root in roots:
            if type(root) is list:
                stack.extend(root)
            elif root is not None:
                stack.append(root)
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is name_node:  # the most frequent nodes first, without the generic field loops
                words.add(node.id)
                if type(node.ctx) is store:
                    stored.add(node.id)
                continue
            if kind is constant:
                if type(node.value) is str and node.value.isidentifier():
                    strings.add(node.value)
                continue
            if kind is attribute:  # a whole chain at once: `a.b.c` -> words b, c; the chain; then `a`
                if type(node.ctx) is store:
                    bucket.stored_attrs.add(node.attr)
                parts = [node.attr]
                value = node.value
                while type(value) is attribute:
                    parts.append(value.attr)
                    value = value.value
                words.update(parts)
                if type(value) is name_node:
                    parts.append(value.id)
                extras.append(".".join(reversed(parts)))  # the longest chain holds every shorter one
                stack.append(value)
                continue
            if node is None:
                continue  # `None` keys of `{**d}`
            for name in node_fields.get(kind, ()):
                value = getattr(node, name, None)
                if type(value) is list:
                    stack.extend(value)
                elif value is not None:
                    stack.append(value)
            for name in fields_of.get(kind, ()):
                value = getattr(node, name, None)
                if value is None:
                    continue
                if type(value) is str:
                    words.update(value.split("."))
                else:
                    for item in value:
                        words.update(item.split("."))
            if kind is call:
                chain = []  # `a.b().c(...)`: c, b, a (a call in the chain passes its callee's name on)
                func = node.func
                while True:
                    part = type(func)
                    if part is attribute:
                        chain.append(func.attr)
                        func = func.value
                    elif part is call:
                        func = func.func
                    else:
                        if part is name_node:
                            chain.append(func.id)
                            calls.add(tuple(reversed(chain)))
                        break
                if chain:
                    called.add(chain[0])
            elif kind is ast.arg:
                if node.annotation is not None:
                    params.add(node.arg)
            elif kind is keyword_arg:
                if node.arg is not None and type(node.value) is constant and node.value.value is None:
                    extras.append(f"{node.arg}=None")
            elif kind is ast.AsyncFunctionDef:
                extras.append("async def")
                bucket.is_async = True
            elif kind is ast.Import or kind is ast.ImportFrom:
                targets = _import_targets(node)
                bucket.imports.update(qualified for _, qualified in targets)
                if kind is ast.ImportFrom and node.module and not node.level:
                    bucket.imports.add(node.module)
                stored.update(alias.asname or alias.name.split(".", 1)[0] for alias in node.names)
            elif kind in (ast.MatchAs, ast.MatchStar) and node.name:
                stored.add(node.name)
            elif kind is ast.MatchMapping and node.rest:
                stored.add(node.rest)


def _alone(body: list, index: int) -> bool:
    statement = body[index]
    before = body[index - 1] if index else None
    after = body[index + 1] if index + 1 < len(body) else None
    return (before is None or (before.end_lineno or 0) < statement.lineno) and (
        after is None or after.lineno > (statement.end_lineno or 0))


def _import_targets(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(local name, qualified name) bound by an import, as the semantic model binds them (relative and star
    imports bind nothing it follows)."""
    if type(node) is ast.Import:
        return [(alias.asname, alias.name) if alias.asname else (alias.name.split(".", 1)[0],) * 2
                for alias in node.names]
    if node.level or not node.module:
        return []
    return [(alias.asname or alias.name, f"{node.module}.{alias.name}") for alias in node.names
            if alias.name != "*"]


