"""LLM003: an HTTP connection pool or LLM SDK client built on every call (knowledge: rules/sdk-http.yaml,
the SDK tables' `pooled: true` clients, rules/sdk-lifetime.yaml; see docs/sdk-knowledge.md).

Two shapes, inside a function:
- a pooled SDK constructor (`OpenAI()`, `Anthropic()`, ...) or an HTTP library client (`httpx.Client()`,
  `requests.Session()`) that is not stored for reuse;
- a module-level request function (`requests.get`, `httpx.post`, `aiohttp.request`).

Whether the function runs per request is the project model's answer (its execution context, the YAML's
`contexts:`): on a serving path, in any module, it is reported with the chain from the entry point; in
unknown code only where the calls visibly repeat (a loop that neither sleeps nor retries: the `repeats` flag);
never inside a polling loop (one that sleeps between requests; a retry loop sleeping after its request backs
off after a failure, and is not one).
The rule decides the local part, by value flow when the function is left: an object stored somewhere that
outlives the call (an attribute or subscript, a global, a storing method such as `registry.add(c)`, a
closure) is a reused client, not a per-call one; one that is returned makes the function a factory, which is
per call exactly when the factory runs per call (its own context says). Functions fetching credentials
(`*token*`, `*auth*`) are usually called by code that keeps the token: reported only where a request reaches
them (the model then sees whether the caller keeps it); a token refresh runs once per token lifetime and is
not reported.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import libcst as cst

from llmdoctor.scan.functionfacts import holds
from llmdoctor.scan.project.link import ONLY_IN
from llmdoctor.scan.project.model import SERVING, WORKER_CONTEXT
from llmdoctor.scan.rule import Rule, frame_of
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
    loops: tuple[int, ...]  # id() of the loops around the call
    function: str  # the project model's key of the function holding the call
    waited: bool = False  # its innermost loop slept before it (`sleep(interval)`, then the request: polling)


@dataclass
class _Frame:
    scope: Scope
    candidates: list[_Candidate] = field(default_factory=list)
    sources: dict[str, set[str]] = field(default_factory=dict)  # local name -> what flowed into it
    stored: set[str] = field(default_factory=set)  # "n:<name>" / "c:<id(call)>" kept beyond the call
    returned: set[str] = field(default_factory=set)  # ... handed to the caller (returned, yielded)
    used: set[str] = field(default_factory=set)  # names read or bound in it or in the defs nested in it


@dataclass(frozen=True)
class Lifetime:
    """`rules/sdk-lifetime.yaml`: what stores an object for reuse, what a client is built around."""

    storing_methods: frozenset[str]
    rare_function_globs: tuple[str, ...]
    refresh_function_globs: tuple[str, ...]
    any_host_function_globs: tuple[str, ...]
    pool_kwargs: frozenset[str]
    transport_kwargs: frozenset[str]
    sleep_calls: frozenset[str]
    retry_names: tuple[str, ...]

    def rarely_called(self, scope: Scope) -> bool:
        return _named(scope, self.rare_function_globs)

    def refreshes(self, scope: Scope) -> bool:
        return _named(scope, self.refresh_function_globs)

    def fetches_any_host(self, scope: Scope) -> bool:
        return _named(scope, self.any_host_function_globs)


def _named(scope: Scope, globs: tuple[str, ...]) -> bool:
    name = scope.name.lower()
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in globs)


def lifetime(catalog) -> Lifetime:
    found = catalog.memo.get("lifetime")
    if found is None:
        data = (catalog.knowledge.get("sdk-lifetime") or {}).get("lifetime") or {}
        found = catalog.memo["lifetime"] = Lifetime(
            storing_methods=frozenset(data.get("storing_methods") or ()),
            rare_function_globs=tuple(data.get("rare_function_globs") or ()),
            refresh_function_globs=tuple(data.get("refresh_function_globs") or ()),
            any_host_function_globs=tuple(data.get("any_host_function_globs") or ()),
            pool_kwargs=frozenset(data.get("pool_kwargs") or ()),
            transport_kwargs=frozenset(data.get("transport_kwargs") or ()),
            sleep_calls=frozenset(data.get("sleep_calls") or ()),
            retry_names=tuple(data.get("retry_loop_names") or ()),
        )
    return found


class ClientPerCall(Rule):
    code = "LLM003"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._knowledge: ClientKnowledge = client_knowledge(self.catalog)
        self._lifetime = lifetime(self.catalog)
        self._frames: list[_Frame] = []
        self._open: list[int] = []  # candidate calls being visited (a nested one is reported with its outer one)
        self._loops: list[int] = []  # id() of the loops and comprehensions being visited
        self._polling: set[int] = set()  # loops that sleep
        self._retrying: set[int] = set()  # loops that end once a call succeeds
        self._branches: list[int] = []  # per loop being visited: the `if` bodies around the visit inside it
        self._loop_nodes: list[cst.CSTNode] = []  # keeps the ids above unique
        self._pending: list[tuple[_Candidate, Scope, bool]] = []  # (candidate, its function, returned)
        self._module_frame: _Frame | None = None

    def visit_For(self, node: cst.For) -> None:
        self._loops.append(id(node))
        self._branches.append(0)
        self._loop_nodes.append(node)
        if _retries(node, self._lifetime.retry_names):
            self._retrying.add(id(node))

    def leave_For(self, node: cst.For) -> None:
        self._loops.pop()
        self._branches.pop()

    def visit_If(self, node: cst.If) -> None:
        if self._branches:
            self._branches[-1] += 1

    def leave_If(self, node: cst.If) -> None:
        if self._branches:
            self._branches[-1] -= 1

    visit_While = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_For
    leave_While = leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = leave_For

    def visit_Module(self, node: cst.Module) -> None:
        # module-level code runs once per import, except where the model says it serves (a Streamlit script
        # runs again on every interaction): its candidates are decided like any function's
        self._module_frame = _Frame(self.context.scope)

    def leave_Module(self, node: cst.Module) -> None:
        self._finish(self._module_frame)
        for candidate, scope, returned in self._pending:  # (a loop's polling is known once it is left)
            self._report(candidate, scope, returned)

    # -------------------------------------------------------------- function frames

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append(_Frame(self.context.scope))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._leave_frame()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        frame = _Frame(self.context.scope)
        self._frames.append(frame)
        frame.returned |= self._flows(node.body)  # a lambda returns its body

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._leave_frame()

    def _leave_frame(self) -> None:
        frame = self._frames.pop()
        self._finish(frame)
        if self._frames:
            # a name a nested def/lambda uses without binding it is captured: the closure may outlive the
            # outer call (a name it binds itself, `async with httpx.AsyncClient() as client`, is its own)
            scope = frame.scope
            free = frame.used - (scope.bindings.keys() - scope.global_names)
            outer = self._frames[-1]
            outer.stored.update(f"n:{name}" for name in free)
            outer.used |= free

    def visit_Name(self, node: cst.Name) -> None:
        if self._frames:  # (and a module-level object a function uses is shared by its calls)
            self._frames[-1].used.add(node.value)
            self._module_frame.stored.add(f"n:{node.value}")

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
                    frame.stored |= flows
                else:
                    frame.sources.setdefault(target.value, set()).update(flows)
            elif isinstance(target, (cst.Tuple, cst.List)):
                self._assign([element.value for element in target.elements], value)
            elif isinstance(target, cst.StarredElement):
                self._assign([target.value], value)
            else:  # self.x = ..., app.state.x = ..., cache[key] = ...
                frame.stored |= flows

    def visit_Return(self, node: cst.Return) -> None:
        if self._frames and node.value is not None:
            self._frames[-1].returned |= self._flows(node.value)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self._frames and node.value is not None:
            value = node.value.item if isinstance(node.value, cst.From) else node.value
            self._frames[-1].returned |= self._flows(value)

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
                frame.stored |= self._flows(arg.value)
        if frame is not None and callee == "builtins.setattr":
            for arg in node.args:
                frame.stored |= self._flows(arg.value)
        if callee is None:
            return
        if callee in self._lifetime.sleep_calls:
            if self._loops and self._loops[-1] in self._retrying and self._branches[-1]:
                self._polling.update(self._loops[:-1])  # `if attempt: sleep(backoff)`: a wait between attempts
            else:
                self._polling.update(self._loops)
            return
        constructor = False
        if callee not in self._knowledge.module_functions:
            receiver = self._knowledge.receivers.get(callee)
            if receiver is None or not receiver.pooled or receiver.is_module:
                return
            constructor = True
            transports = self._lifetime.transport_kwargs
            around = transports if callee in self._knowledge.request_methods else \
                self._lifetime.pool_kwargs | transports
            # OpenAI(http_client=shared), httpx.Client(transport=kept): a pool built elsewhere;
            # QdrantClient(path="index"): an embedded store, no server and no pool
            if any(arg.keyword is not None and not _may_be_none(arg.value) and (
                    arg.keyword.value in receiver.local_kwargs or (
                        arg.keyword.value in around
                        and not self._builds_pool(arg.value, any_call=arg.keyword.value in transports)))
                   for arg in node.args):
                return
        self._open.append(id(node))
        if len(self._open) > 1:
            return  # OpenAI(http_client=httpx.Client()): one finding, on the outer call
        executing = self._frame_executing(node)
        if executing is not None:
            http = not constructor or callee in self._knowledge.request_methods
            executing.candidates.append(_Candidate(node, self.context.statement, callee, constructor, http,
                                                   tuple(self._loops), self.context.function_key,
                                                   bool(self._loops) and self._loops[-1] in self._polling))

    def _builds_pool(self, expr: cst.CSTNode, any_call: bool = False) -> bool:
        """`expr` contains a call of a pooled constructor (`http_client=httpx.Client()` is a fresh pool); with
        `any_call`, any call (a transport made there, `transport=httpx.HTTPTransport(retries=3)`, is one too)."""
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call):
                if any_call:
                    return True
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

    def _frame_executing(self, node: cst.Call) -> _Frame | None:
        function = self.context.executing_function(node)
        if function is None:
            return self._module_frame if self.context.function is None else None
        return frame_of(self._frames, function)

    def _finish(self, frame: _Frame) -> None:
        lifetime = self._lifetime
        if not frame.candidates or lifetime.refreshes(frame.scope) or lifetime.fetches_any_host(frame.scope):
            return
        stored = _closure(frame.stored, frame.sources)
        returned = _closure(frame.returned, frame.sources)
        for candidate in frame.candidates:
            key = f"c:{id(candidate.call)}"
            if candidate.constructor and key in stored:
                continue  # kept for reuse: built once per object, cache entry or registry
            self._pending.append((candidate, frame.scope, candidate.constructor and key in returned))

    def _report(self, candidate: _Candidate, scope: Scope, returned: bool) -> None:
        where = {"lambda": "a lambda", "module": "the module's top-level code", "class": "a class body"}.get(
            scope.kind, f"`{scope.name}`")
        shown = dotted_name(candidate.call.func) or candidate.callee
        if candidate.loops and candidate.loops[-1] in self._polling and (
                candidate.waited or candidate.loops[-1] not in self._retrying):
            # a polling loop: the sleep between requests dwarfs a pool's setup, wherever it runs; a retry loop that
            # sleeps after its request (a backoff, once the attempt failed) built the pool per call like any other
            return
        repeats = bool(candidate.loops) and not (self._polling | self._retrying).intersection(candidate.loops)
        if not candidate.constructor:
            library = self._knowledge.module_functions[candidate.callee]
            cost = f": {library.function_cost}" if library.function_cost else ""
            shared = library.shared_client or "client"
            self.report(
                candidate.call,
                f"`{shown}()` builds and tears down a connection pool on every call of {where}{cost}",
                statement=candidate.statement, function=candidate.function,
                fix=f"send it through one shared {shared} created at module level or at app startup",
                call=candidate.callee, repeats=repeats, _per_call=True, **self._where(scope),
            )
            return
        receiver = self._knowledge.receivers[candidate.callee]
        cost = f". Cost: {receiver.build_cost}" if receiver.build_cost else ""
        fix = ("build it once per process (module level, or at app startup / in the lifespan) and reuse it "
               "in every call")
        if receiver.per_tenant:
            fix += f"; for per-tenant API keys derive from the shared client: `{receiver.per_tenant}`"
        if returned:
            message = (f"`{shown}()` builds a new client ({receiver.holds}) each time {where} runs, and hands "
                       f"it to the caller: every call pays the setup and opens new connections{cost}")
            if any(decorator.rsplit(".", 1)[-1] == "property" for decorator in scope.decorators):
                fix += f" (or keep the first one: `@functools.cached_property` in place of `@property` on {where})"
            else:
                fix += f" (or cache the factory: `@functools.cache` on {where})"
        else:
            message = (f"`{shown}()` builds a new client ({receiver.holds}) on every call of {where} and "
                       f"drops it: each call pays the setup and opens new connections (no keep-alive){cost}")
        self.report(candidate.call, message, statement=candidate.statement, function=candidate.function,
                    fix=fix, call=candidate.callee, repeats=repeats, _per_call=True, **self._where(scope))

    def _where(self, scope: Scope) -> dict:
        """A function named like a credential fetcher (`*token*`, `*auth*`) is usually called once per token
        lifetime by callers that keep the token: reported only where a request reaches it, where the project
        model sees whether its caller keeps the result (an OAuth callback exchanging a code on every login)."""
        return {ONLY_IN: [SERVING, WORKER_CONTEXT]} if self._lifetime.rarely_called(scope) else {}


def _retries(loop: cst.CSTNode, retry_names: tuple[str, ...]) -> bool:
    """A retry loop (`for _ in range(n):`, `for attempt, delay in enumerate(backoff_delays):` or `while ...:`
    that returns or breaks once the call succeeds) repeats only on failure: it is no evidence that the calls
    repeat."""
    if isinstance(loop, cst.For):
        ranged = isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "range"
        names = _names_in((loop.target, loop.iter))
        if not ranged and not any(fnmatch.fnmatchcase(name.lower(), glob) for name in names for glob in retry_names):
            return False
    elif not isinstance(loop, cst.While):
        return False
    return holds(loop.body, (cst.Return, cst.Break))


def _names_in(nodes) -> list[str]:
    """The names a loop's target and iterable spell: `attempt`, `delay`, `enumerate`, `backoff_delays`."""
    names, stack = [], list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            names.append(node.value)
        elif isinstance(node, cst.Attribute):
            names.append(node.attr.value)
            stack.append(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            stack.extend(element.value for element in node.elements)
        elif isinstance(node, cst.Call):
            stack.extend(arg.value for arg in node.args)
    return names


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


def _may_be_none(value: cst.BaseExpression) -> bool:
    """`None`, or a conditional with a `None` branch (`http_client=c.http_client if c.has_pool else None`):
    no pool is handed over, or not always, so the client builds its own."""
    if isinstance(value, cst.IfExp):
        return _may_be_none(value.body) or _may_be_none(value.orelse)
    return isinstance(value, cst.Name) and value.value == "None"
