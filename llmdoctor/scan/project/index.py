"""What one module tells the project model, read with CPython's `ast` (cheap, cached per file by content).

`index_module(source, tree)` returns a `ModuleIndex`: the module's top-level bindings, its functions and
classes, and for each function the calls it makes, each callee written as a *reference* resolved as far as
this file allows. The project model (model.py) finishes the resolution across modules.

A reference is a string `<root>:<dotted path>`; a `()` after a part means "the result of calling it"
(an instance, for a class):

    I:requests.get             an absolute import (`import requests`; `from requests import get`)
    R2:utils.fetch             a relative import, 2 levels (`from ..utils import fetch`)
    M:client.chat.create       a name bound at module level here (a def, a class, an assignment)
    F:outer.inner              a function defined inside another one (its key)
    S:client.get / C:build     an attribute of `self` / `cls` in a method (U: of `super()`)
    B:open                     a builtin
    I:httpx.Client().get       `c = httpx.Client(); c.get(...)`: locals, `with ... as c` and annotated
                               parameters are replaced by what they hold
    A:{M:A()|M:B()}[]          an element of a list, tuple, set or dict literal whose elements (values)
                               are each one of these (`providers = [A(), B()]`; `for p in providers`,
                               `providers[i]`, `d.get(k)`, `for k, v in d.items()`), of a comprehension of
                               calls (`[A(q) for q in qs]`), or of an annotated container (`List[A]`)

`x[i]` is `x[]`, or `x[0]` for a constant index (an item of a returned tuple).

The index knows nothing of the rule tables: which calls block, build clients or register request handlers
is decided by the model, with the catalog. Function keys are the dotted path of def/class names from the
module (`Service.run`, `outer.inner`), `#2`, `#3` for a name defined again in the same scope; the libcst
rules' semantic model computes the same keys, so a finding is matched to its function.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from llmdoctor.scan.codefacts import COLLECTING_METHODS, NODE_FIELDS
from llmdoctor.scan.rules.logging_knowledge import NOT_LOGGED_KEYWORDS, printf_excerpts

BUILTIN_NAMES = frozenset(dir(builtins))
# a comment that may silence an llmdoctor finding: a bare noqa, a noqa naming an LLM code, `llmdoctor: ...`
_GLOBAL_STATEMENT = re.compile(r"^[ \t]*global[ \t]+([\w \t,]+?)[ \t]*(?:#[^\r\n]*)?\r?$", re.MULTILINE)
_SUPPRESSION_HINT = re.compile(r"#\s*noqa(?!\s*:)|#\s*noqa\s*:[^\n]*\bLLM|llmdoctor:", re.IGNORECASE)
MODULE_KEY = ""  # the pseudo-function of module-level code (and class bodies): runs at import

# call kinds
CALL = 0  # called here, not awaited
AWAIT = 1  # awaited here
LAMBDA = 2  # called inside a lambda defined here (runs when the lambda runs: not this function's own call)
# a callable assigned to an attribute of an object not `self`/`cls` (`application.post_init = on_start`): never
# called here; registered as the call `application.post_init(on_start)` would register it
ASSIGNED = 3

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# what `sys.platform`, `os.name` and `platform.system()` read on each platform (config `python-platform`)
_PLATFORMS = {
    "linux": {"sys.platform": "linux", "os.name": "posix", "platform.system": "Linux"},
    "darwin": {"sys.platform": "darwin", "os.name": "posix", "platform.system": "Darwin"},
    "win32": {"sys.platform": "win32", "os.name": "nt", "platform.system": "Windows"},
}
_TRIES = (ast.Try, getattr(ast, "TryStar", ast.Try))  # `try: ... except* E:` from Python 3.11
_LAZY_TESTS = (ast.Name, ast.Attribute, ast.Subscript)
_COMPOUND = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
                       ast.With, ast.AsyncWith, *_TRIES})  # statements that hold blocks (`_blocks`)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SAME_ELEMENTS = frozenset({"sorted", "list", "tuple", "reversed"})  # builtins whose result holds their argument's elements
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)  # statements that leave the block they end


IN_CONTAINER = "[]"  # an argument position's suffix: the reference is an element of a tuple/list passed there
PARAMETER = "P:"  # through an unannotated parameter of the enclosing function: "P:<parameter>.<attribute>..."
CONTAINER = "A:"  # a container literal's reference: "A:{<member>|<member>}", an element is one of the members
# a lambda's parameter, what the callee it is handed to calls it with: "X:{<callee>|<its parameter>|<position>}"
LAMBDA_ARGUMENT = "X:"
EITHER = "E:"  # what one of two branches bound: "E:{<member>|<member>}", the value is one of the members
# a container of tuples (`list[tuple[Provider, str]]`): "T:{<first>|<second>}", an element's item i is member i ("" when
# its type is not known)
ROWS = "T:"
MAX_EITHER = 4
_MISSING = object()
MAX_MEMBERS = 32  # a longer literal is data, not a table of implementations
# class-level field declarations whose call says nothing of the value (pydantic, dataclasses, attrs, SQLModel)
FIELD_SPECIFIERS = frozenset({"Field", "field", "PrivateAttr", "attrib", "ib"})


@dataclass(slots=True)
class Call:
    ref: str
    kind: int
    line: int
    col: int  # 1-based, in characters
    end_line: int
    end_col: int  # 1-based, exclusive end + 1 (as findings' end_column)
    stmt_line: int  # first line of the statement holding the call (suppressions)
    text: str = ""  # the callee as written, a call in the chain kept as `name()`: `c.with_options().create`
    keywords: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()  # UPPER_CASE names among the arguments (`os.WNOHANG`)
    args: tuple[tuple[str, str], ...] = ()  # (position or keyword, reference) of resolvable arguments
    literal: str | None = None  # the first positional argument, when a string literal
    # the second positional argument or `mode=` / `trigger=` / `transport=`, when a string literal (`open`'s
    # mode, APScheduler's `add_job(f, trigger="interval")`, FastMCP's `run(transport="sse")`)
    mode: str | None = None
    lazy: bool = False  # under a lazy-initialisation guard (`if self._x is None: self._x = ...`)
    memo: bool = False  # ... that keeps what it makes beyond the call (`self._x`, `cache[key]`): once per key
    shipped: bool = False  # its first argument or receiver is a path built from `__file__` (a file of the code)
    # switches of the function (below) the call runs under (`if synthesize:`; `!media_id` after `if media_id:
    # return`, the switch off)
    guards: tuple[str, ...] = ()
    falsy: tuple[str, ...] = ()  # arguments (position or keyword) given as a literal False / None / 0 / ""
    positional: int = 0  # how many positional arguments it passes (-1: `*args`, any number)
    iterated: bool = False  # a `for` iterates its result there and then (a generator's body runs here)
    # the types its arguments evidently have: "0=str", "name=str|None", "*1=..." (a starred one), or the
    # caller's own parameter handed on, after the types its annotation allows: "0=str|Path@path:0" (`path`, at
    # its position "0" / "k" / "*N")
    types: tuple[str, ...] = ()
    # its value reaches what its function gives back: a `return`, a `yield`, or a call that hands the reader an
    # answer (entrypoints.yaml `replies`: `ws.send_text(...)`), also through the names it is stored in
    answers: bool = False

    def argument(self, position: int, keyword: str) -> tuple[bool, str | None]:
        """Whether the call passes the argument at `position` (or as `keyword=`), and its string literal where the
        index keeps one: the first positional argument's `literal`; the second's, or a `mode=` / `trigger=` /
        `transport=` keyword's, `mode`."""
        if keyword in self.keywords:
            return True, self.mode
        if self.positional < 0 or self.positional > position:
            return True, self.literal if position == 0 else self.mode if position == 1 else None
        return False, None

    def to_json(self) -> list:
        return [self.ref, self.kind, self.line, self.col, self.end_line, self.end_col, self.stmt_line, self.text,
                list(self.keywords), list(self.marks), [list(a) for a in self.args], self.literal, self.mode,
                self.lazy, list(self.guards), list(self.falsy), self.positional, self.memo, self.shipped,
                self.iterated, list(self.types), self.answers]

    @classmethod
    def from_json(cls, data: list) -> Call:
        # (checked by the types of its fields first, then the values: a warm pre-commit run reads ~15,000 calls)
        if type(data) is not list or tuple(map(type, data)) not in _CALL_SHAPES:
            raise ValueError("index: a call of the wrong shape")
        (ref, kind, line, col, end_line, end_col, stmt, text, keywords, marks, args, literal, mode, lazy, guards,
         falsy, positional, memo, shipped, iterated, types, answers) = data
        if not (kind in (CALL, AWAIT, LAMBDA, ASSIGNED) and 0 < min(line, col, end_line, end_col, stmt)
                and max(line, col, end_line, end_col, stmt) < _MAX
                and (not keywords or _only_strings(keywords)) and (not marks or _only_strings(marks))
                and (not guards or _only_strings(guards)) and (not falsy or _only_strings(falsy))
                and (not types or _only_strings(types))
                and (not args or all(type(a) is list and len(a) == 2 and type(a[0]) is str and type(a[1]) is str
                                     for a in args))):
            raise ValueError("index: a call of the wrong shape")
        return cls(ref, kind, line, col, end_line, end_col, stmt, text, tuple(keywords), tuple(marks),
                   tuple(map(tuple, args)) if args else (), literal, mode, lazy, memo, shipped, tuple(guards),
                   tuple(falsy), positional, iterated, tuple(types), answers)


@dataclass(slots=True)
class Decorator:
    ref: str | None  # reference of the decorator's callee (`app.get` in `@app.get("/")`)
    text: str  # its dotted text as written
    literal: str | None = None  # first positional argument when a string literal (a route path)
    called: bool = False

    def to_json(self) -> list:
        return [self.ref, self.text, self.literal, self.called]


@dataclass(slots=True)
class Function:
    key: str
    name: str
    line: int  # the `def` line
    is_async: bool = False
    owner: str | None = None  # the class key of a method
    static: bool = False  # staticmethod: no self
    parent: str | None = None  # the enclosing function's key (a nested def)
    decorators: list[Decorator] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    # what it returns, when every `return` says the same: a reference, or one per item of a returned tuple
    returns: str | None = None
    returns_items: list[str | None] | None = None
    generator: bool = False  # holds a `yield`: calling it runs nothing until the generator is iterated
    # switches: parameters with a literal bool / None / 0 / "" default: name -> [position after self/cls (-1:
    # keyword-only), 1 when the default is on]; code under `if switch:` runs only for callers that leave it on
    switches: dict[str, list[int]] = field(default_factory=dict)
    # in `__init__`: attributes set straight from a switch (`self.specify = specify`) -> the switch; a method's
    # `if self.specify:` is then off for the objects built with it off
    switch_attributes: dict[str, str] = field(default_factory=dict)
    # the containers it stores its first parameter in (`registry[name] = cls`, `registry.append(cls)`): a
    # registering decorator; the classes it decorates are the container's elements
    registers: list[str] = field(default_factory=list)
    # a method with no body of its own (`...`, `pass`, `raise NotImplementedError`, a hook giving back its argument)
    abstract: bool = False
    # its parameters after self/cls: the positional ones, then "*" and the keyword-only ones (`*args` and
    # `**kwargs` left out)
    parameters: list[str] = field(default_factory=list)
    # the parameters it may run: it calls one (`function()`), or hands it to a call other than a class's
    # (`Function(entrypoint=function)` keeps it, by the convention that classes are CamelCase)
    runs: list[str] = field(default_factory=list)
    # the instance its return annotation names (`def upload_path(file_id) -> Path`): the model takes it where its
    # `return`s say nothing, for a library type or a project class nothing derives from
    declared: str | None = None
    accessor: bool = False  # a property's getter (`@property`, `@cached_property`): reading the attribute runs it
    # the parameters it hands to a runner that runs a coroutine on a loop of its own (`loop.run_until_complete(coro)`,
    # `asyncio.run(coro)`: entrypoints.yaml's `in_caller` registrations): `run_async(brief())` runs `brief` there
    runs_coroutine: list[str] = field(default_factory=list)
    # parameters annotated `Callable[[A, B], R]` -> the references of A, B (None where unknown): what a lambda
    # handed there is called with (`call=lambda p, k: p.forward_chat(k)` for `call: Callable[[Provider, str], ...]`)
    callables: dict[str, list[str | None]] = field(default_factory=dict)
    # the parameters it logs, whole or formatted into the line, at a level its logger call fixes, in a statement
    # of its own body (no test around it): name -> level. A call handing it a prompt logs the prompt (LLM005)
    logs: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> list:
        return [self.key, self.name, self.line, self.is_async, self.owner, self.static, self.parent,
                [d.to_json() for d in self.decorators], [c.to_json() for c in self.calls], self.returns,
                self.returns_items, self.generator, self.switches, self.switch_attributes, self.registers,
                self.abstract, self.parameters, self.runs, self.declared, self.accessor, self.runs_coroutine,
                self.callables, self.logs]

    @classmethod
    def from_json(cls, data: list) -> Function:
        (key, name, line, is_async, owner, static, parent, decorators, calls, returns, items, generator, switches,
         switch_attributes, registers, abstract, parameters, runs, declared, accessor, runs_coroutine, callables,
         logs) = data
        if not (type(key) is str and type(name) is str and _lines(line) and type(is_async) is bool
                and type(static) is bool and _optional_strings(owner, parent, returns, declared) and type(calls) is list
                and (items is None or (type(items) is list and _optional_strings(*items)))
                and type(generator) is bool and type(switches) is dict
                and (not switches or all(type(k) is str and type(v) is list and len(v) == 2
                                         and type(v[0]) is int and type(v[1]) is int for k, v in switches.items()))
                and type(switch_attributes) is dict
                and (not switch_attributes or all(type(k) is str and type(v) is str
                                                  for k, v in switch_attributes.items()))
                and type(registers) is list and set(map(type, registers)) <= _STR and type(abstract) is bool
                and type(parameters) is list and _only_strings(parameters)
                and type(runs) is list and _only_strings(runs) and type(accessor) is bool
                and type(runs_coroutine) is list and _only_strings(runs_coroutine)
                and type(callables) is dict and all(type(k) is str and type(v) is list and _optional_strings(*v)
                                                    for k, v in callables.items())
                and type(logs) is dict and all(type(k) is str and type(v) is int for k, v in logs.items())):
            raise ValueError("index: a function of the wrong shape")
        return cls(key, name, line, is_async, owner, static, parent, [_decorator(d) for d in decorators],
                   [Call.from_json(c) for c in calls], returns, items, generator,
                   {k: list(v) for k, v in switches.items()},
                   dict(switch_attributes), list(registers), abstract, list(parameters), list(runs), declared,
                   accessor, list(runs_coroutine), {k: list(v) for k, v in callables.items()}, dict(logs))


