"""Parse only what can matter: the parts of a file where no enabled rule can report, and whose analysis
cannot change a report elsewhere, are left out of libcst's parse.

libcst parses at ~0.5-1 MB/s; most of a large module is code no rule cares about. Before parsing, each such
unit (codefacts.py: the body of a def or class at module level or directly in a kept class; a module-level
statement of 3+ lines such as a data table) is replaced by a string literal over the same lines, so every
kept line keeps its text, its line number and its columns, and positions, suppressions and messages stay
what they were. A def's or class's header (decorators, parameters, defaults, bases) goes too when nothing
needs it (`_headerless`: its name is defined once, bound no other way, and the kept code never spells it);
a run of such siblings becomes one literal, so 100,000 small functions cost libcst one string, not 100,000
headers (docs/reliability.md). Otherwise the header is kept and its body (3 lines or more) replaced.

A unit is needed when, for some enabled rule, its body test says a finding can be in it (`gate(spec,
catalog).region`, derived from the rule's YAML `prefilter: region:`, prefilter.py). The tests
judge from what the unit spells out (CPython's ast) plus what its names were bound to elsewhere: a
module-level name brings the words of the statements binding it (`from openai import OpenAI as O`,
`client = OpenAI()`), `self.<attr>` the words of the sibling methods and class annotations that set it; the
semantic model builds every qualified name from those words only. Rules whose names are callees
(`names_are: callees`, the default) also need a call that can resolve to one (`Region.may_call`: callee
chains, their roots resolved the way the semantic model resolves them). Dependencies between units are kept too:
- an assignment to `self.<attr>` types that attribute for every later method of the class (semantic.py): a
  method that sets an attribute a needed sibling reads is needed;
- a module-level statement that binds a name the kept code uses is needed.
When every unit is left out and the module-level code outside them (imports, constants, a `TYPE_CHECKING`
block) passes no rule's body test either, nothing is left to report and libcst is not asked at all (a
pre-commit run on such files does not even import it).
Who calls whom (the project model's call graph) is read from CPython's ast of the whole file, never from
the pruned text.
Rules declare their other cross-unit state in their `region:` (LLM005: SDK imports inside functions;
LLM006: `HTTPAdapter` subclasses and `session.request = ...`).
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from llmdoctor.scan.codefacts import MIN_LINES, CodeFacts, Facts, Unit
from llmdoctor.scan.prefilter import gate

if TYPE_CHECKING:
    from llmdoctor.scan.prefilter import NameIndex

_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
_LONE_CR = re.compile(r"\r(?!\n)")
_INDENT = " \t\f"
BUILTIN_NAMES = frozenset(dir(builtins))


@dataclass
class Region:
    """What a rule may look at to decide whether a unit can matter (see prefilter.py `Gate.region`); read-only."""

    words: set[str]  # the unit's words and those its names bring (module-level bindings, self.<attr>)
    called: set[str]  # names it calls (`create` in `c.create()`) with what called module-level names bring
    #                   (all of `words` when it calls a name bound inside it: `f = c.create; f()`)
    calls: set[tuple[str, ...]]  # callee chains: `c.chat.completions.create(...)` -> ("c", "chat", ...)
    stored: set[str]  # names bound inside (to any value: a local may hold anything)
    params: set[str]  # annotated parameters: an instance of the annotation
    self_names: set[str]  # first parameters of methods: `self.<attr>` holds an instance set elsewhere
    module: _Module  # what the module-level code binds
    strings: set[str]  # identifier-like string constants in the unit (`d["messages"]`)
    imports: set[str]  # dotted names imported inside the unit
    stored_attrs: set[str]  # attributes assigned inside the unit
    is_async: bool  # the unit is or holds an `async def`
    memo: dict = field(default_factory=dict, compare=False)  # per-file cache shared by a file's regions

    @cached_property
    def text(self) -> str:
        return " ".join(self.words)

    def may_call(self, index: NameIndex, transparent: frozenset[str] = frozenset()) -> bool:
        """Whether a call here can resolve to one of `index`'s names, as the semantic model resolves callees:
        a chain's root is a module-level import (its qualified name, exactly), a builtin, or a name holding
        an instance or an imported object (a local, a module-level assignment, an annotated parameter,
        `self.<attr>`: any type before the chain's attributes; a type has two parts or more). A chain that
        ends with a name (`chat.completions.create`) matches too: calls on an unknown receiver."""
        if index.empty or index.always or index.last_is_pattern:
            return True
        for chain in self.calls:
            last = chain[-1]
            if len(chain) == 1:  # `f(...)`: the name f is bound to decides
                imported = self.module.imported_as.get(last)
                if last in self.stored or (imported is None and last in self.module.assigned):
                    return True  # a local or module value may be bound to any callable
                if imported is not None:
                    last = imported.rsplit(".", 1)[-1]
            if last in index.pattern_lasts:
                return True
            names = index.exact_by_last.get(last)
            if names and any(self._resolves_to(chain, name, transparent) for name in names):
                return True
        return False

    def _resolves_to(self, chain: tuple[str, ...], name: tuple[str, ...], transparent) -> bool:
        """Whether the call `chain` may resolve to `name`; every way its root may be bound is tried."""
        if tuple(part for part in chain if part not in transparent)[-len(name):] == name:
            return True  # spelled out, or an unknown receiver's chain ending with the name
        root, attrs = chain[0], tuple(part for part in chain[1:] if part not in transparent)
        imported = self.module.imported_as.get(root)
        if imported is not None and (*imported.split("."), *attrs) == name:
            return True
        if imported is None and root not in self.module.assigned and root in BUILTIN_NAMES \
                and (root, *attrs) == name:
            return True
        if (root in self.stored or (imported is None and root in self.module.assigned)) and (
                not attrs or _ends_with(name, attrs, prefix=1)):  # a local or a module value: anything
            return True
        if root in self.params and attrs and _ends_with(name, attrs, prefix=2):
            return True
        return root in self.self_names and len(attrs) >= 2 and _ends_with(name, attrs[1:], prefix=2)


def _dotted(node: ast.expr) -> str:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if type(node) is ast.Name else ""


def _ends_with(name: tuple[str, ...], tail: tuple[str, ...], *, prefix: int) -> bool:
    """`name` is a type of `prefix` parts or more followed by `tail`."""
    return len(name) >= len(tail) + prefix and name[len(name) - len(tail):] == tail


@dataclass(frozen=True)
class _Module:
    imported_as: dict[str, str]  # local name -> qualified name of its first module-level import
    assigned: frozenset[str]  # names bound by module-level statements other than imports
    defined: frozenset[str]  # names of module-level defs and classes (they rebind an imported name)


def pruned_source(source: str, facts: CodeFacts, active, catalog) -> str:
    """`source` with the units no active rule (`active`: their specs) needs replaced by a string literal over
    the same lines: a run of sibling defs and classes whose headers nothing needs as one literal
    (`_headerless`), the other units' bodies one literal each."""
    return pruned(source, facts, active, catalog)[0]


def pruned(source: str, facts: CodeFacts, active, catalog) -> tuple[str, bool]:
    """(`pruned_source`, whether a rule may report in it). Nothing to report: every unit is left out and no
    rule's body test passes on the module-level code outside the units (imports, constants, a
    `TYPE_CHECKING` block): the file then needs no libcst parse."""
    if not facts.units or _LONE_CR.search(source):
        return source, True  # a lone CR: line numbering that is not worth second-guessing
    context = _Context(facts)
    drop, used = _dropped_units(facts, active, catalog, context)
    if not drop:
        return source, True
    dropped = {id(unit) for unit in drop}
    may_report = any(id(unit) not in dropped for unit in facts.units) or any(
        gate(spec, catalog).region(context.region_of(facts.outside)) for spec in active)
    parts = _LINE_BREAK.split(source)  # text, break, text, break, ..., text
    spans: list[tuple[int, int, str]] = []
    whole = _headerless(drop, facts, used)
    for run in _runs([unit for unit in drop if id(unit) in whole]):
        span = _run_lines(run, parts)
        if span is None:
            whole.difference_update(id(unit) for unit in run)
        else:
            spans.append(span)
    for unit in drop:
        if id(unit) not in whole:
            span = _body_lines(unit, parts)
            if span is not None:
                spans.append(span)
    for start, end, indent in spans:
        if start == end:  # a one-line unit, or a long one-line statement (codefacts.MIN_CHARS)
            parts[2 * (start - 1)] = indent + '""'
            continue
        parts[2 * (start - 1)] = indent + '"""'
        for line in range(start + 1, end):
            parts[2 * (line - 1)] = ""
        parts[2 * (end - 1)] = '"""'
    return ("".join(parts) if spans else source), may_report


def _body_lines(unit: Unit, parts: list[str]) -> tuple[int, int, str] | None:
    """(first line, last line, indentation) of the unit's body (a statement unit: the whole statement) when it
    can be replaced line for line."""
    if not (unit.is_def or unit.is_class):
        node = unit.node
        if not unit.alone or node.col_offset != 0 or node.end_lineno is None:
            return None
        return node.lineno, node.end_lineno, ""
    body = unit.node.body
    first = body[0]
    decorators = getattr(first, "decorator_list", None) or []
    start = min([first.lineno, *(d.lineno for d in decorators)])
    end = unit.node.end_lineno
    if end is None or end - start + 1 < MIN_LINES or 2 * (end - 1) >= len(parts):
        return None
    line = parts[2 * (start - 1)]
    indent = line[: len(line) - len(line.lstrip(_INDENT))]
    code = line[len(indent):]
    if start == first.lineno:
        if len(indent) != first.col_offset:  # the body starts on the header's line (`def f(): ...`)
            return None
    elif not code.startswith("@"):
        return None
    previous = parts[2 * (start - 2)] if start >= 2 else ""
    if previous.rstrip(_INDENT).endswith("\\"):
        return None  # the body's first line continues the line above
    return start, end, indent


def _headerless(drop: list[Unit], facts: CodeFacts, used: set[str]) -> set[int]:
    """id() of the dropped defs and classes whose header can go too: what a header gives libcst's visit is
    its name's binding (a def rebinds an import, an assignment or a builtin, and numbers the project model's
    key of a name defined twice: `f#2`) and the code of its decorators, defaults, annotations and bases (no
    rule may report there: the unit is not needed). So: a name defined once among its siblings, bound no
    other way at module level, no builtin, and never spelled by the kept code (`used`). Entry points and the
    call graph are read from CPython's tree (project/index.py), never from the pruned text."""
    named: dict[int | None, dict[str, int]] = {}
    for unit in facts.every_unit():
        if unit.is_def or unit.is_class:
            siblings = named.setdefault(id(unit.parent) if unit.parent is not None else None, {})
            siblings[unit.node.name] = siblings.get(unit.node.name, 0) + 1
    bound = {local for local, _ in facts.module_imports} | facts.assigned | BUILTIN_NAMES
    out = set()
    for unit in drop:
        if not (unit.is_def or unit.is_class):
            continue
        name = unit.node.name
        if name in used or name in bound or \
                named[id(unit.parent) if unit.parent is not None else None][name] > 1:
            continue
        out.add(id(unit))
    return out


def _runs(units: list[Unit]) -> list[list[Unit]]:
    """`units` in runs of consecutive statements of one statement list."""
    runs: list[list[Unit]] = []
    for unit in sorted(units, key=lambda u: (u.block, u.position)):
        last = runs[-1][-1] if runs else None
        if last is not None and last.block == unit.block and last.position + 1 == unit.position:
            runs[-1].append(unit)
        else:
            runs.append([unit])
    return runs


def _run_lines(run: list[Unit], parts: list[str]) -> tuple[int, int, str] | None:
    """(first line, last line, indentation) of a run of sibling defs and classes, decorators included, when
    it can be replaced line for line."""
    first = run[0].node
    start = min([first.lineno, *(d.lineno for d in first.decorator_list)])
    end = run[-1].node.end_lineno
    if end is None or 2 * (end - 1) >= len(parts):
        return None
    line = parts[2 * (start - 1)]
    indent = line[: len(line) - len(line.lstrip(_INDENT))]
    if len(indent) != first.col_offset or not line[len(indent):].startswith(("@", "def", "async", "class")):
        return None
    previous = parts[2 * (start - 2)] if start >= 2 else ""
    if previous.rstrip(_INDENT).endswith("\\"):
        return None
    return start, end, indent


def _dropped_units(facts: CodeFacts, active, catalog, context: _Context) -> tuple[list[Unit], set[str]]:
    """The units to leave out (not needed, and at module level or in a kept class) and the words of the code
    kept.

    A unit is needed when a rule may report in it (its `Gate.region`), when it sets an attribute that such
    a method of its class reads, or (a module-level statement) when it binds a name the kept code uses."""
    used = set(facts.words)  # words of the module-level code that is always kept, and of the kept units
    read_attrs: dict[int, set[str]] = {}  # id(class unit) -> words of its methods needed for their meaning
    meaning: set[int] = set()
    kept: set[int] = set()
    considered = list(facts.units)  # module-level units, then the units of every kept class
    changed = True
    while changed:
        changed = False
        for unit in considered:
            key = id(unit)
            if key not in meaning and _needed_for_meaning(unit, context, active, catalog, read_attrs, used):
                meaning.add(key)
                changed = True
                if unit.parent is not None and not unit.is_class:
                    read_attrs.setdefault(id(unit.parent), set()).update(unit.words)
            if key in kept or key not in meaning:
                continue
            kept.add(key)
            changed = True
            used |= unit.words
            if unit.is_class:
                considered.extend(unit.children)
    return [unit for unit in considered if id(unit) not in kept], used


def _needed_for_meaning(unit: Unit, context: _Context, active, catalog, read_attrs, used) -> bool:
    if unit.parent is not None and not unit.is_class and \
            not unit.stored_attrs.isdisjoint(read_attrs.get(id(unit.parent), ())):
        return True
    if not (unit.is_def or unit.is_class) and not unit.stored_names.isdisjoint(used):
        return True
    relevant = context.relevant.get(id(unit))
    if relevant is None:
        region = context.region(unit)
        relevant = context.relevant[id(unit)] = any(
            gate(spec, catalog).region(region) for spec in active)
    return relevant


class _Context:
    """Follows a unit's names to the words they were bound to (module level, `self.<attr>` in its class)."""

    def __init__(self, facts: CodeFacts) -> None:
        self.bound_by = facts.bound_by
        first: dict[str, str] = {}
        for local, qualified in facts.module_imports:
            first.setdefault(local, qualified)
        for unit in facts.units:  # `class OpenAIClient(OpenAI)`: building one builds what it derives from
            node = unit.node
            if unit.is_class and len(node.bases) == 1 and not node.keywords:
                base = _dotted(node.bases[0])
                root, _, rest = base.partition(".")
                if first.get(root):
                    first.setdefault(node.name, f"{first[root]}.{rest}" if rest else first[root])
                    if self.bound_by is facts.bound_by:
                        self.bound_by = dict(facts.bound_by)
                    self.bound_by[node.name] = {*self.bound_by.get(node.name, ()), *base.split(".")}
        defined = frozenset(unit.node.name for unit in facts.units if unit.is_def or unit.is_class)
        self.module = _Module(imported_as=first, assigned=frozenset(facts.assigned), defined=defined)
        self.memo: dict = {}
        self.relevant: dict[int, bool] = {}
        self._attr_sites: dict[int, dict[str, set[str]]] = {}
        self._every: dict[int, Facts] = {}

    def _aggregate(self, unit: Unit) -> Facts:
        """The unit's facts with those of the units inside it (a class's methods); never changes a unit."""
        found = self._every.get(id(unit))
        if found is None:
            found = unit
            if unit.children:
                found = unit.copy()
                for child in unit.children:
                    found.add(self._aggregate(child))
            self._every[id(unit)] = found
        return found

    def region(self, unit: Unit) -> Region:
        sites = self._sites(unit.parent) if unit.parent is not None and not unit.is_class else {}
        return self.region_of(self._aggregate(unit), sites)

    def region_of(self, every: Facts, sites: dict[str, set[str]] | None = None) -> Region:
        """The region of code whose facts are `every` (`sites`: what `self.<attr>` was bound to)."""
        sites = sites or {}
        words = self._follow(every.words, sites)
        called = words if not every.called.isdisjoint(every.stored_names) else self._follow(every.called, {})
        return Region(words=words, called=called, calls=every.calls, stored=every.stored_names,
                      params=every.params, self_names=every.self_names, module=self.module, strings=every.strings,
                      imports=every.imports, stored_attrs=every.stored_attrs, is_async=every.is_async,
                      memo=self.memo)

    def _follow(self, words: set[str], sites: dict[str, set[str]]) -> set[str]:
        out = set(words)
        work = list(words)
        bound_by = self.bound_by
        while work:
            word = work.pop()
            for more in (bound_by.get(word), sites.get(word)):
                if more:
                    for extra in more:
                        if extra not in out:
                            out.add(extra)
                            work.append(extra)
        return out

    def _sites(self, klass: Unit) -> dict[str, set[str]]:
        """attr -> words of the methods of `klass` that assign `<x>.attr`, and of `attr: T` in its body."""
        found = self._attr_sites.get(id(klass))
        if found is None:
            found = {name: set(words) for name, words in klass.annotated.items()}
            for child in klass.children:
                if child.is_class:
                    continue
                for attr in child.stored_attrs:
                    found.setdefault(attr, set()).update(child.words)
            self._attr_sites[id(klass)] = found
        return found
