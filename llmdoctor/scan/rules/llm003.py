"""LLM003: an HTTP connection pool or LLM SDK client built on every call (knowledge: rules/sdk-http.yaml,
the SDK tables' `pooled: true` clients, rules/sdk-lifetime.yaml; see docs/sdk-knowledge.md).

Two shapes, both only inside a function that runs per call:
- a pooled SDK constructor (`OpenAI()`, `Anthropic()`, ...) whose object does not escape;
- a module-level request function (`requests.get`, `httpx.post`, `aiohttp.request`) or an HTTP library client
  (`httpx.Client()`, `requests.Session()`) that does not escape, where calls visibly repeat: a module importing
  a server/worker framework, an `async def` outside command-line modules, or a loop that does not sleep.

Escape is decided when the function is left, by value flow: a name bound to the object (or to something
built from it) that is returned, yielded, stored on an attribute or subscript, bound to a global, passed to a
storing method (`registry.add(c)`), or captured by a nested def/lambda makes the object outlive the call.
Functions that run once (`__init__`, `main`, lifespan and startup hooks, cached functions, fixtures, tests)
are not per call. Modules that import a test framework are test code and are not checked.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import libcst as cst

from llmdoctor.scan.rule import Rule, frame_of, root_names
from llmdoctor.scan.rules.sdk_knowledge import ClientKnowledge, client_knowledge
from llmdoctor.scan.semantic import Scope, dotted_name

NON_CARRYING_BUILTINS = frozenset({"builtins.len", "builtins.str", "builtins.repr", "builtins.isinstance",
                                   "builtins.print", "builtins.bool", "builtins.id", "builtins.type",
                                   "builtins.hash", "builtins.format", "builtins.int", "builtins.float"})


@dataclass
class _Candidate:
    call: cst.Call
    statement: cst.CSTNode | None
    callee: str
    constructor: bool  # False: a module-level request function
    http: bool  # an HTTP library's function or client (not an SDK client)
    repeated: bool  # inside an async def or a module of a server framework
    loops: tuple[int, ...]  # id() of the loops around the call


@dataclass
class _Frame:
    scope: Scope
    candidates: list[_Candidate] = field(default_factory=list)
    sources: dict[str, set[str]] = field(default_factory=dict)  # local name -> what flowed into it
    escaped: set[str] = field(default_factory=set)  # "n:<name>" / "c:<id(call)>" whose value flows out


@dataclass(frozen=True)
class Lifetime:
    """`rules/sdk-lifetime.yaml` merged with the shared tables of `rules/common.yaml`."""

    once_functions: tuple[str, ...]
    decorators: tuple[str, ...]
    startup_keywords: frozenset[str]
    startup_registrations: tuple[str, ...]
    storing_methods: frozenset[str]
    test_modules: frozenset[str]
    server_modules: frozenset[str]
    cli_modules: frozenset[str]
    rare_function_globs: tuple[str, ...]
    pool_kwargs: frozenset[str]
    sleep_calls: frozenset[str]

    def rarely_called(self, scope: Scope) -> bool:
        name = scope.name.lower()
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.rare_function_globs)

    def runs_once(self, scope: Scope) -> bool:
        if scope.kind != "function":
            return False
        if any(fnmatch.fnmatchcase(scope.name, pattern) for pattern in self.once_functions):
            return True
        return any(_decorator_matches(name, pattern) for name in scope.decorators for pattern in self.decorators)


def _decorator_matches(name: str, pattern: str) -> bool:
    if "." not in pattern:  # a bare name matches the last component: `on_event` ~ `app.on_event`
        return fnmatch.fnmatchcase(name.rsplit(".", 1)[-1], pattern)
    return fnmatch.fnmatchcase(name, pattern)


def lifetime(catalog) -> Lifetime:
    found = catalog.memo.get("lifetime")
    if found is None:
        data = (catalog.knowledge.get("sdk-lifetime") or {}).get("lifetime") or {}
        found = catalog.memo["lifetime"] = Lifetime(
            once_functions=(*catalog.table("run_once_functions").names(), *(data.get("once_functions") or ())),
            decorators=(*catalog.table("cache_decorators").names(), *catalog.table("startup_decorators").names(),
                        *(data.get("cache_decorators") or ()), *(data.get("startup_decorators") or ())),
            startup_keywords=frozenset(data.get("startup_keywords") or ()),
            startup_registrations=tuple(data.get("startup_registrations") or ()),
            storing_methods=frozenset(data.get("storing_methods") or ()),
            test_modules=frozenset(data.get("test_modules") or ()),
            server_modules=frozenset(data.get("server_modules") or ()),
            cli_modules=frozenset(data.get("cli_modules") or ()),
            rare_function_globs=tuple(data.get("rare_function_globs") or ()),
            pool_kwargs=frozenset(data.get("pool_kwargs") or ()),
            sleep_calls=frozenset(data.get("sleep_calls") or ()),
        )
    return found


def is_test_module(module: cst.Module, test_modules: frozenset[str]) -> bool:
    """The module imports a test framework (pytest, unittest, ...): test code."""
    return imports_any(module, test_modules)


def imports_any(module: cst.Module, modules: frozenset[str]) -> bool:
    """A module-level import (not under `if TYPE_CHECKING:`) names one of `modules` or a submodule of one."""
    for name in _runtime_imports(module.body):
        parts = name.split(".")
        if any(".".join(parts[:end]) in modules for end in range(1, len(parts) + 1)):
            return True
    return False


def _runtime_imports(body) -> list[str]:
    names: list[str] = []
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import):
                    names.extend(dotted_name(alias.name) or "" for alias in small.names)
                elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                    module = dotted_name(small.module) or ""
                    names.append(module)
                    if not isinstance(small.names, cst.ImportStar):
                        names.extend(f"{module}.{alias.name.value}" for alias in small.names
                                     if isinstance(alias.name, cst.Name))
        elif isinstance(statement, cst.If):
            if (dotted_name(statement.test) or "").endswith("TYPE_CHECKING"):
                continue
            names.extend(_runtime_imports(statement.body.body))
            if statement.orelse is not None and isinstance(statement.orelse.body, cst.IndentedBlock):
                names.extend(_runtime_imports(statement.orelse.body.body))
        elif isinstance(statement, (cst.Try, cst.TryStar)):
            names.extend(_runtime_imports(statement.body.body))
            for handler in statement.handlers:
                names.extend(_runtime_imports(handler.body.body))
    return names


class ClientPerCall(Rule):
    code = "LLM003"
    follows_calls = True  # a module-level function called only from module level or run-once ones runs once

    @classmethod
    def any_literals(cls, spec, catalog) -> frozenset[str]:
        return frozenset(root_names(cls.prefilter_names(spec, catalog)))

    @classmethod
    def prefilter_names(cls, spec, catalog) -> list[str]:
        knowledge = client_knowledge(catalog)
        pooled = [name for name, r in knowledge.receivers.items() if r.pooled and not r.is_module]
        return [*pooled, *knowledge.module_functions]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._knowledge: ClientKnowledge = client_knowledge(self.catalog)
        self._lifetime = lifetime(self.catalog)
        self._frames: list[_Frame] = []
        self._open: list[int] = []  # candidate calls being visited (a nested one is reported with its outer one)
        self._pending: list[tuple[_Candidate, Scope]] = []
        self._startup_names: set[str] = set()
        self._skip_module = False
        self._server_module = False
        self._cli_module = False
        self._loops: list[int] = []  # id() of the loops and comprehensions being visited
        self._polling: set[int] = set()  # loops that sleep
        self._loop_nodes: list[cst.CSTNode] = []  # keeps the ids above unique
        self._once: set[int] = set()  # id(scope) of functions that run once
        self._alive: list[Scope] = []  # every function scope seen: keeps the ids above unique
        self._module_defs: dict[str, int] = {}  # module-level def name -> id(scope)
        self._callers: dict[str, set[int | None]] = {}  # module-level def name -> callers (None: module level)

    # -------------------------------------------------------------- module

    def visit_Module(self, node: cst.Module) -> None:
        self._skip_module = is_test_module(node, self._lifetime.test_modules)
        self._server_module = imports_any(node, self._lifetime.server_modules)
        self._cli_module = not self._server_module and imports_any(node, self._lifetime.cli_modules)

    def visit_For(self, node: cst.For) -> None:
        self._loops.append(id(node))
        self._loop_nodes.append(node)

    def leave_For(self, node: cst.For) -> None:
        self._loops.pop()

    visit_While = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_For
    leave_While = leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = leave_For

    def leave_Module(self, node: cst.Module) -> None:
        once = self._once | {sid for name, sid in self._module_defs.items() if name in self._startup_names}
        changed = True
        while changed:  # a function called only from module level or from run-once functions runs once
            changed = False
            for name, sid in self._module_defs.items():
                callers = self._callers.get(name)
                if sid not in once and callers and all(c is None or c in once for c in callers):
                    once.add(sid)
                    changed = True
        for candidate, scope in self._pending:
            if id(scope) not in once:
                self._report(candidate, scope)

    # -------------------------------------------------------------- function frames

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self.context.scope
        self._alive.append(scope)
        self._frames.append(_Frame(scope))
        if len(self.context.scopes) == 2:
            self._module_defs[scope.name] = id(scope)
        if self._lifetime.runs_once(scope):
            self._once.add(id(scope))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._finish(self._frames.pop())

    def visit_Lambda(self, node: cst.Lambda) -> None:
        frame = _Frame(self.context.scope)
        self._alive.append(frame.scope)
        self._frames.append(frame)
        frame.escaped |= self._flows(node.body)  # a lambda returns its body

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._finish(self._frames.pop())

    def visit_Name(self, node: cst.Name) -> None:
        # a name used inside a nested def/lambda is captured: the closure may outlive the outer call
        for frame in self._frames[:-1]:
            frame.escaped.add(f"n:{node.value}")

    # -------------------------------------------------------------- value flow

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assign([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign([node.target], node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._assign([node.target], node.value)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._assign([node.target], node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._assign([node.asname.name], node.item)

    def _assign(self, targets, value: cst.BaseExpression) -> None:
        if not self._frames:
            return
        frame = self._frames[-1]
        flows = self._flows(value)
        if not flows:
            return
        for target in targets:
            if isinstance(target, cst.Name):
                if target.value in frame.scope.global_names:
                    frame.escaped |= flows
                else:
                    frame.sources.setdefault(target.value, set()).update(flows)
            elif isinstance(target, (cst.Tuple, cst.List)):
                self._assign([element.value for element in target.elements], value)
            elif isinstance(target, cst.StarredElement):
                self._assign([target.value], value)
            else:  # self.x = ..., app.state.x = ..., cache[key] = ...
                frame.escaped |= flows

    def visit_Return(self, node: cst.Return) -> None:
        if self._frames and node.value is not None:
            self._frames[-1].escaped |= self._flows(node.value)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self._frames and node.value is not None:
            value = node.value.item if isinstance(node.value, cst.From) else node.value
            self._frames[-1].escaped |= self._flows(value)

    def _flows(self, expr: cst.CSTNode) -> set[str]:
        """Names and calls whose VALUE flows out through `expr` (not those only used to compute it)."""
        out: set[str] = set()
        stack = [expr]
        while stack:
            expr = stack.pop()
            if isinstance(expr, cst.Name):
                out.add(f"n:{expr.value}")
            elif isinstance(expr, cst.Call):
                out.add(f"c:{id(expr)}")
                callee = self.context.callee_name(expr) or ""
                if callee in NON_CARRYING_BUILTINS:
                    continue
                stack.extend(arg.value for arg in expr.args)  # Agent(client), dict(http=client)
                func = expr.func
                if isinstance(func, cst.Attribute) and func.attr.value in self._knowledge.sdk.transparent:
                    stack.append(func.value)  # client.with_options(...) shares the client's pool
            elif isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
                stack.extend(element.value for element in expr.elements)
            elif isinstance(expr, cst.Dict):
                stack.extend(e.value for e in expr.elements)
            elif isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
                stack.append(expr.elt)
            elif isinstance(expr, cst.DictComp):
                stack.append(expr.value)
            elif isinstance(expr, cst.IfExp):
                stack.extend((expr.body, expr.orelse))
            elif isinstance(expr, cst.BooleanOperation):
                stack.extend((expr.left, expr.right))
            elif isinstance(expr, (cst.Await, cst.StarredElement)):
                stack.append(expr.expression if isinstance(expr, cst.Await) else expr.value)
            elif isinstance(expr, cst.NamedExpr):
                stack.extend((expr.target, expr.value))
            elif isinstance(expr, (cst.Attribute, cst.Subscript)):
                stack.append(expr.value)  # client.chat, clients[0]: the object's state flows out
        return out

    # -------------------------------------------------------------- candidates

    def visit_Call(self, node: cst.Call) -> None:
        callee = self.context.callee_name(node)
        frame = self._frames[-1] if self._frames else None
        if (frame is not None and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in self._lifetime.storing_methods):
            for arg in node.args:  # registry.add(client), client_var.set(client)
                frame.escaped |= self._flows(arg.value)
        if frame is not None and callee == "builtins.setattr":
            for arg in node.args:
                frame.escaped |= self._flows(arg.value)
        self._note_startup_hooks(node)
        if isinstance(node.func, cst.Name) and node.func.value in self._module_defs:
            function = self.context.executing_function(node)
            self._callers.setdefault(node.func.value, set()).add(None if function is None else id(function))
        if callee is None or self._skip_module:
            return
        if callee in self._lifetime.sleep_calls:
            self._polling.update(self._loops)
            return
        constructor = False
        if callee not in self._knowledge.module_functions:
            receiver = self._knowledge.receivers.get(callee)
            if receiver is None or not receiver.pooled or receiver.is_module:
                return
            constructor = True
            if callee not in self._knowledge.request_methods and any(
                    arg.keyword is not None and arg.keyword.value in self._lifetime.pool_kwargs
                    and not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
                    and not self._builds_pool(arg.value) for arg in node.args):
                return  # OpenAI(http_client=shared): the SDK client wraps a pool built elsewhere
        self._open.append(id(node))
        if len(self._open) > 1:
            return  # OpenAI(http_client=httpx.Client()): one finding, on the outer call
        executing = self._frame_executing(node)
        if executing is not None:
            http = not constructor or callee in self._knowledge.request_methods
            repeated = self._server_module or (not self._cli_module and any(
                s.is_async for s in self.context.scopes if s.is_function))
            executing.candidates.append(_Candidate(node, self.context.statement, callee, constructor, http,
                                                   repeated, tuple(self._loops)))

    def _builds_pool(self, expr: cst.CSTNode) -> bool:
        """`expr` contains a call of a pooled constructor (`http_client=httpx.Client()` is a fresh pool)."""
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call):
                receiver = self._knowledge.receivers.get(self.context.callee_name(node) or "")
                if receiver is not None and receiver.pooled and not receiver.is_module:
                    return True
            if isinstance(node, (cst.Lambda, cst.FunctionDef)):
                continue
            stack.extend(node.children)
        return False

    def leave_Call(self, node: cst.Call) -> None:
        if self._open and self._open[-1] == id(node):
            self._open.pop()

    def _note_startup_hooks(self, node: cst.Call) -> None:
        hooks: list[cst.BaseExpression] = []
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in self._lifetime.startup_keywords:
                hooks.append(arg.value)
        name = dotted_name(node.func) or ""
        if any(name == pattern or name.endswith("." + pattern) for pattern in self._lifetime.startup_registrations):
            hooks.extend(arg.value for arg in node.args)
        for hook in hooks:
            elements = [e.value for e in hook.elements] if isinstance(hook, (cst.List, cst.Tuple)) else [hook]
            for element in elements:
                hook_name = dotted_name(element)
                if hook_name:
                    self._startup_names.add(hook_name.rsplit(".", 1)[-1])

    def _frame_executing(self, node: cst.Call) -> _Frame | None:
        return frame_of(self._frames, self.context.executing_function(node))

    def _finish(self, frame: _Frame) -> None:
        if not frame.candidates or id(frame.scope) in self._once or self._lifetime.rarely_called(frame.scope):
            return
        escaped = _closure(frame.escaped, frame.sources)
        for candidate in frame.candidates:
            if candidate.constructor and f"c:{id(candidate.call)}" in escaped:
                continue
            in_loop = bool(candidate.loops) and not self._polling.intersection(candidate.loops)
            if candidate.http and not (candidate.repeated or in_loop):
                continue  # a one-off request helper: whether it runs per request is unknown
            self._pending.append((candidate, frame.scope))

    def _report(self, candidate: _Candidate, scope: Scope) -> None:
        where = "a lambda" if scope.kind == "lambda" else f"`{scope.name}`"
        shown = dotted_name(candidate.call.func) or candidate.callee
        if not candidate.constructor:
            library = self._knowledge.module_functions[candidate.callee]
            cost = f": {library.function_cost}" if library.function_cost else ""
            shared = library.shared_client or "client"
            self.report(
                candidate.call,
                f"`{shown}()` builds and tears down a connection pool on every call of {where}{cost}",
                statement=candidate.statement,
                fix=f"send it through one shared {shared} created at module level or at app startup",
                call=candidate.callee,
            )
            return
        receiver = self._knowledge.receivers[candidate.callee]
        cost = f". Cost: {receiver.build_cost}" if receiver.build_cost else ""
        fix = ("build it once per process (module level, or at app startup / in the lifespan) and reuse it "
               "in every call")
        if receiver.per_tenant:
            fix += f"; for per-tenant API keys derive from the shared client: `{receiver.per_tenant}`"
        self.report(
            candidate.call,
            f"`{shown}()` builds a new client (its own connection pool) on every call of {where} and drops it: "
            f"each call pays the setup and opens new connections (no keep-alive){cost}",
            statement=candidate.statement, fix=fix, call=candidate.callee,
        )


def _closure(escaped: set[str], sources: dict[str, set[str]]) -> set[str]:
    """Everything whose value reaches an escaping name or expression."""
    seen = set(escaped)
    work = list(escaped)
    while work:
        key = work.pop()
        if key.startswith("n:"):
            for source in sources.get(key[2:], ()):
                if source not in seen:
                    seen.add(source)
                    work.append(source)
    return seen