@dataclass(slots=True)
class ClassInfo:
    key: str
    name: str
    line: int
    bases: list[tuple[str | None, str]] = field(default_factory=list)  # (reference, text)
    decorators: list[Decorator] = field(default_factory=list)
    attributes: dict[str, str | None] = field(default_factory=dict)  # self.x / class-level x -> its value
    methods: dict[str, str] = field(default_factory=dict)  # method name -> function key

    def to_json(self) -> list:
        return [self.key, self.name, self.line, [list(b) for b in self.bases],
                [d.to_json() for d in self.decorators], self.attributes, self.methods]

    @classmethod
    def from_json(cls, data: list) -> ClassInfo:
        key, name, line, bases, decorators, attributes, methods = data
        if not (type(key) is str and type(name) is str and _lines(line) and type(attributes) is dict
                and type(methods) is dict and set(map(type, methods.values())) <= _STR
                and set(map(type, attributes.values())) <= _OPTIONAL_STR and type(bases) is list
                and all(type(b) is list and len(b) == 2 and _optional_strings(*b) for b in bases)):
            raise ValueError("index: a class of the wrong shape")
        return cls(key, name, line, [(b[0], b[1]) for b in bases], [_decorator(d) for d in decorators],
                   dict(attributes), dict(methods))


@dataclass
class ModuleIndex:
    bindings: dict[str, str | None]  # module-level name -> reference of its value (None: unknown)
    functions: list[Function]  # the module pseudo-function (key "") first
    classes: list[ClassInfo]
    imports: list[str]  # modules imported at module level when the program runs (not TYPE_CHECKING)
    main_block: bool = False  # has `if __name__ == "__main__":`
    suppressions: dict[int, list[str]] = field(default_factory=dict)  # line -> codes ("*": all)
    file_ignores: list[str] = field(default_factory=list)
    # (first, last) lines of the branches a platform test rules out where the code is served: they never run
    unreachable: list[tuple[int, int]] = field(default_factory=list)
    calls_model: bool = False  # it imports an LLM SDK or framework, or names a model API's HTTP path

    def to_json(self) -> dict:
        return {"b": self.bindings, "f": [f.to_json() for f in self.functions],
                "c": [c.to_json() for c in self.classes], "i": self.imports, "m": self.main_block,
                "s": {str(k): v for k, v in self.suppressions.items()}, "x": self.file_ignores,
                "u": self.unreachable, "l": self.calls_model}

    @classmethod
    def from_json(cls, data: dict) -> ModuleIndex:
        """The index `to_json` wrote; ValueError (or TypeError) on anything else (a corrupt or edited cache)."""
        bindings, functions, suppressions, unreachable = data["b"], data["f"], data["s"], data["u"]
        if not (type(bindings) is dict and all(v is None or type(v) is str for v in bindings.values())
                and type(functions) is list and functions and _strings(data["i"]) and type(data["m"]) is bool
                and type(suppressions) is dict and all(_strings(v) for v in suppressions.values())
                and _strings(data["x"]) and type(unreachable) is list and type(data["l"]) is bool
                and all(type(r) is list and len(r) == 2 and all(type(n) is int for n in r) for r in unreachable)):
            raise ValueError("index: of the wrong shape")
        found = cls(bindings=dict(bindings), functions=[Function.from_json(f) for f in functions],
                    classes=[ClassInfo.from_json(c) for c in data["c"]], imports=list(data["i"]),
                    main_block=data["m"], suppressions={int(k): list(v) for k, v in suppressions.items()},
                    file_ignores=list(data["x"]), unreachable=[(first, last) for first, last in unreachable],
                    calls_model=data["l"])
        if found.functions[0].key != MODULE_KEY:
            raise ValueError("index: the module's own code comes first")
        return found

    def function(self, key: str) -> Function | None:
        found = getattr(self, "_by_key", None)
        if found is None:
            found = self._by_key = {f.key: f for f in self.functions}
        return found.get(key)


_MAX = 2**31
ACCESSOR_DECORATORS = frozenset({"property", "cached_property"})  # (`functools.cached_property` by its last name)
ENTER_EXIT = {False: ("__enter__", "__exit__"), True: ("__aenter__", "__aexit__")}  # what `with` / `async with` run
_MAX_QUOTED_ANNOTATION = 200  # longer string annotations are not read (a docstring-like value, not a type)
_NONE_RETURNED = "None"  # (while a function is read) a returned tuple's item that is the literal None
# the types of a call's fields as `Call.to_json` writes them (`literal` and `mode` may be None)
_CALL_SHAPES = frozenset(
    (str, int, int, int, int, int, int, str, list, list, list, literal, mode, bool, list, list, int, bool, bool, bool,
     list, bool)
    for literal in (str, type(None)) for mode in (str, type(None)))
_STR = frozenset({str})
_OPTIONAL_STR = frozenset({str, type(None)})


def _only_strings(values: list) -> bool:
    return set(map(type, values)) <= _STR


def _lines(*values) -> bool:
    return all(type(v) is int and 0 < v < 2**31 for v in values)


def _strings(values) -> bool:
    return type(values) is list and all(type(v) is str for v in values)


def _optional_strings(*values) -> bool:
    for value in values:
        if value is not None and type(value) is not str:
            return False
    return True


def _decorator(data) -> Decorator:
    if not (type(data) is list and len(data) == 4 and _optional_strings(data[0], data[2]) and type(data[1]) is str
            and type(data[3]) is bool):
        raise ValueError("index: a decorator of the wrong shape")
    return Decorator(*data)


# ----------------------------------------------------------------------------- the walk


def index_module(source: str, tree: ast.Module, interest=None, platform: str = "linux") -> ModuleIndex:
    """The index of a module `ast.parse` read from `source`. `interest`: which calls of the standard library
    and builtins to keep (knowledge.Interest; None: all); `platform`: the `sys.platform` the code runs on, whose
    platform tests decide their branches ("all": none decided)."""
    reader = _Reader(source)
    reader.interest = interest
    reader.platform = _PLATFORMS.get(platform)
    reader.read_module(tree)
    calls_model = reader.imports_model or (interest is not None and interest.names_model_path(source))
    index = ModuleIndex(bindings=reader.module_bindings, functions=reader.functions, classes=reader.classes,
                        imports=reader.runtime_imports, main_block=reader.main_block, unreachable=reader.unreachable,
                        calls_model=calls_model)
    if ("noqa" in source or "NOQA" in source or "llmdoctor:" in source) and (
            _SUPPRESSION_HINT.search(source) or (interest is not None and interest.names_peer_code(source))):
        # (a tokenizer pass costs as much as the parse: only when a comment can silence an llmdoctor finding)
        index.suppressions, index.file_ignores = _suppressions(source)
    return index


class _OutOfComprehension:
    """A marker on the expression walk's stack: past it, a comprehension's variables are out of scope again."""

    __slots__ = ("saved",)

    def __init__(self, saved: list) -> None:
        self.saved = saved


class _Scope:
    __slots__ = ("bindings", "declared", "first", "flows", "function", "globals", "kept_returns", "kind", "klass",
                 "loops", "params", "platform_values", "shipped", "types")

    def __init__(self, kind: str, function: Function | None = None, klass: ClassInfo | None = None) -> None:
        self.kind = kind  # "module" | "class" | "function"
        self.bindings: dict[str, str | None] = {}
        self.function = function
        self.klass = klass
        self.globals: set[str] = set()  # names a `global` / `nonlocal` statement takes out of this scope
        self.shipped: set[str] = set()  # names holding a path built from `__file__`
        self.first: str | None = None  # a module-level function's first parameter (what a decorator is given)
        # a function's parameters still holding their argument: name -> position after self/cls ("0"), "k"
        # (keyword-only) or "*N" (`*args`, from position N)
        self.params: dict[str, str] = {}
        self.types: dict[str, tuple[str, ...]] = {}  # names whose type is evident (a local, a narrowed name)
        self.declared: dict[str, tuple[str, ...]] = {}  # parameters' annotated types ("*args": its elements')
        self.loops: dict[str, str] = {}  # `for item in items:` over the `*items` parameter: item -> items
        # names bound to what a platform value reads (`system = platform.system()`; None: bound again to another)
        self.platform_values: dict[str, str | None] | None = None
        # what its statements store where (names, or None: given back) and from which expressions (_mark_answers)
        self.flows: list[tuple[frozenset[str] | None, list]] = []
        self.kept_returns: list = []  # the values of its `if x is not None: return x` (read last, _note_return)


class _Reader:
    def __init__(self, source: str) -> None:
        self.lines = None if source.isascii() else source.splitlines()
        self.reads_file = "__file__" in source  # (else no path of the code is built here: `_shipped`)
        # the names `global` statements take (else no function rebinds a module-level name: `_rebound`)
        self.global_names = {name.strip() for names in _GLOBAL_STATEMENT.findall(source) for name in names.split(",")} \
            if "global " in source else set()
        self.module_bindings: dict[str, str | None] = {}
        self.module_function = Function(key=MODULE_KEY, name="<module>", line=1)
        self.functions: list[Function] = [self.module_function]
        self.classes: list[ClassInfo] = []
        self.runtime_imports: list[str] = []
        self.main_block = False
        self.scopes: list[_Scope] = []
        self.keys_seen: dict[str, int] = {}
        self.lazy_depth = 0
        self.memo_depth = 0
        self.guards: list[str] = []  # the switches of the current function tested by the `if`s around
        self.iterated: set[int] = set()  # the calls a `for` statement iterates (`id` of the ast.Call)
        self.statement_line = 1
        self.imported_names: set[str] = set()  # module-level names an import binds
        self._returns_seen: dict[str, int] = {}
        self._attribute_values: dict[tuple[str, str], set[str]] = {}  # (class, attribute) -> values known
        self._declared_attributes: dict[tuple[str, str], str] = {}  # (class, attribute) -> its declared type
        self._flags_set: dict[tuple[str, str], set[str]] = {}  # (class, attribute) -> the methods setting it True
        # after `if self._loaded: return`: (class, attribute, function, the calls of the rest of the block)
        self._flag_guarded: list[tuple[str, str, str, list[Call]]] = []
        self.interest = None
        self.platform: dict[str, str] | None = None  # what the platform tests read where the code runs
        self.platform_names: dict[str, bool | None] = {}  # module-level `IS_WINDOWS = sys.platform == "win32"`
        self.unreachable: list[tuple[int, int]] = []
        self.platform_exit = False  # the `if` just read is a platform test whose branch that runs leaves the block
        self.handed_lambdas: set[int] = set()
        self.route_prefixes: dict[str, str] = {}  # `router = APIRouter(prefix="/admin")` at module level
        self.kept_returns: set[int] = set()  # `return _client` under `if _client is not None:` (block)
        self.imports_model = False  # an import of an LLM SDK or framework, anywhere (Interest.imports_model)

    # ------------------------------------------------------------------ module

    def read_module(self, tree: ast.Module) -> None:
        module = _Scope("module", function=self.module_function)
        module.bindings = self.module_bindings
        self.scopes = [module]
        self._collect_module_bindings(tree.body)
        if any(self.module_bindings.get(name) is not None for name in self.global_names):
            self._rebound(tree)
        self._runtime_imports(tree.body)
        self.block(tree.body)
        _mark_answers(self.module_function, module.flows, self.interest)

    def _collect_module_bindings(self, body: list) -> None:
        """Module-level names before the walk, so a function may use a name bound further down."""
        bindings = self.module_bindings
        imported = self.imported_names
        for statement in body:
            kind = type(statement)
            if kind is ast.Import or kind is ast.ImportFrom:
                for local, ref in _import_refs(statement):
                    bindings[local] = ref
                    imported.add(local)
            elif kind in _DEFS or kind is ast.ClassDef:
                bindings[statement.name] = "M:" + statement.name if statement.name not in imported else None
            elif kind is ast.Assign or kind is ast.AnnAssign or kind is ast.AugAssign:
                targets = statement.targets if kind is ast.Assign else [statement.target]
                if type(statement.value) is ast.Call and len(targets) == 1 and type(targets[0]) is ast.Name:
                    self._note_route_prefix(targets[0].id, statement.value)
                value = self.value_ref(statement.value) if statement.value is not None else None
                if value is None and kind is ast.AnnAssign:
                    value = self.annotation_ref(statement.annotation)
                for target in targets:
                    for name, item in _target_values(target, value):
                        if name in imported:
                            continue  # `try: import x / except ImportError: x = None`: the import is what runs
                        if name in bindings and bindings[name] != item:
                            bindings[name] = None  # bound to two different things: unknown
                        else:
                            bindings[name] = item
            elif kind in (ast.If, ast.Try, ast.With, ast.For, ast.While) or kind.__name__ == "TryStar":
                if kind is ast.With:  # `with gr.Blocks() as demo:` at module level
                    for item in statement.items:
                        if type(item.optional_vars) is ast.Name and item.optional_vars.id not in imported:
                            bindings[item.optional_vars.id] = self.value_ref(item.context_expr)
                for block in _blocks(statement):
                    self._collect_module_bindings(block)
        # a module-level def or class is itself the binding; keep "M:name" only when nothing else binds it

    def _rebound(self, tree: ast.Module) -> None:
        """A module-level name a function rebinds through `global` (a start-up hook swapping the in-memory cache
        for Redis: `global _cache; _cache = RedisCache(url)`) holds either value wherever it is read; a value this
        module cannot tell leaves the name as it was."""
        bindings = self.module_bindings
        for function in _functions(tree.body):
            statements = list(_own_statements(function.body))
            names = {name for node in statements if type(node) is ast.Global
                     for name in node.names if bindings.get(name) is not None}
            for node in statements if names else ():
                if type(node) is ast.Assign and len(node.targets) == 1:
                    target, value = node.targets[0], node.value
                elif type(node) is ast.AnnAssign and node.value is not None:
                    target, value = node.target, node.value
                else:
                    continue
                if type(target) is ast.Name and target.id in names:
                    ref = self.value_ref(value)
                    root = ref.split(":", 1)[0] if ref else ""
                    if root in ("I", "M", "B") or (root[:1] == "R" and root[1:].isdigit()):  # the module can tell
                        either = _either(bindings[target.id], ref)
                        if either is not None:
                            bindings[target.id] = either

    def _runtime_imports(self, body: list) -> None:
        for statement in body:
            kind = type(statement)
            if kind is ast.Import:
                self.runtime_imports.extend(alias.name for alias in statement.names)
            elif kind is ast.ImportFrom:
                if statement.module and not statement.level:
                    self.runtime_imports.append(statement.module)
                    self.runtime_imports.extend(f"{statement.module}.{a.name}" for a in statement.names
                                                if a.name != "*")
            elif kind is ast.If:
                if _text(statement.test).endswith("TYPE_CHECKING"):
                    continue
                self._runtime_imports(statement.body)
                self._runtime_imports(statement.orelse)
            elif kind is ast.Try or kind.__name__ == "TryStar":
                self._runtime_imports(statement.body)
                for handler in statement.handlers:
                    self._runtime_imports(handler.body)

    # ------------------------------------------------------------------ scopes and names

    @property
    def scope(self) -> _Scope:
        return self.scopes[-1]

    def executing(self) -> Function:
        """The function whose execution runs the current code (class bodies run at module level)."""
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                return scope.function
        return self.module_function

    def lookup(self, name: str) -> tuple[bool, str | None]:
        innermost = len(self.scopes) - 1
        for index in range(innermost, -1, -1):
            scope = self.scopes[index]
            if scope.kind == "class" and index != innermost:
                continue  # class bodies are not visible from their methods
            if name in scope.bindings:
                return True, scope.bindings[name]
        return False, None

    def bind(self, name: str, value: str | None) -> None:
        scope = self.scope
        if scope.kind != "module":  # module-level names were collected before the walk
            scope.bindings[name] = value
            if scope.kind == "function":  # bound anew: no longer the argument, nor of a type known so far
                scope.params.pop(name, None)
                scope.types.pop(name, None)
                scope.loops.pop(name, None)

    def ref(self, expr: ast.expr) -> str | None:
        """The reference `expr` denotes, or None when this file cannot tell."""
        kind = type(expr)
        if kind is ast.Name:
            found, value = self.lookup(expr.id)
            if found:
                return value
            return "B:" + expr.id if expr.id in BUILTIN_NAMES else None
        if kind is ast.Attribute:
            base = self.ref(expr.value)
            if base is None and type(expr.value) is ast.Name:
                base = self._parameter(expr.value.id)  # `runtime.read_upload(...)`: typed from the callers
            if base is None:
                return None
            return base + expr.attr if base.endswith(":") else f"{base}.{expr.attr}"
        if kind is ast.Call:
            func = expr.func
            if type(func) is ast.Name and func.id == "super" and not self.lookup("super")[0]:
                return "U:"
            base = self.ref(func)
            return None if base is None or base.endswith(":") else base + "()"
        if kind is ast.BinOp and type(expr.op) is ast.Div:  # `root / "uploads"`: what the left side's `/` makes
            base = self.ref(expr.left)
            return None if base is None or base.endswith(":") else base + ".__truediv__()"
        if kind is ast.Subscript:
            base = self.ref(expr.value)
            if base is None or base.endswith(":"):
                return None
            index = expr.slice
            if type(index) is ast.Constant and type(index.value) is int and index.value >= 0:
                return f"{base}[{index.value}]"
            return base + "[]"
        return None

    def value_ref(self, expr: ast.expr | None) -> str | None:
        """What a name bound to `expr` holds: a call's result, an alias, either side of `a or B()`."""
        if expr is None:
            return None
        kind = type(expr)
        if kind is ast.Await:
            return self.value_ref(expr.value)
        if kind is ast.Call and len(expr.args) == 2 and _text(expr.func).rsplit(".", 1)[-1] == "cast":
            return self.annotation_ref(expr.args[0])  # `typing.cast(Model, self.model)` holds a Model
        if kind is ast.Call and len(expr.args) == 1 and not expr.keywords \
                and _text(expr.func) in ("closing", "contextlib.closing", "nullcontext", "contextlib.nullcontext"):
            return self.value_ref(expr.args[0])  # `with closing(db.cursor()) as cursor:` enters the cursor itself
        if kind is ast.Subscript and type(expr.slice) is ast.Tuple and expr.slice.elts \
                and _text(expr.value).rsplit(".", 1)[-1] == "Annotated":
            return self.value_ref(expr.slice.elts[0])  # `DBSession = Annotated[Session, Depends(get_db)]`: the type
        if kind is ast.Call or kind is ast.Name or kind is ast.Attribute or kind is ast.Subscript or kind is ast.BinOp:
            return self.ref(expr)
        if kind is ast.BoolOp and type(expr.op) is ast.Or and type(expr.values[0]) is ast.Name \
                and expr.values[0].id in self.scope.declared:
            return self.ref(expr.values[0])  # `store_path or DEFAULT_DIR / "s"`: the parameter's declared type, as
            # a type checker holds the fallback to it
        if kind is ast.BoolOp or kind is ast.IfExp:
            parts = expr.values if kind is ast.BoolOp else [expr.body, expr.orelse]
            found = {self.value_ref(part) for part in parts if not _is_none(part)} - {None}
            return found.pop() if len(found) == 1 else None
        if kind is ast.List or kind is ast.Tuple or kind is ast.Set:
            return self.container_ref(expr.elts)
        if kind is ast.Dict:
            return self.container_ref(expr.values)
        if (kind is ast.ListComp or kind is ast.GeneratorExp or kind is ast.SetComp) and type(expr.elt) is ast.Call:
            return self.container_ref([expr.elt])  # `tasks = [self.search(q) for q in queries]`
        return None

    def container_ref(self, elements: list) -> str | None:
        """`[GithubProvider(), GoogleProvider()]`: a container whose elements are each one of those."""
        if len(elements) > MAX_MEMBERS:
            return None
        return _members_ref(CONTAINER, sorted(
            {self.value_ref(element) for element in elements if type(element) is not ast.Starred} - {None}))

    def _dependency(self, default: ast.expr | None) -> str | None:
        """A parameter given by dependency injection, `db=Depends(get_db)` (FastAPI; also Litestar's
        `Provide`): what calling the dependency returns (`get_db() -> DatabaseManager`, or a class's instance)."""
        if type(default) is not ast.Call or _text(default.func).rsplit(".", 1)[-1] not in _INJECTIONS:
            return None
        dependency = default.args[0] if default.args else next(
            (k.value for k in default.keywords if k.arg == "dependency"), None)
        return self._instance_of(dependency)

    def annotation_ref(self, annotation: ast.expr | None) -> str | None:
        """An annotated name holds an instance of its (project or library) type: `c: httpx.Client`, also one
        written as a string (`agent: "LocalPigeonAgent"`, a forward reference to a class imported under `if
        TYPE_CHECKING:`), as a type checker reads it."""
        if annotation is None:
            return None
        annotation = _unquoted(annotation)
        kind = type(annotation)
        if kind is ast.Subscript and _text(annotation.value).rsplit(".", 1)[-1] == "Annotated" \
                and type(annotation.slice) is ast.Tuple and annotation.slice.elts:
            annotation = annotation.slice.elts[0]  # `Annotated[DatabaseManager, Depends(get_db)]`: the type
            kind = type(annotation)
        if kind is ast.Subscript and _text(annotation.value).rsplit(".", 1)[-1] == "Optional":
            annotation = _unquoted(annotation.slice)
            kind = type(annotation)
        elif kind is ast.BinOp and isinstance(annotation.op, ast.BitOr):
            sides = [s for s in (annotation.left, annotation.right) if not _is_none(s)]
            if len(sides) != 1:
                return None
            annotation = sides[0]
            kind = type(annotation)
        if kind is ast.Subscript:  # `List[RAGAgent]`, `dict[str, Provider]`: a container of such instances
            element = _element_annotation(annotation)
            row = _row_annotation(element) if type(element) is ast.Subscript else None
            if row is not None:  # `list[tuple[Provider, str]]`: a container of tuples, each item of its own type
                items = [self._instance_of(item) or "" for item in row]
                return _members_ref(ROWS, items) if any(items) else None
            member = self._instance_of(element) if element is not None else None
            return None if member is None or "|" in member or "}" in member else CONTAINER + "{" + member + "}"
        return self._instance_of(annotation)

    def _callable_arguments(self, annotation: ast.expr | None) -> list[str | None] | None:
        """The references of what a callable annotated `Callable[[A, B], R]` (also `Optional[...]`, `... | None`)
        is called with; None for any other annotation."""
        annotation = _unquoted(annotation)
        if type(annotation) is ast.BinOp and isinstance(annotation.op, ast.BitOr):
            sides = [side for side in (annotation.left, annotation.right) if not _is_none(side)]
            annotation = _unquoted(sides[0]) if len(sides) == 1 else None
        if type(annotation) is ast.Subscript and _text(annotation.value).rsplit(".", 1)[-1] == "Optional":
            annotation = _unquoted(annotation.slice)
        if type(annotation) is not ast.Subscript or _text(annotation.value).rsplit(".", 1)[-1] != "Callable":
            return None
        parts = annotation.slice
        if type(parts) is not ast.Tuple or len(parts.elts) != 2 or type(parts.elts[0]) is not ast.List:
            return None
        found = [self.annotation_ref(argument) for argument in parts.elts[0].elts]
        return found if any(found) else None

    def _instance_of(self, node: ast.expr | None) -> str | None:
        """What calling a named project or library callable gives (`DatabaseManager` -> its instance, `get_db`
        -> its result); None for a builtin, a type that says nothing (`Any`, `object`) or anything but a name."""
        node = _unquoted(node)
        if type(node) not in (ast.Name, ast.Attribute) or _text(node).rsplit(".", 1)[-1] in _OPAQUE_TYPES:
            return None
        base = self.ref(node)
        if base is None or base.startswith("B:") or base.endswith(":"):
            return None
        return base + "()"

    # ------------------------------------------------------------------ statements

    def block(self, body: list) -> None:
        memoised = 0
        negated = 0
        flag = None
        for position, statement in enumerate(body):
            if type(statement) is ast.If and not statement.orelse and type(statement.body[-1]) is ast.Return \
                    and statement.body[-1].value is not None \
                    and _present_target(statement.test) == _text(statement.body[-1].value) \
                    and _assigns(body[position + 1:], _text(statement.body[-1].value)):
                # `if _client is not None: return _client`: the kept value, which the rest of the function makes
                self.kept_returns.add(id(statement.body[-1]))
            self.statement(statement)
            if self.platform_exit:  # `if platform.system() != "Windows": return []` on Linux: the rest never runs
                self.platform_exit = False
                rest = body[position + 1:]
                if rest:
                    self.unreachable.append((rest[0].lineno, rest[-1].end_lineno or rest[-1].lineno))
                break
            if type(statement) is ast.If and self.scope.kind == "function":
                # `if client._well_known is not None: return client._well_known`, then it is built and kept:
                # the rest of the block runs once per key, like the body of `if x is None: x = ...`
                target = _present_target(statement.test)
                returns = target is not None and not statement.orelse and type(statement.body[-1]) is ast.Return
                if returns and _assigns(body[position + 1:], target) and self._kept(target, body[position + 1:]):
                    memoised += 1
                    self.lazy_depth += 1
                    self.memo_depth += 1
                elif returns and flag is None and target.startswith("self.") and target.count(".") == 1:
                    klass = self._method_class()  # `if self._loaded: return True`, the flag set by a method
                    if klass is not None:
                        flag = (klass.key, target[5:], self.executing().key, len(self.executing().calls))
                # `if media_id: ...; return`: the rest of the block runs only with the switch off ("!media_id");
                # after `if status is not None and status not in KNOWN: raise`, `status` may still be on
                if not statement.orelse and type(statement.body[-1]) in (ast.Return, ast.Raise) \
                        and not _conjunction(statement.test):
                    switches = [name for name in self._switches_tested(statement.test) if "." not in name]
                    self.guards.extend("!" + name for name in switches)
                    negated += len(switches)
        if negated:
            del self.guards[len(self.guards) - negated:]
        self.lazy_depth -= memoised
        self.memo_depth -= memoised
        if flag is not None:
            klass, attribute, function, start = flag
            self._flag_guarded.append((klass, attribute, function, self.executing().calls[start:]))

    def statement(self, node: ast.stmt) -> None:
        kind = type(node)
        self.statement_line = node.lineno
        if kind is ast.Expr:  # the most frequent statement: a call, a docstring
            self.expressions([node.value])
            value = node.value
            if type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in ("append", "add") \
                    and len(value.args) == 1 and type(value.args[0]) is ast.Name:
                self._note_registration(value.func.value, value.args[0])
            self._note_expression_flow(value)
        elif kind in _DEFS:
            self.function_def(node)
        elif kind is ast.ClassDef:
            self.class_def(node)
        elif kind is ast.Assign:
            self.expressions([node.value])
            value = self.value_ref(node.value)
            shipped = self._shipped(node.value)
            if type(node.value) is ast.Name:
                for target in node.targets:
                    if type(target) is ast.Subscript:
                        self._note_registration(target.value, node.value)
            self.scope.flows.append((_stored_names(node.targets), [node.value]))
            for target in node.targets:
                self.assign(target, value)
                self._note_platform_name(target, node.value)
                self._note_switch_attribute(target, node.value)
                self._note_flag_set(target, node.value)
                if type(target) is ast.Name:
                    (self.scope.shipped.add if shipped else self.scope.shipped.discard)(target.id)
                    if self.scope.kind == "function":
                        self._note_type(target.id, self._evident_type(node.value))
        elif kind is ast.AnnAssign:
            self.expressions([node.value])
            if node.value is not None:
                self.scope.flows.append((_stored_names([node.target]), [node.value]))
            # the declared type wins over the value (`runtime: Runtime = request.state.session.runtime`), as
            # for a type checker; `typing` forms (`Any`, `Union`) say nothing of it
            value = self.annotation_ref(node.annotation)
            if value is None or value.startswith(_TYPING_REFS):
                value = self.value_ref(node.value) if node.value is not None else None
            elif type(node.target) is ast.Attribute:
                self._declare_attribute(node.target, value)
            self.assign(node.target, value, annotated=True)
            if node.value is not None:
                self._note_platform_name(node.target, node.value)
            if type(node.target) is ast.Name:
                self._note_type(node.target.id, _annotation_types(node.annotation) or (
                    self._evident_type(node.value) if node.value is not None else None))
        elif kind is ast.AugAssign:
            self.expressions([node.value, node.target])
            self.scope.flows.append((_stored_names([node.target]), [node.value]))
        elif kind is ast.Import or kind is ast.ImportFrom:
            for local, ref in _import_refs(node):
                self.bind(local, ref)
            if not self.imports_model and self.interest is not None:
                self.imports_model = self.interest.imports_model(node)
        elif kind is ast.If:
            self.if_statement(node)
        elif kind is ast.With or kind is ast.AsyncWith:
            for item in node.items:
                self.expressions([item.context_expr])
                self._enter(item.context_expr, kind is ast.AsyncWith)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, self.value_ref(item.context_expr))
                    self.scope.flows.append((_stored_names([item.optional_vars]), [item.context_expr]))
            self.block(node.body)
        elif kind is ast.For or kind is ast.AsyncFor:
            if kind is ast.For and type(node.iter) is ast.Call:
                self.iterated.add(id(node.iter))  # `for event in stream.get_events():` runs the generator here
            self.expressions([node.iter])
            self.scope.flows.append((_stored_names([node.target]), [node.iter]))
            for name, value in self._loop_values(node.target, node.iter):
                self.bind(name, value)
            scope = self.scope
            if type(node.target) is ast.Name and type(node.iter) is ast.Name and \
                    scope.params.get(node.iter.id, "").startswith("*"):  # `for item in content_items:`
                scope.loops[node.target.id] = node.iter.id
                self._note_type(node.target.id, scope.declared.get("*" + node.iter.id))
            self.block(node.body)
            self.block(node.orelse)
        elif kind is ast.While:
            self.expressions([node.test])
            self.block(node.body)
            self.block(node.orelse)
        elif kind in _TRIES:
            self.block(node.body)
            probes_loop = _probes_running_loop(node.body)
            for handler in node.handlers:
                if handler.name:
                    self.bind(handler.name, None)
                # `except ImportError: install it`: once, if ever; `try: asyncio.get_running_loop() / except
                # RuntimeError:` runs only where no event loop runs, so never under a coroutine
                once = int(_import_error(handler.type) or probes_loop and _catches(handler.type, "RuntimeError"))
                self.lazy_depth += once
                self.block(handler.body)
                self.lazy_depth -= once
            self.block(node.orelse)
            self.block(node.finalbody)
        elif kind is ast.Match:
            self.expressions([node.subject])
            for case in node.cases:
                self.expressions([case.guard])
                self.block(case.body)
        elif kind is ast.Global or kind is ast.Nonlocal:
            self.scopes[-1].globals.update(node.names)
        elif kind is ast.Return:
            self.expressions([node.value])
            if id(node) in self.kept_returns:
                self.scope.kept_returns.append(node.value)
            else:
                self._note_return(node.value)
            if node.value is not None:
                self.scope.flows.append((None, [node.value]))
        else:  # Expr, Raise, Assert, Delete...
            self.expressions([value for name, value in ast.iter_fields(node) if isinstance(value, ast.AST)])

    def _note_expression_flow(self, value: ast.expr) -> None:
        """An expression statement that gives a value back (`yield x`, `await ws.send_text(x)`: entrypoints.yaml
        `replies`) or stores it in a container (`parts.append(x)`) (_mark_answers)."""
        inner = value.value if type(value) is ast.Await else value
        kind = type(inner)
        if kind is ast.Yield or kind is ast.YieldFrom:
            if inner.value is not None:
                self.scope.flows.append((None, [inner.value]))
        elif kind is ast.Call:
            func = inner.func
            attribute = type(func) is ast.Attribute
            name = func.attr if attribute else (func.id if type(func) is ast.Name else None)
            if name is not None and self.interest is not None and name in self.interest.replies:
                self.scope.flows.append((None, [inner]))
            elif attribute and name in _STORING_METHODS:
                self.scope.flows.append((_stored_names([func.value]), [*inner.args, *(k.value for k in inner.keywords)]))

    def _note_registration(self, container: ast.expr, stored: ast.Name) -> None:
        """`registry[name] = cls` / `registry.append(cls)` where `cls` is this function's first parameter and
        `registry` a module-level name (here, or imported)."""
        scope = self.scope
        if scope.kind != "function" or scope.first is None or stored.id != scope.first:
            return
        if type(container) is ast.Name:
            name = container.id
            if name not in self.module_bindings or any(name in outer.bindings for outer in self.scopes[1:]):
                return  # not a module-level name, or a local container gone with the call
            value = self.module_bindings[name]
            ref = value if _imported(value) else "M:" + name  # `from .stage import registry`, or defined here
        elif type(container) is ast.Attribute:  # `stage.registry` of an imported module
            ref = self.ref(container)
            if not _imported(ref):
                return
        else:
            return
        scope.function.registers.append(ref)

    def _loop_values(self, target: ast.expr, iterable: ast.expr) -> list[tuple[str, str | None]]:
        """What a loop variable holds: `for p in providers` an element of `providers`; `v` in
        `for k, v in d.items()` and `for i, v in enumerate(items)` too; `p` in `for p, keys in chain`, item 0 of an
        element."""
        names = _target_names(target)
        source = None
        method = iterable.func if type(iterable) is ast.Call else None
        if type(method) is ast.Name and method.id in _SAME_ELEMENTS and len(iterable.args) == 1 \
                and not self.lookup(method.id)[0]:  # `for p in sorted(root.glob("*.md"))`
            iterable = iterable.args[0]
            method = iterable.func if type(iterable) is ast.Call else None
        if type(target) is ast.Name:
            if type(method) is ast.Attribute and method.attr == "values" and not iterable.args:
                source = method.value
            elif method is None or type(method) is ast.Attribute:  # a library call's elements: `root.glob("*")`
                source = iterable
        elif type(target) is ast.Tuple and len(target.elts) == 2 and type(target.elts[1]) is ast.Name:
            if type(method) is ast.Attribute and method.attr == "items" and not iterable.args:
                source = method.value
            elif type(method) is ast.Name and method.id == "enumerate" and len(iterable.args) == 1 \
                    and not self.lookup("enumerate")[0]:
                source = iterable.args[0]
        if source is None and type(target) is ast.Tuple and all(type(item) is ast.Name for item in target.elts):
            rows = self.ref(iterable)  # `for provider, keys in chain`: item i of each element
            if rows is None or rows.endswith(":"):
                return [(name, None) for name in names]
            return [(name, f"{rows}[][{position}]") for position, name in enumerate(names)]
        element = self.ref(source) if source is not None else None
        if element is None or element.endswith(":"):
            return [(name, None) for name in names]
        return [(name, element + "[]" if name == names[-1] else None) for name in names]

    def _note_return(self, value: ast.expr | None) -> None:
        """What the function returns, as far as every `return` agrees (`return None` says nothing)."""
        scope = self.scope
        if scope.kind != "function" or value is None or _is_none(value):
            return
        function = scope.function
        seen = self._returns_seen.setdefault(function.key, 0)
        self._returns_seen[function.key] = seen + 1
        if type(value) is ast.Tuple:
            # item by item: `return None, params, error` and `return tool, params, None` give back the `tool` where
            # any is given (a `None` says nothing of the others, as for a whole `return None`)
            items = [_NONE_RETURNED if _is_none(element) else self.value_ref(element) for element in value.elts]
            known = function.returns_items
            if seen == 0:
                function.returns_items = items
            elif known is not None and len(known) == len(items):
                function.returns_items = [new if old == _NONE_RETURNED else old if new in (old, _NONE_RETURNED)
                                          else _either(old, new) for old, new in zip(known, items)]
            else:
                function.returns_items = None
            function.returns = None
            return
        ref = self.value_ref(value)
        if seen == 0:
            function.returns = ref
        elif function.returns != ref:
            function.returns = None
        function.returns_items = None

    def assign(self, target: ast.expr, value: str | None, annotated: bool = False) -> None:
        kind = type(target)
        if kind is ast.Name:
            self.bind(target.id, value)
        elif kind is ast.Attribute:
            self.expressions([target.value])
            self._note_attribute(target, value)
            self._note_assigned_callable(target, value)
        elif kind is ast.Tuple or kind is ast.List:
            for position, element in enumerate(target.elts):  # `args, controller = create_controller()`
                item = f"{value}[{position}]" if value is not None and value.endswith("()") else None
                self.assign(element, item)
        elif kind is ast.Starred:
            self.assign(target.value, None)
        else:
            self.expressions([target])

    def _note_switch_attribute(self, target: ast.expr, value: ast.expr) -> None:
        """`self.specify = specify` in `__init__`, where `specify` is a switch."""
        if self.scope.kind != "function" or self.scope.function.name != "__init__":
            return
        function = self.scope.function
        if type(target) is ast.Attribute and type(target.value) is ast.Name and \
                self.scope.bindings.get(target.value.id) == "S:" and type(value) is ast.Name and \
                value.id in function.switches:
            function.switch_attributes[target.attr] = value.id

    def _note_flag_set(self, target: ast.expr, value: ast.expr) -> None:
        """`self._loaded = True` in a method: the flag a return-if-done guard tests (`block`)."""
        if (type(target) is ast.Attribute and type(target.value) is ast.Name and type(value) is ast.Constant
                and value.value is True and self.lookup(target.value.id)[1] == "S:"):
            klass = self._method_class()
            if klass is not None:
                self._flags_set.setdefault((klass.key, target.attr), set()).add(self.executing().key)

    def _note_attribute(self, target: ast.Attribute, value: str | None) -> None:
        """`self.x = ...` in a method types `self.x` for every method of the class."""
        klass = self._own_class(target)
        if klass is None:
            return
        name = target.attr
        if value is not None and value.startswith(PARAMETER):
            value = None  # a parameter means something only in its own function
        # like `client or boto3.client("s3")`: a parameter or None assigned in one place says nothing; two
        # different known values leave it unknown
        seen = self._attribute_values.setdefault((klass.key, name), set())
        if value is not None:
            seen.add(value)
        if len(seen) == 1:
            klass.attributes[name] = next(iter(seen))
            return
        # two different values: the class built either way (`Client.from_service_account_json(path)` or
        # `Client()`) is that class's; else the type the class declares for it (`model: Model`, each a subclass);
        # else either of them (`self.client = client` typed `DynamoDBClient`, or `boto3.client("dynamodb")`)
        built = {_from_constructor(v) for v in seen}
        plain = next(iter(built)) if len(built) == 1 else None
        klass.attributes[name] = plain if plain in seen else (
            self._declared_attributes.get((klass.key, name)) or _either_of(seen))

    def _declare_attribute(self, target: ast.Attribute, declared: str) -> None:
        """`self._collection: chromadb.Collection | None = None` in a method declares the attribute's type for the
        class, as a class-level annotation does: the type the other assignments of it must have."""
        klass = self._own_class(target)
        if klass is not None:
            self._declared_attributes.setdefault((klass.key, target.attr), declared)

    def _note_assigned_callable(self, target: ast.Attribute, value: str | None) -> None:
        """`application.post_init = self._post_init`: kept as an ASSIGNED call of the attribute with the value."""
        if value is None or value.endswith(")") or value.startswith(CONTAINER) or (
                type(target.value) is ast.Name and self.lookup(target.value.id)[1] in ("S:", "C:")):
            return
        ref = self.ref(target)
        if ref is None or ref.endswith(":"):
            return
        line, col, end_line, end_col = self.span(target)
        self.executing().calls.append(Call(
            ref=ref, kind=ASSIGNED, line=line, col=col, end_line=end_line, end_col=end_col,
            stmt_line=self.statement_line, text=_chain(target), args=(("0", value),), positional=1))

    def _own_class(self, target: ast.Attribute) -> ClassInfo | None:
        """The class whose method assigns `self.x` / `cls.x` (`target`), else None."""
        if type(target.value) is not ast.Name or self.lookup(target.value.id)[1] not in ("S:", "C:"):
            return None
        return self._method_class()

    def _method_class(self) -> ClassInfo | None:
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                owner = scope.function.owner
                if owner is None:
                    continue
                return next((c for c in reversed(self.classes) if c.key == owner), None)
        return None

    def if_statement(self, node: ast.If) -> None:
        self.expressions([node.test])
        holds = self.platform_test(node.test)
        if holds is not None:  # `if sys.platform == "win32":` on Linux: the other branch is the code that runs
            skipped, taken = (node.orelse, node.body) if holds else (node.body, node.orelse)
            if skipped:
                self.unreachable.append((skipped[0].lineno, skipped[-1].end_lineno or skipped[-1].lineno))
            self.block(taken)
            self.platform_exit = bool(taken) and type(taken[-1]) in _EXITS
            return
        if self.scope.kind == "module" and _is_main_test(node.test):
            self.main_block = True
        lazy = _lazy_target(node.test)
        kept = lazy is not None and _assigns(node.body, lazy) and self._kept(lazy, node.body)
        guarded = kept or _once_guard(node.test)
        self.lazy_depth += guarded
        self.memo_depth += kept
        switches = self._switches_tested(node.test)
        typed, narrowed = self._types_tested(node.test)
        switches += typed
        self.guards.extend(switches)
        known = self.scope.types
        before = {name: known.get(name) for name in narrowed}
        known.update(narrowed)
        joins = self.scope.kind == "function" and bool(node.orelse)  # (below: what either branch binds)
        before_if = dict(self.scope.bindings) if joins else None
        self.block(node.body)
        for name, types in before.items():
            if types is None:
                known.pop(name, None)
            else:
                known[name] = types
        del self.guards[len(self.guards) - len(switches):]
        self.lazy_depth -= guarded
        self.memo_depth -= kept
        scope = self.scope
        if not joins:
            self.block(node.orelse)
            return
        # `if openai: provider = OpenAIProvider() / else: provider = GroqProvider()`: after the `if`, the name holds
        # what either branch bound, as a type checker joins the branches (a branch that leaves says nothing)
        after_body, scope.bindings = scope.bindings, before_if
        self.block(node.orelse)
        if type(node.body[-1]) in _EXITS:
            return
        if type(node.orelse[-1]) in _EXITS:
            scope.bindings = after_body
            return
        for name in after_body.keys() | scope.bindings.keys():
            scope.bindings[name] = _either(after_body.get(name), scope.bindings.get(name))

    def platform_test(self, test: ast.expr) -> bool | None:
        """Whether a platform test holds where the code runs (`sys.platform == "win32"`, `os.name != "nt"`,
        `platform.system() == "Windows"`, `sys.platform.startswith("win")`, a module-level name bound to one, and
        `not`/`and`/`or` of them); None: not decided by the platform."""
        if self.platform is None:
            return None
        kind = type(test)
        if kind is ast.Compare and len(test.ops) == 1:
            value = self._platform_value(test.left)
            if value is None:
                return None
            op, right = type(test.ops[0]), test.comparators[0]
            if op in (ast.Eq, ast.NotEq) and type(right) is ast.Constant and type(right.value) is str:
                return (value == right.value) == (op is ast.Eq)
            if op in (ast.In, ast.NotIn) and type(right) in (ast.Tuple, ast.List, ast.Set) and all(
                    type(e) is ast.Constant and type(e.value) is str for e in right.elts):
                return (value in [e.value for e in right.elts]) == (op is ast.In)
            return None
        if kind is ast.Call and type(test.func) is ast.Attribute and test.func.attr == "startswith" \
                and len(test.args) == 1 and not test.keywords:
            value = self._platform_value(test.func.value)
            prefixes = test.args[0]
            if value is None:
                return None
            if type(prefixes) is ast.Constant and type(prefixes.value) is str:
                return value.startswith(prefixes.value)
            if type(prefixes) is ast.Tuple and all(type(e) is ast.Constant and type(e.value) is str
                                                   for e in prefixes.elts):
                return value.startswith(tuple(e.value for e in prefixes.elts))
            return None
        if kind is ast.UnaryOp and type(test.op) is ast.Not:
            inner = self.platform_test(test.operand)
            return None if inner is None else not inner
        if kind is ast.BoolOp:
            decisive = type(test.op) is ast.Or  # True decides an `or`, False an `and`
            parts = [self.platform_test(value) for value in test.values]
            if decisive in parts:
                return decisive
            return None if None in parts else not decisive
        if kind is ast.Name and not (self.scope.kind == "function" and test.id in self.scope.bindings):
            return self.platform_names.get(test.id)
        return None

    def _platform_value(self, node: ast.expr) -> str | None:
        """What `sys.platform`, `os.name`, `platform.system()` (and its `.lower()`) read where the code runs, also
        through a name bound to one (`system = platform.system()`) in this function or at module level."""
        if type(node) is ast.Name:
            scope = self.scope
            if scope.platform_values and node.id in scope.platform_values:
                return scope.platform_values[node.id]
            module = self.scopes[0]
            if scope is not module and module.platform_values and node.id not in scope.bindings:
                return module.platform_values.get(node.id)
            return None
        if type(node) is ast.Call:
            if node.args or node.keywords:
                return None
            name = _text(node.func)
            if name == "platform.system":
                return self.platform["platform.system"]
            if name == "platform.system.lower" and type(node.func.value) is ast.Call:
                return self.platform["platform.system"].lower()
            return None
        name = _text(node)
        return self.platform.get(name) if name in ("sys.platform", "os.name") else None

    def _note_platform_name(self, target: ast.expr, value: ast.expr) -> None:
        """`IS_WINDOWS = sys.platform == "win32"` at module level: the name is that platform test; `system =
        platform.system()` in any function: the name reads that value (bound again to anything else, it is none)."""
        if type(target) is not ast.Name or self.platform is None:
            return
        scope = self.scope
        kind = type(value)
        if (kind is ast.Attribute and value.attr in ("platform", "name")) or (
                kind is ast.Call and type(value.func) is ast.Attribute and value.func.attr in ("system", "lower")):
            read = self._platform_value(value)
        else:
            read = None
        if read is not None or (scope.platform_values and target.id in scope.platform_values):
            if scope.platform_values is None:
                scope.platform_values = {}
            scope.platform_values[target.id] = read
        if scope.kind != "module":
            return
        holds = self.platform_test(value)
        name = target.id
        if holds is not None or name in self.platform_names:
            self.platform_names[name] = holds if self.platform_names.get(name, holds) == holds else None

    def _shipped(self, expr: ast.expr | None) -> bool:
        """Whether `expr` builds a path from `__file__` (`os.path.join(os.path.dirname(__file__), "task.json")`,
        `Path(__file__).parent / "prompts"`), directly or through a name bound to one (`PROMPTS = Path(__file__)
        .parent` at module level)."""
        if expr is None or not self.reads_file:
            return False
        for node in ast.walk(expr):
            if type(node) is ast.Name and (node.id == "__file__" or any(node.id in s.shipped for s in self.scopes)):
                return True
        return False

    def _kept(self, target: str, body: list) -> bool:
        """Whether what a lazy guard on `target` makes outlives the call: `target` is an attribute
        (`self._client`), a key of a container (`cache[]`), a module-level name, or a local the body also stores
        in one (`client = get_client(); cache[key] = client`)."""
        if "." in target or target.endswith("[]"):
            return True
        scope = self.scopes[-1] if self.scopes else None
        if scope is None or scope.kind == "module" or target in scope.globals:
            return True
        return _stores(body, target)

    def _switches_tested(self, test: ast.expr) -> list[str]:
        """`if synthesize:` / `elif path is not None:` / `if synthesize and model is None:`: the body runs only
        when the switch is on."""
        if self.scope.kind != "function":
            return []
        switches = self.scope.function.switches
        operands = test.values if type(test) is ast.BoolOp and type(test.op) is ast.And else [test]
        names = []
        for operand in operands:
            if type(operand) is ast.Compare and len(operand.ops) == 1 and type(operand.ops[0]) is ast.IsNot \
                    and type(operand.comparators[0]) is ast.Constant and operand.comparators[0].value is None:
                operand = operand.left
            if type(operand) is ast.Name and operand.id in switches:
                names.append(operand.id)
            elif type(operand) is ast.Attribute and type(operand.value) is ast.Name and \
                    self.scope.bindings.get(operand.value.id) == "S:":
                names.append("self." + operand.attr)  # decided by the object (its `__init__` may say how)
        return names

    def _types_tested(self, test: ast.expr) -> tuple[list[str], dict[str, tuple[str, ...]]]:
        """`if isinstance(item, Path):`: the body runs only for an argument of that type. The guards on the
        function's parameters (`isinstance:item:0:Path`; for an element of `*items`: `isinstance:items:*0:Path`)
        and the names the body may take to be of the type."""
        if self.scope.kind != "function":
            return [], {}
        scope = self.scope
        guards: list[str] = []
        narrowed: dict[str, tuple[str, ...]] = {}
        for operand in test.values if type(test) is ast.BoolOp and type(test.op) is ast.And else [test]:
            if not (type(operand) is ast.Call and type(operand.func) is ast.Name and operand.func.id == "isinstance"
                    and len(operand.args) == 2 and type(operand.args[0]) is ast.Name):
                continue
            types = _type_names(operand.args[1])
            if types is None:
                continue
            name = operand.args[0].id
            narrowed[name] = types
            parameter = name if name in scope.params else scope.loops.get(name)
            if parameter is not None and (parameter == name) != scope.params[parameter].startswith("*"):
                guards.append(f"{TYPE_GUARD}{parameter}:{scope.params[parameter]}:{'|'.join(types)}")
        return guards, narrowed

    def _note_type(self, name: str, types: tuple[str, ...] | None) -> None:
        if self.scope.kind == "function" and types:
            self.scope.types[name] = types

    def _evident_type(self, node: ast.expr, depth: int = 0) -> tuple[str, ...] | None:
        """The types an expression evidently has: a literal's, a string built from one (`f"..."`, `"a" + b`,
        `sep.join(...)` on a literal, `str(x)`), a name narrowed by `isinstance` or bound to such a value."""
        kind = type(node)
        if kind is ast.Constant:
            return ("None",) if node.value is None else (type(node.value).__name__,)
        if kind is ast.JoinedStr:
            return ("str",)
        if kind is ast.Name:
            return self.scope.types.get(node.id) if self.scope.kind == "function" else None
        if kind in _LITERAL_TYPES:
            return _LITERAL_TYPES[kind]
        if depth > _MAX_TYPE_DEPTH:  # `"s0" + "s1" + ...` nests as deep as it is long
            return None
        if kind is ast.BinOp and type(node.op) in (ast.Add, ast.Mod):
            if self._evident_type(node.left, depth + 1) == ("str",) or (
                    type(node.op) is ast.Add and self._evident_type(node.right, depth + 1) == ("str",)):
                return ("str",)
            return None
        if kind is ast.Call:
            func = node.func
            if type(func) is ast.Name and func.id in _STR_BUILTINS and not self.lookup(func.id)[0]:
                return ("str",)
            if type(func) is ast.Attribute and func.attr in _STR_METHODS and \
                    self._evident_type(func.value, depth + 1) == ("str",):
                return ("str",)
            return None
        if kind is ast.BoolOp or kind is ast.IfExp:
            parts = node.values if kind is ast.BoolOp else [node.body, node.orelse]
            found: dict[str, None] = {}
            for part in parts:
                types = self._evident_type(part, depth + 1)
                if types is None:
                    return None
                found.update(dict.fromkeys(types))
            return tuple(found)
        return None

    def _argument_types(self, node: ast.Call) -> list[str]:
        """`Call.types`: what the arguments evidently are, or which of the caller's parameters they hand on."""
        scope = self.scope
        if scope.kind != "function":
            return []
        out = []
        for index, arg in enumerate(node.args):
            if type(arg) is ast.Starred:  # `User(*content_items)`: the caller's `*content_items` handed on
                value = arg.value
                if type(value) is ast.Name and scope.params.get(value.id, "").startswith("*"):
                    declared = "|".join(scope.declared.get("*" + value.id, ()))
                    out.append(f"*{index}={declared}@{value.id}:{scope.params[value.id]}")
                break  # where the later ones land is not known
            found = self._argument_type(arg)
            if found is not None:
                out.append(f"{index}={found}")
        for keyword in node.keywords:
            if keyword.arg is not None:
                found = self._argument_type(keyword.value)
                if found is not None:
                    out.append(f"{keyword.arg}={found}")
        return out

    def _argument_type(self, arg: ast.expr) -> str | None:
        """"str|None" where evident; the caller's parameter handed on, after the types its annotation allows
        ("str|Path@path:0", "@path:0")."""
        types = self._evident_type(arg)
        if types is not None:
            return "|".join(types)
        scope = self.scope
        if type(arg) is ast.Name and arg.id in scope.params and not scope.params[arg.id].startswith("*"):
            return "|".join(scope.declared.get(arg.id, ())) + f"@{arg.id}:{scope.params[arg.id]}"
        return None

    def _key(self, name: str) -> str:
        parent = self.scope.function.key if self.scope.kind == "function" else (
            self.scope.klass.key if self.scope.kind == "class" else "")
        key = f"{parent}.{name}" if parent else name
        count = self.keys_seen.get(key, 0) + 1
        self.keys_seen[key] = count
        return key if count == 1 else f"{key}#{count}"

    def function_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.scope
        decorators = [self.decorator(d) for d in node.decorator_list]
        # defaults and annotations are evaluated by the code around the def
        self.expressions([*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]])
        declared = self.annotation_ref(node.returns)  # evaluated by the code around the def, as defaults are
        key = self._key(node.name)
        names = {d.text.rsplit(".", 1)[-1] for d in decorators}
        function = Function(key=key, name=node.name, line=node.lineno, is_async=type(node) is ast.AsyncFunctionDef,
                            decorators=decorators)
        if declared is not None and not declared.startswith((CONTAINER, *_TYPING_REFS)):
            function.declared = declared
        if outer.kind == "class":
            function.owner = outer.klass.key
            function.static = "staticmethod" in names
            function.abstract = "abstractmethod" in names or _no_body(node.body) or _passes_through(node)
            function.accessor = not names.isdisjoint(ACCESSOR_DECORATORS)
            outer.klass.methods.setdefault(node.name, key)
        elif outer.kind == "function":
            function.parent = outer.function.key
            outer.bindings[node.name] = "F:" + key
        self.functions.append(function)
        scope = _Scope("function", function=function)
        arguments = node.args
        positional = [*arguments.posonlyargs, *arguments.args]
        defaults = dict(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
        defaults.update((arg, d) for arg, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None)
        for index, arg in enumerate([*positional, *arguments.kwonlyargs]):
            if index == 0 and function.owner is not None and not function.static and arg in positional:
                scope.bindings[arg.arg] = "C:" if "classmethod" in names else "S:"
            else:
                scope.bindings[arg.arg] = self.annotation_ref(arg.annotation) or self._dependency(defaults.get(arg))
        for star in (arguments.vararg, arguments.kwarg):
            if star is not None:
                scope.bindings[star.arg] = None
        if positional and function.owner is None:
            scope.first = positional[0].arg
        shift = 1 if function.owner is not None and not function.static else 0
        function.parameters = [arg.arg for arg in positional[shift:]]
        if arguments.kwonlyargs:
            function.parameters += ["*", *(arg.arg for arg in arguments.kwonlyargs)]
        for index, arg in enumerate(positional[shift:]):
            scope.params[arg.arg] = str(index)
        scope.params.update((arg.arg, "k") for arg in arguments.kwonlyargs)
        if arguments.vararg is not None:
            scope.params[arguments.vararg.arg] = f"*{len(positional) - shift}"
        annotated = [(arg.arg, arg.annotation) for arg in [*positional[shift:], *arguments.kwonlyargs]]
        if arguments.vararg is not None:
            annotated.append(("*" + arguments.vararg.arg, arguments.vararg.annotation))
        for name, annotation in annotated:
            types = _annotation_types(annotation)
            if types:
                scope.declared[name] = types
            called_with = self._callable_arguments(annotation)
            if called_with:
                function.callables[name] = called_with
        function.switches = _switches(arguments, bound=function.owner is not None and not function.static)
        self._bind_nested_defs(scope, key, node.body)
        self.scopes.append(scope)
        saved_lazy, self.lazy_depth = self.lazy_depth, 0
        saved_memo, self.memo_depth = self.memo_depth, 0
        saved_guards, self.guards = self.guards, []
        self.block(node.body)
        if scope.kept_returns and not self._returns_seen.get(key):
            for value in scope.kept_returns:  # what it returns is only ever the kept value
                self._note_return(value)
        _mark_answers(function, scope.flows, self.interest)
        if self.interest is not None and self.interest.logging is not None:
            function.logs = self._logged_parameters(node.body, function.parameters)
        if function.returns_items is not None:
            function.returns_items = [None if item == _NONE_RETURNED else item for item in function.returns_items]
        if "contextmanager" in names:  # `with self._connect() as db:` runs the body up to its `yield` on entry
            function.generator = False
        self.lazy_depth = saved_lazy
        self.memo_depth = saved_memo
        self.guards = saved_guards
        self.scopes.pop()

    def _logged_parameters(self, body: list, parameters: list[str]) -> dict[str, int]:
        """Function.logs: `progress_logger.info(message)`, `log.info(f"{title}: {text}")` as a statement of `body`."""
        knowledge = self.interest.logging
        logged: dict[str, int] = {}
        for statement in body:
            if type(statement) is not ast.Expr or type(statement.value) is not ast.Call:
                continue
            call = statement.value
            func = call.func
            if type(func) is ast.Attribute:
                ref = self.ref(func)
                owner = ref[2:].rpartition(".")[0].replace("()", "") if ref and ref.startswith("I:") else None
                receiver = func.value.id if type(func.value) is ast.Name else (
                    func.value.attr if type(func.value) is ast.Attribute else None)
                level = knowledge.fixed_level(owner, receiver, func.attr)
            elif type(func) is ast.Name:
                ref = self.ref(func)
                owner, _, method = ref[2:].rpartition(".") if ref and ref.startswith("I:") else (None, "", "")
                level = knowledge.fixed_level(owner, None, method) if owner else None
            else:
                continue
            if level is None or level < knowledge.min_level:
                continue
            shown = call.args[:1] + _shown_arguments(call.args[0], call.args[1:], knowledge) if call.args else []
            shown += [k.value for k in call.keywords if k.arg not in NOT_LOGGED_KEYWORDS]
            for name in _shown_names(shown, knowledge):
                if name in parameters and logged.get(name, -1) < level:
                    logged[name] = level
        return logged

    def _bind_nested_defs(self, scope: _Scope, key: str, body: list) -> None:
        """A closure reads its enclosing function's names when it runs, so a def later in the body is already
        bound for the defs before it (a route handler handing `_process_webhook`, defined below it, to a
        background task): each `def`/`class` of the body's top level that is its name's only binding there."""
        defined = [statement.name for statement in body if type(statement) in _DEFS or type(statement) is ast.ClassDef]
        if not defined:
            return
        rebound = {node.id for statement in body for node in ast.walk(statement)
                   if type(node) is ast.Name and type(node.ctx) is ast.Store}
        for name in defined:
            nested = f"{key}.{name}"
            if defined.count(name) == 1 and name not in rebound and name not in scope.bindings \
                    and not self.keys_seen.get(nested):
                scope.bindings[name] = "F:" + nested

    def class_def(self, node: ast.ClassDef) -> None:
        outer = self.scope
        decorators = [self.decorator(d) for d in node.decorator_list]
        self.expressions([k.value for k in node.keywords])
        key = self._key(node.name)
        klass = ClassInfo(key=key, name=node.name, line=node.lineno, decorators=decorators,
                          bases=[(self.ref(base), _text(base)) for base in node.bases])
        self.classes.append(klass)
        if outer.kind == "function":
            outer.bindings[node.name] = "F:" + key
        scope = _Scope("class", klass=klass)
        self.scopes.append(scope)
        for statement in node.body:  # class-level `x: T` / `x = T()` types `self.x`
            kind = type(statement)
            if kind is ast.AnnAssign and type(statement.target) is ast.Name:
                declared = self.annotation_ref(statement.annotation)
                value = statement.value
                if value is not None and not (type(value) is ast.Call and
                                              _text(value.func).rsplit(".", 1)[-1] in FIELD_SPECIFIERS):
                    value = self.value_ref(value)
                else:  # `model: Optional[Model] = Field(None, alias="provider")`: the annotation says what it holds
                    value = None
                klass.attributes[statement.target.id] = value or declared
                if declared is not None:
                    self._declared_attributes[(key, statement.target.id)] = declared
            elif kind is ast.Assign and len(statement.targets) == 1 and type(statement.targets[0]) is ast.Name:
                value = self.value_ref(statement.value)
                if value is not None:
                    klass.attributes.setdefault(statement.targets[0].id, value)
        self.block(node.body)
        self.scopes.pop()
        for owner, attribute, function, calls in self._flag_guarded:
            setters = self._flags_set.get((owner, attribute), ()) if owner == key else ()
            # the rest sets the flag, itself or through a method it calls (`self._apply(data)`): the work before
            # it runs once per object, as under `if x is None:`; a flag another method sets (`close()` setting
            # `self._closed`) guards nothing of the kind
            if function in setters or any(klass.methods.get(name) in setters for name in _self_calls(calls)):
                for call in calls:
                    call.lazy = call.memo = True

    def _note_route_prefix(self, name: str, value: ast.Call) -> None:
        """A module-level router or blueprint made with a path prefix (FastAPI's `APIRouter(prefix="/admin")`,
        Flask's and Sanic's `Blueprint(..., url_prefix="/admin")`): the routes its decorators name start there."""
        for keyword in value.keywords:
            if (keyword.arg in ("prefix", "url_prefix") and type(keyword.value) is ast.Constant
                    and isinstance(keyword.value.value, str) and keyword.value.value.startswith("/")):
                self.route_prefixes[name] = keyword.value.value.rstrip("/")

    def decorator(self, node: ast.expr) -> Decorator:
        called = type(node) is ast.Call
        callee = node.func if called else node
        literal = None
        if called:
            first = node.args[0] if node.args else None
            if type(first) is ast.Constant and isinstance(first.value, str):
                literal = first.value
                receiver = callee.value if type(callee) is ast.Attribute else None
                if (type(receiver) is ast.Name and receiver.id in self.route_prefixes and literal.startswith("/")
                        and not any(receiver.id in scope.bindings for scope in self.scopes[1:])):
                    literal = self.route_prefixes[receiver.id] + literal  # `@router.get("/stats")`
            self.expressions(list(node.args) + [k.value for k in node.keywords])
        return Decorator(ref=self.ref(callee), text=_text(callee), literal=literal, called=called)

    def _parameter(self, name: str) -> str | None:
        """A parameter of the function being read that has no annotation and still holds its argument
        ("P:runtime"; `@sio.on("chat")` inside `def register_handlers(sio)` is "P:sio.on"): the model types it
        from what every caller passes there."""
        scope = self.scope
        if (scope.kind == "function" and not scope.params.get(name, "*").startswith("*")
                and scope.bindings.get(name, _MISSING) is None):
            return PARAMETER + name
        return None

    # ------------------------------------------------------------------ expressions

    def expressions(self, roots: list, mode: int = CALL) -> None:
        """Record every call under `roots` (lambdas' bodies as LAMBDA calls, comprehensions inherit), in the
        order written."""
        stack = [root for root in roots if root is not None]
        function = self.executing()
        fields_of = NODE_FIELDS
        name_node, constant, attribute, call, awaited = ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Await
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is name_node or kind is constant:  # the most frequent nodes: nothing below them
                continue
            if kind is attribute:
                stack.append(node.value)
                continue
            if kind is _OutOfComprehension:
                self._unbind(node.saved)
                continue
            if kind in _COMPREHENSIONS and self.scope.kind == "function":
                stack.append(_OutOfComprehension(self._bind_comprehension(node)))
            if kind is call:
                self.call(node, function, mode)
                stack.append(node.func)
                stack.extend(node.args)
                stack.extend([k.value for k in node.keywords])
                continue
            if kind is awaited:
                value = node.value
                if type(value) is call:
                    self.call(value, function, AWAIT if mode == CALL else mode)
                    stack.append(value.func)
                    stack.extend(value.args)
                    stack.extend([k.value for k in value.keywords])
                    continue
                stack.append(value)
                continue
            if kind is ast.IfExp and self.platform is not None:
                holds = self.platform_test(node.test)
                if holds is not None:  # `a() if IS_WINDOWS else b()`: only the branch that runs
                    stack.extend([node.test, node.body if holds else node.orelse])
                    continue
            if kind is ast.Lambda:  # its defaults run here, its body when the lambda runs
                stack.extend(node.args.defaults)
                stack.extend([d for d in node.args.kw_defaults if d is not None])
                if id(node) not in self.handed_lambdas:  # (a lambda handed to a call is a function of its own)
                    self.expressions([node.body], LAMBDA)
                continue
            if kind is ast.NamedExpr:
                self.bind(node.target.id, self.value_ref(node.value))
            elif (kind is ast.Yield or kind is ast.YieldFrom) and mode != LAMBDA:
                function.generator = True
            for field_name in fields_of.get(kind, ()):  # the fields of this node type that hold nodes
                value = getattr(node, field_name, None)
                if type(value) is list:
                    stack.extend([child for child in value if child is not None])
                elif value is not None:
                    stack.append(value)

    def _bind_comprehension(self, node: ast.expr) -> list:
        """Bind a comprehension's variables as a `for` loop binds its own (`[p.read_text() for p in
        root.glob("*.md")]`: each `p` is a path), keeping what the names held outside for `_unbind`."""
        scope = self.scope
        saved = []
        for generator in node.generators:
            for name, value in self._loop_values(generator.target, generator.iter):
                saved.append((name, [(held, held.get(name, _MISSING))
                                     for held in (scope.bindings, scope.params, scope.types, scope.loops)]))
                self.bind(name, value)
        return saved

    def _unbind(self, saved: list) -> None:
        for name, held in reversed(saved):
            for mapping, value in held:
                if value is _MISSING:
                    mapping.pop(name, None)
                else:
                    mapping[name] = value

    def call(self, node: ast.Call, function: Function, how: int) -> None:
        if self.scope.params:
            self._note_parameters_run(node, function)
        ref = self.ref(node.func)
        if node.args and self.interest is not None and self.interest.enters_context(ref):
            self._enter(node.args[0], how == AWAIT)  # `await stack.enter_async_context(Consumer())`
        args = self._call_arguments(node, function, ref)
        if not args and (ref is None or (self.interest is not None and not self.interest.keeps(ref))):
            return  # `len(x)`, `json.dumps(d)`: nothing any rule or entry point asks about
        marks: list[str] = []
        literal = mode = None
        falsy = [str(index) for index, arg in enumerate(node.args) if _is_falsy_literal(arg)]
        falsy += [k.arg for k in node.keywords if k.arg is not None and _is_falsy_literal(k.value)]
        starred = any(type(a) is ast.Starred for a in node.args)
        for index, arg in enumerate(node.args):
            kind = type(arg)
            if kind is ast.Lambda:
                continue
            if index < 2 and kind is ast.Constant and isinstance(arg.value, str):
                if index == 0:
                    literal = arg.value[:200]
                else:
                    mode = arg.value[:20]
            elif index == 0 and kind is ast.JoinedStr and arg.values and type(arg.values[0]) is ast.Constant:
                literal = str(arg.values[0].value)[:200]  # f"/proc/{pid}/stat": its constant start
            _marks(arg.value if kind is ast.Starred else arg, marks)
        keywords = []
        for keyword in node.keywords:
            if keyword.arg is None:
                keywords.append("**")
                continue
            keywords.append(keyword.arg)
            value = keyword.value
            if type(value) is ast.Lambda:
                continue
            if keyword.arg in _MODE_KEYWORDS and type(value) is ast.Constant and isinstance(value.value, str):
                mode = value.value[:20]
            _marks(value, marks)
        if starred:
            keywords.append("*")
        if literal is None and not node.args and type(node.func) is ast.Attribute:
            receiver = node.func.value  # `Path("/proc/stat").read_text()`: the path the receiver was built from
            if type(receiver) is ast.Call and receiver.args and type(receiver.args[0]) is ast.Constant \
                    and isinstance(receiver.args[0].value, str):
                literal = receiver.args[0].value[:200]
        if args and args[0][0] == "0" and args[0][1].startswith(PARAMETER) and "." not in args[0][1] \
                and self.interest is not None and self.interest.runs_coroutine(ref):
            name = args[0][1][len(PARAMETER):]  # `loop.run_until_complete(coro)` with the parameter `coro`
            if name not in function.runs_coroutine:
                function.runs_coroutine.append(name)
        line, col, end_line, end_col = self.span(node)
        shipped = self._shipped(node.args[0] if node.args else None) or (
            type(node.func) is ast.Attribute and self._shipped(node.func.value))
        function.calls.append(Call(
            ref=ref or "?", kind=how, line=line, col=col, end_line=end_line, end_col=end_col,
            stmt_line=self.statement_line, text=_chain(node.func), keywords=tuple(keywords), marks=tuple(marks), args=tuple(args),
            literal=literal, mode=mode, lazy=self.lazy_depth > 0, memo=self.memo_depth > 0, shipped=shipped,
            guards=tuple(self.guards), falsy=tuple(falsy), positional=-1 if starred else len(node.args),
            iterated=id(node) in self.iterated, types=tuple(self._argument_types(node)),
        ))

    def _enter(self, manager: ast.expr, awaited: bool) -> None:
        """`with Store() as s:` runs `Store.__enter__` there and `__exit__` after the block (`async with`: the
        awaited `__aenter__` and `__aexit__`), as two calls of the statement's line."""
        value = self.value_ref(manager)
        if value is None or value.startswith("B:") or (self.interest is not None and not self.interest.keeps(value)):
            return
        line, col, end_line, end_col = self.span(manager)
        text = _chain(manager.func) + "()" if type(manager) is ast.Call else _chain(manager)
        for method in ENTER_EXIT[awaited]:
            self.executing().calls.append(Call(
                ref=f"{value}.{method}", kind=AWAIT if awaited else CALL, line=line, col=col, end_line=end_line,
                end_col=end_col, stmt_line=self.statement_line, text=f"{text}.{method}", positional=0,
                lazy=self.lazy_depth > 0, memo=self.memo_depth > 0, guards=tuple(self.guards)))

    def _note_parameters_run(self, node: ast.Call, function: Function) -> None:
        """`Function.runs`: a parameter called, or handed to a call other than a class's."""
        params = self.scope.params
        func = node.func
        found = [func.id] if type(func) is ast.Name and func.id in params else []
        name = func.id if type(func) is ast.Name else (func.attr if type(func) is ast.Attribute else "")
        if not name[:1].isupper():
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if type(arg) is ast.Starred:
                    arg = arg.value
                if type(arg) is ast.Name and arg.id in params:
                    found.append(arg.id)
        for parameter in found:
            if parameter not in function.runs:
                function.runs.append(parameter)

    def _call_arguments(self, node: ast.Call, function: Function, callee: str | None = None) -> list[tuple[str, str]]:
        """(position or keyword, reference) of the arguments that resolve (not to a builtin); a lambda passed
        becomes a function of its own, in the order written, its parameters what `callee` calls it with."""
        args: list[tuple[str, str]] = []
        for index, arg in enumerate(node.args):
            kind = type(arg)
            if kind is ast.Lambda:  # `box.submit(lambda t: detect(t))`: a function of its own, handed over
                args.append((str(index), "F:" + self.lambda_function(arg, function, callee, str(index))))
                continue
            starred = kind is ast.Starred
            if starred:  # gather(*(fetch(i) for i in ids)): the call each element makes
                arg = arg.value
                kind = type(arg)
            if starred and kind is ast.Name:  # `tasks = [fetch(i) for i in ids]; gather(*tasks)`: the same
                target = self.ref(arg)
                if target is not None and target.startswith(CONTAINER + "{") and target.endswith("}"):
                    args.extend((str(index), member) for member in target[len(CONTAINER) + 1:-1].split("|"))
                    continue
            if kind in (ast.GeneratorExp, ast.ListComp, ast.SetComp) and type(arg.elt) is ast.Call:
                target = self.ref(arg.elt)
                if target is not None and not target.startswith("B:"):
                    args.append((str(index), target))
            elif kind in (ast.Name, ast.Attribute, ast.Call):
                target = self.ref(arg) or (self._parameter(arg.id) if kind is ast.Name else None)  # passed on
                if target is not None and not target.startswith("B:"):
                    args.append((str(index), target))
            elif kind in (ast.Tuple, ast.List):  # engines.append(("google", search_google)): kept for later
                elements = list(arg.elts)
                elements += [e for element in arg.elts if type(element) in (ast.Tuple, ast.List) for e in element.elts]
                for element in elements:
                    if type(element) in (ast.Name, ast.Attribute):
                        target = self.ref(element)
                        if target is not None and not target.startswith("B:"):
                            args.append((f"{index}{IN_CONTAINER}", target))
        for keyword in node.keywords:
            if keyword.arg is None:
                continue
            value = keyword.value
            kind = type(value)
            if kind is ast.Lambda:
                args.append((keyword.arg, "F:" + self.lambda_function(value, function, callee, keyword.arg)))
            elif kind in (ast.Name, ast.Attribute, ast.Call):
                target = self.ref(value)
                if target is not None and not target.startswith("B:"):
                    args.append((keyword.arg, target))
            elif kind in (ast.List, ast.Tuple):  # on_startup=[init_db], middleware=[Tenants()]
                for element in value.elts:
                    if type(element) in (ast.Name, ast.Attribute, ast.Call):
                        target = self.ref(element)
                        if target is not None and not target.startswith("B:"):
                            args.append((keyword.arg, target))
        return args

    def lambda_function(self, node: ast.Lambda, enclosing: Function, callee: str | None = None,
                        where: str | None = None) -> str:
        """A lambda handed to a call, as a function of its own (key `outer.<lambda>`): its body's calls are
        its own, and a framework that registers it makes them serve. Its positional parameters hold what the
        callee's parameter `where` is annotated to be called with (`LAMBDA_ARGUMENT`)."""
        self.handed_lambdas.add(id(node))
        key = self._key("<lambda>")
        function = Function(key=key, name="<lambda>", line=node.lineno, parent=enclosing.key or None)
        self.functions.append(function)
        scope = _Scope("function", function=function)
        arguments = node.args
        known = callee is not None and where is not None and not any(c in callee for c in "{}|")
        for index, arg in enumerate([*arguments.posonlyargs, *arguments.args]):
            scope.bindings[arg.arg] = f"{LAMBDA_ARGUMENT}{{{callee}|{where}|{index}}}" if known else None
        for arg in arguments.kwonlyargs:
            scope.bindings[arg.arg] = None
        for star in (arguments.vararg, arguments.kwarg):
            if star is not None:
                scope.bindings[star.arg] = None
        self.scopes.append(scope)
        self.expressions([node.body])
        self.scopes.pop()
        return key

    def span(self, node: ast.expr) -> tuple[int, int, int, int]:
        line, end_line = node.lineno, node.end_lineno or node.lineno
        col, end_col = node.col_offset, node.end_col_offset or 0
        if self.lines is not None:  # ast counts UTF-8 bytes; findings count characters
            col = _characters(self.lines, line, col)
            end_col = _characters(self.lines, end_line, end_col)
        return line, col + 1, end_line, end_col + 1


# ----------------------------------------------------------------------------- helpers


_TYPING_REFS = ("I:typing.", "I:typing_extensions.", "I:collections.abc.")
_MODE_KEYWORDS = frozenset({"mode", "trigger", "transport"})
_FROM_CONSTRUCTOR = re.compile(r"\.from_[A-Za-z0-9_]*\(\)$")


def _from_constructor(ref: str) -> str:
    """`I:google.cloud.storage.Client.from_service_account_json()` -> `I:google.cloud.storage.Client()`: a `from_*`
    classmethod builds an instance of its class."""
    return _FROM_CONSTRUCTOR.sub("()", ref)


_INJECTIONS = frozenset({"Depends", "Security", "Provide"})  # fastapi.Depends / Security, litestar Provide


def _marks(node: ast.expr, out: list[str]) -> None:
    kind = type(node)
    if kind is ast.Attribute:
        if node.attr.isupper():
            out.append(node.attr)
    elif kind is ast.Name:
        if node.id.isupper():
            out.append(node.id)
    elif kind is ast.BinOp:
        _marks(node.left, out)
        _marks(node.right, out)


def _characters(lines: list[str], line: int, offset: int) -> int:
    if not 0 < line <= len(lines):
        return offset
    text = lines[line - 1]
    if text.isascii():
        return offset
    return len(text.encode("utf-8")[:offset].decode("utf-8", "replace"))


def _text(node: ast.expr) -> str:
    """`a.b.c` for a Name/Attribute chain (a call in the chain keeps its callee's name), else ''."""
    parts = []
    while True:
        kind = type(node)
        if kind is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        elif kind is ast.Call:
            node = node.func
        elif kind is ast.Name:
            parts.append(node.id)
            return ".".join(reversed(parts))
        else:
            return ".".join(reversed(parts))


def _chain(node: ast.expr) -> str:
    """`self.llm.chat.completions.create`; a call segment kept as `name()`; '' when not a chain of names."""
    parts: list[str] = []
    while True:
        kind = type(node)
        if kind is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        elif kind is ast.Call:
            inner = _chain(node.func)
            return f"{inner}()." + ".".join(reversed(parts)) if inner and parts else (f"{inner}()" if inner else "")
        elif kind is ast.Name:
            parts.append(node.id)
            return ".".join(reversed(parts))
        else:
            return ""


def _imported(ref: str | None) -> bool:
    """An absolute (`I:`) or relative (`R<n>:`) import's reference."""
    return ref is not None and (ref.startswith("I:") or (ref[:1] == "R" and ref[1:2].isdigit()))


def _without_docstring(body: list) -> list:
    if body and type(body[0]) is ast.Expr and type(body[0].value) is ast.Constant and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _no_body(body: list) -> bool:
    """`...`, `pass` or `raise NotImplementedError` (after a docstring): a method for subclasses to define."""
    body = _without_docstring(body)
    if len(body) != 1:
        return not body  # a docstring alone
    statement = body[0]
    if type(statement) is ast.Pass:
        return True
    if type(statement) is ast.Expr:
        return type(statement.value) is ast.Constant and statement.value.value is Ellipsis
    if type(statement) is ast.Raise and statement.exc is not None:
        raised = statement.exc.func if type(statement.exc) is ast.Call else statement.exc
        return type(raised) is ast.Name and raised.id == "NotImplementedError"
    return False


def _passes_through(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A default hook that gives back what it was given (`def pre_hook(self, context, params): return context`,
    after a docstring): it does nothing of its own, so what runs is a subclass's override."""
    body = _without_docstring(node.body)
    if len(body) != 1 or type(body[0]) is not ast.Return or type(body[0].value) is not ast.Name:
        return False
    parameters = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs][1:]
    return body[0].value.id in {parameter.arg for parameter in parameters}


# typing and builtin containers: their last type argument is the type of an element (a mapping's: a value)
_SEQUENCES = frozenset({"List", "list", "Sequence", "MutableSequence", "Iterable", "Iterator", "Collection",
                        "Set", "set", "FrozenSet", "frozenset", "AbstractSet", "MutableSet", "Deque", "deque"})
_MAPPINGS = frozenset({"Dict", "dict", "Mapping", "MutableMapping", "OrderedDict", "DefaultDict", "defaultdict"})


def _element_annotation(annotation: ast.Subscript) -> ast.expr | None:
    """The element type of a container annotation (`List[T]`, `Tuple[T, ...]`, `Dict[K, V]`: T, T, V)."""
    name = _text(annotation.value).rsplit(".", 1)[-1]
    arguments = annotation.slice.elts if type(annotation.slice) is ast.Tuple else [annotation.slice]
    if name in _SEQUENCES and len(arguments) == 1:
        return arguments[0]
    if name in _MAPPINGS and len(arguments) == 2:
        return arguments[1]
    if name in ("Tuple", "tuple") and len(arguments) == 2 and type(arguments[1]) is ast.Constant \
            and arguments[1].value is Ellipsis:
        return arguments[0]
    return None


def _row_annotation(annotation: ast.Subscript) -> list[ast.expr] | None:
    """The item types of a fixed-length tuple annotation (`tuple[Provider, str]`), else None."""
    if _text(annotation.value).rsplit(".", 1)[-1] not in ("Tuple", "tuple") or type(annotation.slice) is not ast.Tuple:
        return None
    items = annotation.slice.elts
    return None if any(type(item) is ast.Constant and item.value is Ellipsis for item in items) else list(items)


def _is_none(node: ast.expr) -> bool:
    return type(node) is ast.Constant and node.value is None


def _is_main_test(test: ast.expr) -> bool:
    """`__name__ == "__main__"` (either side)."""
    if type(test) is not ast.Compare or len(test.comparators) != 1 or type(test.ops[0]) is not ast.Eq:
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if type(s) is ast.Name and s.id == "__name__"]
    strings = [s for s in sides if type(s) is ast.Constant and s.value == "__main__"]
    return bool(names and strings)


def _self_calls(calls: list[Call]) -> set[str]:
    """The methods `self.name(...)` among `calls`."""
    return {call.ref[2:] for call in calls if call.ref.startswith("S:") and "." not in call.ref}


def _lazy_target(test: ast.expr) -> str | None:
    """The name a lazy-initialisation guard tests: `x is None`, `not x`, `key not in cache`, `not hasattr(self,
    "a")`, `cache.get(key) is None`."""
    kind = type(test)
    if kind is ast.UnaryOp and isinstance(test.op, ast.Not):
        operand = test.operand
        if type(operand) in _LAZY_TESTS:
            return _text_target(operand)
        if _mapping_get(operand):
            return _text(operand.func.value) + "[]"
        if type(operand) is ast.Call and _text(operand.func) == "hasattr" and len(operand.args) == 2:
            holder, name = operand.args
            if type(name) is ast.Constant and isinstance(name.value, str):
                return f"{_text(holder)}.{name.value}"
        return None
    if kind is ast.Compare and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Is, ast.Eq)) and _is_none(right) and type(test.left) in _LAZY_TESTS:
            return _text_target(test.left)
        if isinstance(op, (ast.Is, ast.Eq)) and _is_none(right) and _mapping_get(test.left):
            return _text(test.left.func.value) + "[]"
        if isinstance(op, ast.NotIn) and type(right) in _LAZY_TESTS:
            return _text_target(right) + "[]"
    if kind is ast.BoolOp and isinstance(test.op, ast.Or):
        for value in test.values:
            found = _lazy_target(value)
            if found is not None:
                return found
    return None


def _present_target(test: ast.expr) -> str | None:
    """What a return-if-cached guard tests: `x is not None`, `x`, `key in cache`, `cache.get(key) is not None`,
    or the first such part of an `and` (`client._jwks is not None and now - client._at < TTL`)."""
    kind = type(test)
    if kind in _LAZY_TESTS:
        return _text_target(test)
    if kind is ast.Compare and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.IsNot, ast.NotEq)) and _is_none(right):
            if type(test.left) in _LAZY_TESTS:
                return _text_target(test.left)
            if _mapping_get(test.left):
                return _text(test.left.func.value) + "[]"
        if isinstance(op, ast.In) and type(right) in _LAZY_TESTS:
            return _text_target(right) + "[]"
    if kind is ast.BoolOp and isinstance(test.op, ast.And):
        return _present_target(test.values[0])
    return None


def _mapping_get(node: ast.expr) -> bool:
    """`cache.get(key)`: the same test as `key not in cache` when the guarded body fills `cache[key]`."""
    return (type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "get"
            and len(node.args) == 1 and not node.keywords and type(node.func.value) in _LAZY_TESTS)


ONCE_TESTS = frozenset({"exists", "is_file", "is_dir", "isfile", "isdir", "find_spec", "find_module"})


def _once_guard(test: ast.expr) -> bool:
    """`if not os.path.exists(path):` / `if not path.exists():` / `if not importlib.util.find_spec(pkg):`: the
    body makes what the test looks for (a download, an install), so it runs once, not per call."""
    if type(test) is not ast.UnaryOp or not isinstance(test.op, ast.Not) or type(test.operand) is not ast.Call:
        return False
    return _text(test.operand.func).rsplit(".", 1)[-1] in ONCE_TESTS


def _import_error(kind: ast.expr | None) -> bool:
    return _catches(kind, "ImportError") or _catches(kind, "ModuleNotFoundError")


def _probes_running_loop(body: list) -> bool:
    """`loop = asyncio.get_running_loop()` (or the bare call) among the statements of a `try` body."""
    for statement in body:
        value = statement.value if type(statement) in (ast.Expr, ast.Assign) else None
        if type(value) is ast.Call and _text(value.func) in ("asyncio.get_running_loop", "get_running_loop"):
            return True
    return False


def _catches(names: ast.expr | None, exception: str) -> bool:
    """An `except` clause naming `exception` (alone or in a tuple)."""
    listed = names.elts if type(names) is ast.Tuple else [names] if names is not None else []
    return any(_text(name).rsplit(".", 1)[-1] == exception for name in listed)


def _functions(body: list) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function defined in `body`, at any depth (methods and nested functions too), by statements only."""
    stack = list(reversed(body))
    while stack:
        statement = stack.pop()
        if type(statement) in _DEFS:
            yield statement
        if type(statement) in _COMPOUND:
            for block in reversed(_blocks(statement)):
                stack.extend(reversed(block))


def _own_statements(body: list) -> Iterator[ast.stmt]:
    """The statements of a function body, in its nested blocks too, not in the functions or classes it defines."""
    stack = list(reversed(body))
    while stack:
        statement = stack.pop()
        yield statement
        if type(statement) in _COMPOUND and type(statement) not in _DEFS and type(statement) is not ast.ClassDef:
            for block in reversed(_blocks(statement)):
                stack.extend(reversed(block))


def _either(first: str | None, second: str | None) -> str | None:
    """What a name holds after two branches bound it to `first` and `second`: the one value, or either of a few
    ("E:{<member>|<member>}", as a container's element is one of its members); None when either is unknown."""
    if first == second:
        return first
    if first is None or second is None:
        return None
    members = sorted({*members_of(first), *members_of(second)})
    return _members_ref(EITHER, members) if len(members) <= MAX_EITHER else None


def _either_of(values: set[str]) -> str | None:
    """What holds one of a few known values (`E:{a|b}`); None for too many."""
    members = sorted({member for value in values for member in members_of(value)})
    return _members_ref(EITHER, members) if len(members) <= MAX_EITHER else None


def members_of(ref: str) -> list[str]:
    """`E:{a|b}` -> [a, b]: the values either branch bound; any other reference stands alone."""
    if ref.startswith(EITHER) and ref.endswith("}"):
        return ref[len(EITHER) + 1:-1].split("|")
    return [ref]


def _members_ref(prefix: str, members: list[str]) -> str | None:
    """`A:{a|b}` (a container's element) or `E:{a|b}` (either branch's value): one of the members; None where there
    are none or one is itself such a set."""
    if not members or any("{" in member or "}" in member or "|" in member for member in members):
        return None
    return prefix + "{" + "|".join(members) + "}"


def _text_target(node: ast.expr) -> str:
    if type(node) is ast.Subscript:
        return _text(node.value) + "[]"
    return _text(node)


def _assigns(body: list, target: str) -> bool:
    """Whether `body` (at any depth) assigns `target` (`x`, `self.x`, or a key of `cache` for `cache[]`)."""
    for node in body:
        for child in ast.walk(node):
            kind = type(child)
            if kind is ast.Assign:
                targets = child.targets
            elif kind is ast.AnnAssign or kind is ast.AugAssign:
                targets = [child.target]
            elif kind is ast.Call and _text(child.func).endswith("setdefault") and target.endswith("[]"):
                if _text(child.func).rsplit(".", 1)[0] + "[]" == target:
                    return True
                continue
            else:
                continue
            for t in targets:
                if _text_target(t) == target:
                    return True
    return False


def _stores(body: list, name: str) -> bool:
    """Whether `body` stores the local `name` in a container or an attribute (`cache[key] = name`,
    `self.client = name`, `cache.setdefault(key, name)`)."""
    for node in body:
        for child in ast.walk(node):
            kind = type(child)
            if kind is ast.Assign and type(child.value) is ast.Name and child.value.id == name:
                if any(type(t) in (ast.Subscript, ast.Attribute) for t in child.targets):
                    return True
            elif (kind is ast.Call and type(child.func) is ast.Attribute and child.func.attr == "setdefault"
                  and any(type(a) is ast.Name and a.id == name for a in child.args[1:])):
                return True
    return False


def _target_values(target: ast.expr, value: str | None) -> list[tuple[str, str | None]]:
    """(name, what it holds) for an assignment target: `a, b = f()` -> a holds `f()[0]`, b `f()[1]`."""
    kind = type(target)
    if kind is ast.Name:
        return [(target.id, value)]
    if kind is ast.Tuple or kind is ast.List:
        out = []
        for position, element in enumerate(target.elts):
            item = f"{value}[{position}]" if value is not None and value.endswith("()") else None
            out.extend(_target_values(element, item))
        return out
    return [(name, None) for name in _target_names(target)]


_STORING_METHODS = COLLECTING_METHODS | {"setdefault"}  # (a dict's `setdefault(key, value)` stores it too)


def _stored_names(targets: list) -> frozenset[str]:
    """The local names assignment targets store into: `x`, `a, b`, `result["answer"]` and `reply.text` store
    into `result` and `reply` (not `self`: what an attribute of the object holds outlives the call)."""
    names = set()
    stack = list(targets)
    while stack:
        target = stack.pop()
        kind = type(target)
        if kind is ast.Name:
            names.add(target.id)
        elif kind is ast.Tuple or kind is ast.List:
            stack.extend(target.elts)
        elif kind is ast.Starred or kind is ast.Attribute or kind is ast.Subscript:
            stack.append(target.value)
    names.discard("self")
    names.discard("cls")
    return frozenset(names)


def _mark_answers(function: Function, flows: list[tuple[frozenset[str] | None, list]], interest) -> None:
    """`Call.answers` for the calls of `function`: those in an expression it gives back (returns, yields, hands
    to a reply call), or in one stored in a name that such an expression reads, and so on (flow-insensitive:
    `content = reply.choices[0].message.content; return {"answer": content}` gives `reply` back). A name read
    only in the prompt of a generation call (`messages=[...draft...]`) is not given back: the model's new
    answer is."""
    if not flows or not function.calls:
        return
    prompts = interest.prompt_keywords if interest is not None else frozenset()
    given: list = []
    read: set[str] = set()
    pending = []
    for stored, nodes in flows:
        if stored is None:
            given.extend(nodes)
            read.update(_names_read(nodes, prompts))
        elif stored:
            pending.append((stored, nodes))
    if not given:
        return
    grew = True
    while grew and pending:
        grew = False
        rest = []
        for stored, nodes in pending:
            if stored & read:
                given.extend(nodes)
                read.update(_names_read(nodes, prompts))
                grew = True
            else:
                rest.append((stored, nodes))
        pending = rest
    spans = [(node.lineno, node.end_lineno or node.lineno) for node in given]
    for call in function.calls:
        line = call.line
        for first, last in spans:
            if first <= line <= last:
                call.answers = True
                break


def _shown_names(nodes: list, knowledge) -> set[str]:
    """The names whose text a log line shows: passed as they are, formatted in (`f"{text}"`, `"%s" % text`,
    `"x: " + text`, `"{}".format(text)`, `str(text)`: sdk-logging.yaml's preserving functions and methods), not
    reduced to an excerpt (`text[:50]`, `{text:.50}`) or to something else (`len(text)`, `text.count("\n")`)."""
    names = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            names.add(node.id)
        elif kind is ast.JoinedStr:
            stack.extend(part for part in node.values if type(part) is ast.FormattedValue
                         and not _cuts_by_spec(part.format_spec, knowledge))
        elif kind is ast.FormattedValue:
            stack.append(node.value)
        elif kind is ast.BinOp and type(node.op) is ast.Mod:  # `"%.50s: %s" % (title, text)`
            values = node.right.elts if type(node.right) is ast.Tuple else [node.right]
            stack.extend(_shown_arguments(node.left, values, knowledge))
        elif kind is ast.BinOp and type(node.op) is ast.Add:
            stack.extend((node.left, node.right))
        elif kind in (ast.Tuple, ast.List):
            stack.extend(node.elts)
        elif kind is ast.Call:
            func = node.func
            if type(func) is ast.Name and func.id in knowledge.preserving_functions:
                stack.extend(node.args)
            elif type(func) is ast.Attribute and (func.attr in knowledge.preserving_methods
                                                  or _text(func) in knowledge.preserving_functions):
                stack.extend(node.args)
                stack.append(func.value)
        elif kind is ast.Subscript and type(node.slice) is ast.Slice and not _cuts_by_slice(node.slice, knowledge):
            stack.append(node.value)
    return names


def _cuts_by_spec(spec: ast.expr | None, knowledge) -> bool:
    """`{text:.50}`: a literal format spec that cuts the text to an excerpt (LoggingKnowledge.spec_cuts)."""
    return type(spec) is ast.JoinedStr and len(spec.values) == 1 and type(spec.values[0]) is ast.Constant \
        and knowledge.spec_cuts(str(spec.values[0].value))


def _cuts_by_slice(part: ast.Slice, knowledge) -> bool:
    """`text[:50]`, `text[-40:]` (LoggingKnowledge.slice_cuts)."""
    return part.step is None and knowledge.slice_cuts(_literal_int(part.lower), _literal_int(part.upper))


def _literal_int(node: ast.expr | None) -> int | None:
    if type(node) is ast.Constant and type(node.value) is int:
        return node.value
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is ast.Constant \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _shown_arguments(template: ast.expr, arguments: list, knowledge) -> list:
    """The arguments of a `%` template that it shows whole: not those its conversion cuts to an excerpt
    (`%.50s`: printf_excerpts); all of them where the template is no literal."""
    if type(template) is not ast.Constant or type(template.value) is not str:
        return arguments
    cut = printf_excerpts(template.value, knowledge.excerpt_max_chars)
    return arguments if cut is None else [argument for i, argument in enumerate(arguments) if i not in cut]


def _names_read(nodes: list, prompts: frozenset[str]) -> set[str]:
    """The names `nodes` read, but for the arguments of a call given a prompt keyword."""
    names = set()
    stack = list(nodes)
    fields_of, name_node, constant, call = NODE_FIELDS, ast.Name, ast.Constant, ast.Call
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is name_node:
            names.add(node.id)
        elif kind is constant:
            continue
        elif kind is call and prompts and any(k.arg in prompts for k in node.keywords):
            stack.append(node.func)
        else:
            for field_name in fields_of.get(kind, ()):
                value = getattr(node, field_name, None)
                if type(value) is list:
                    stack.extend([child for child in value if child is not None])
                elif value is not None:
                    stack.append(value)
    return names


def _target_names(target: ast.expr) -> list[str]:
    kind = type(target)
    if kind is ast.Name:
        return [target.id]
    if kind is ast.Tuple or kind is ast.List:
        return [name for element in target.elts for name in _target_names(element)]
    if kind is ast.Starred:
        return _target_names(target.value)
    return []


def _blocks(statement: ast.stmt) -> list[list]:
    blocks = [getattr(statement, name, None) or [] for name in ("body", "orelse", "finalbody")]
    blocks.extend(handler.body for handler in getattr(statement, "handlers", ()) or ())
    return blocks


def _import_refs(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(local name, reference) for each name an import binds."""
    if type(node) is ast.Import:
        out = []
        for alias in node.names:
            if alias.asname:
                out.append((alias.asname, "I:" + alias.name))
            else:
                root = alias.name.split(".", 1)[0]
                out.append((root, "I:" + root))
        return out
    names = [alias for alias in node.names if alias.name != "*"]
    if node.level:
        prefix = f"R{node.level}:" + (f"{node.module}." if node.module else "")
    elif node.module:
        prefix = f"I:{node.module}."
    else:
        return []
    return [(alias.asname or alias.name, prefix + alias.name) for alias in names]


def _suppressions(source: str) -> tuple[dict[int, list[str]], list[str]]:
    from llmdoctor.scan.suppressions import file_ignores, parse_suppressions

    found = parse_suppressions(source)
    lines: dict[int, set[str]] = {}
    for table in (found.on_line, found.above):
        for line, codes in table.items():
            lines.setdefault(line, set()).update(codes)
    return ({line: sorted(codes) for line, codes in lines.items()},
            sorted(file_ignores(source)) if "llmdoctor:" in source else [])


TYPE_GUARD = "isinstance:"  # a guard on a parameter's type: "isinstance:<parameter>:<position>:<T>|<T>"
_LITERAL_TYPES = {ast.List: ("list",), ast.ListComp: ("list",), ast.Dict: ("dict",), ast.DictComp: ("dict",),
                  ast.Tuple: ("tuple",), ast.Set: ("set",), ast.SetComp: ("set",)}
_MAX_TYPE_DEPTH = 16  # how deep an expression is followed for its type
_STR_BUILTINS = frozenset({"str", "repr", "format", "chr", "hex", "oct", "ascii"})
_STR_METHODS = frozenset({"format", "join", "strip", "lstrip", "rstrip", "lower", "upper", "replace", "title",
                          "capitalize", "removeprefix", "removesuffix", "format_map", "casefold"})
_TYPING_BUILTINS = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "FrozenSet": "frozenset",
                    "Text": "str", "NoneType": "None"}
_OPAQUE_TYPES = frozenset({"Any", "object", "Self", "AnyStr", "TypeVar"})


def _type_names(node: ast.expr) -> tuple[str, ...] | None:
    """The classes `isinstance` is given: `Path`, `pathlib.Path`, `(str, bytes)`; None for anything else."""
    elements = node.elts if type(node) is ast.Tuple else [node]
    names = []
    for element in elements:
        if type(element) not in (ast.Name, ast.Attribute):
            return None
        names.append(_text(element).rsplit(".", 1)[-1])
    return tuple(names) or None


def _unquoted(node: ast.expr | None) -> ast.expr | None:
    """The expression a string annotation holds (`"LocalPigeonAgent"`, `"Agent | None"`), else `node`."""
    if type(node) is ast.Constant and type(node.value) is str and len(node.value) <= _MAX_QUOTED_ANNOTATION:
        try:
            return ast.parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return node


def _annotation_types(node: ast.expr | None, depth: int = 0) -> tuple[str, ...] | None:
    """The classes an annotation allows (`str`, `Optional[str]` -> str, None; `Union[str, Path]`, `str | None`);
    None where it says too little (`Any`, a type variable, `Sequence[str]`, a string annotation)."""
    if node is None:
        return None
    kind = type(node)
    if kind is ast.Constant:
        return ("None",) if node.value is None else None
    if kind in (ast.Name, ast.Attribute):
        name = _text(node).rsplit(".", 1)[-1]
        if name in _OPAQUE_TYPES or len(name) == 1:
            return None
        return (_TYPING_BUILTINS.get(name, name),)
    if depth > _MAX_TYPE_DEPTH:
        return None
    if kind is ast.BinOp and type(node.op) is ast.BitOr:
        parts = [node.left, node.right]
    elif kind is ast.Subscript:
        head = _text(node.value).rsplit(".", 1)[-1]
        elements = list(node.slice.elts) if type(node.slice) is ast.Tuple else [node.slice]
        if head == "Optional":
            parts = [elements[0], ast.Constant(None)]
        elif head == "Union":
            parts = elements
        elif head == "Annotated":
            parts = elements[:1]
        elif head in _TYPING_BUILTINS or head in ("list", "dict", "tuple", "set", "frozenset"):
            return (_TYPING_BUILTINS.get(head, head),)
        else:
            return None
    else:
        return None
    found: dict[str, None] = {}
    for part in parts:
        types = _annotation_types(part, depth + 1)
        if types is None:
            return None
        found.update(dict.fromkeys(types))
    return tuple(found)


def _conjunction(test: ast.expr) -> bool:
    return type(test) is ast.BoolOp and type(test.op) is ast.And


def _is_falsy_literal(node: ast.expr) -> bool:
    return type(node) is ast.Constant and node.value in (False, None, 0, "") and type(node.value) is not float


def _switches(arguments: ast.arguments, bound: bool) -> dict[str, list[int]]:
    """Parameters with a literal bool / None / 0 / "" default: name -> [position (after self/cls; -1
    keyword-only), 1 when the default is on (`True`)]."""
    positional = [*arguments.posonlyargs, *arguments.args]
    first = len(positional) - len(arguments.defaults)  # the first parameter with a default
    shift = 1 if bound else 0
    candidates = [(arg, default, first + index - shift)
                  for index, (arg, default) in enumerate(zip(positional[first:], arguments.defaults))]
    candidates += [(arg, default, -1) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults)]
    out: dict[str, list[int]] = {}
    for arg, default, position in candidates:
        if type(default) is ast.Constant and (default.value is True or _is_falsy_literal(default)):
            out[arg.arg] = [position, int(default.value is True)]
    return out
