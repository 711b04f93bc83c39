"""The project model: every module's index linked into one program, as pyright or ruff's semantic model give
other checks their types and scopes.

It answers, for any function of the project:
- what each of its calls reaches (`resolve`): a project function or class, or a library name (`httpx.Client.get`);
- its execution context (`context_of`): **serving** (reached from a request entry point, with the entry and the
  chain of calls), **worker** (reached from a queued job only), **run-once** (from a `__main__` block, an
  `asyncio.run` target, a CLI command, a startup hook, module level), **offline** (a test module, a module
  shadowed by a package of the same name, an example nobody serves), or **unknown** (library code nobody in the project calls);
- whether it blocks (`blocking_chain`): a sync function that calls a blocking library function, directly or
  through further sync project functions, not under a lazy-initialisation guard, not cached, not under a
  switch the caller leaves off.

Knowledge comes from the catalog: entry points (rules/entrypoints.yaml), blocking calls (rules/llm004.yaml),
sync SDK generation calls (rules/sdk-*.yaml), threads that take a callable (rules/common.yaml).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from llmdoctor.scan.project.index import (
    ASSIGNED,
    AWAIT,
    CALL,
    CONTAINER,
    EITHER,
    ENTER_EXIT,
    IN_CONTAINER,
    LAMBDA,
    LAMBDA_ARGUMENT,
    MODULE_KEY,
    PARAMETER,
    ROWS,
    TYPE_GUARD,
    Call,
    ClassInfo,
    Function,
    ModuleIndex,
    members_of,
)
from llmdoctor.scan.project.knowledge import (
    INTERACTIVE,
    ROUTE_METHODS,
    WORKER,
    EntryKnowledge,
    Patterns,
    Registration,
)
from llmdoctor.scan.project.layout import Layout, console_scripts
from llmdoctor.scan.suppressions import silenced_by

SERVING = "serving"
WORKER_CONTEXT = "worker"
RUN_ONCE = "run-once"
OFFLINE = "offline"
QUEUE_FRAMEWORK = "queue"  # the framework of a queue consumer's entry point (entrypoints.yaml `handoffs`)
UNKNOWN = "unknown"
CONTROL_PLANE = "control-plane"  # reached only from entry points the user declared control plane (config)
SCHEDULED = "scheduled"  # run by a scheduler at intervals (entrypoints.yaml `scheduled`): periodic, not per request
CONTEXTS = (SERVING, WORKER_CONTEXT, CONTROL_PLANE, SCHEDULED, RUN_ONCE, OFFLINE, UNKNOWN)

# edge kinds (how the caller reaches the callee)
E_CALL, E_AWAIT, E_LAMBDA, E_REF, E_OFFLOAD, E_DEF, E_HANDED, E_RUN = range(8)
# E_RUN: a coroutine run there and then on an event loop of its own (`asyncio.run(main())`)
# E_HANDED: a function handed to a library call that may keep it for later (a callback of an unknown
# framework): it runs when that library decides, so it does not inherit its caller's run-once context
_EDGE_OF_CALL = {CALL: E_CALL, AWAIT: E_AWAIT, LAMBDA: E_LAMBDA}
# the edges along which a callee's value comes back to its caller: not a nested def's definition, nor a function
# handed to a library call (`sorted(drafts, key=score)`: its value orders, a callback's goes to the library)
_VALUE_EDGES = frozenset({E_CALL, E_AWAIT, E_LAMBDA, E_REF, E_OFFLOAD, E_RUN})
MAX_RESOLVE_DEPTH = 12
_PROTOCOL_BASES = frozenset({"typing.Protocol", "typing_extensions.Protocol"})
MAX_SUBCLASSES = 64  # the subclasses of one class an abstract method's call may reach
_TOKENS: dict[str, list[str]] = {}  # a reference's parts, parsed once per process
LAMBDA_KEY = "<lambda>"
_ENTER_EXIT = tuple(f".{method}" for methods in ENTER_EXIT.values() for method in methods)
_MISSING = object()
CALLED = "()"


@dataclass
class Node:
    """One function of the project (or a module's top-level code, key "")."""

    id: int
    path: str
    function: Function
    module: ModuleIndex
    edges: list[tuple[int, int, Call | None]] = field(default_factory=list)  # (callee, edge kind, call site)
    cached: bool = False  # decorated with a cache decorator: its body does not run per call

    @property
    def key(self) -> str:
        return self.function.key

    @property
    def label(self) -> str:
        """`Controller.status`, `outer.inner`; `<module>` for module-level code."""
        return self.function.key.split("#", 1)[0] if self.function.key else "<module>"


@dataclass(frozen=True)
class Entry:
    node: int
    framework: str
    kind: str  # interactive | worker
    route: str = ""  # "POST /chat" when a decorator names it


@dataclass(frozen=True)
class LoggingHelper:
    """A function of the program that logs one of its parameters (LLM005's candidates handed to it)."""

    path: str
    line: int
    function: str
    parameter: str
    level: int


@dataclass(frozen=True)
class Step:
    """One hop of a chain: in `function` (defined in `path`), the call (or finding) on `line`."""

    path: str
    line: int
    function: str

    def to_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "function": self.function}


@dataclass(frozen=True)
class Context:
    kind: str
    entry: Entry | None = None
    chain: tuple[tuple[int, Call | None], ...] = ()  # (node, call site leading on), from the entry on
    concurrent: bool = False  # run-once code on an event loop that runs other tasks too
    api: bool = False  # unknown code reached from a method named like a model API operation (`chat_completion`)
    streams: bool = False  # serving code on a request path whose channel carries tokens as they come

    def has(self, flag: str) -> bool:
        """A flag a rule's `contexts:` verdict may name (`"if repeats or api"`) that the context decides."""
        return (flag == "concurrent" and self.concurrent) or (flag == "api" and self.api) or (
            flag == "streams" and self.streams)


@dataclass(frozen=True)
class Target:
    """What a reference denotes: a project function/class/instance, a project module, or a library name."""

    kind: str  # "function" | "class" | "instance" | "module" | "library" | "any" | "items" | "pick" | "row"
    node: int = -1  # function
    klass: tuple[str, str] | None = None  # (path, class key) for class / instance
    path: str = ""  # module
    name: str = ""  # library: the qualified name
    members: tuple[Target, ...] = ()  # any: one of these; items: a container literal of these; pick: its .get;
    # row: a tuple's items, by position


_PENDING = Target("pending")  # a resolution under way
_UNKNOWN = Target("unknown")  # a tuple's item of no known type
_BRACED = (LAMBDA_ARGUMENT, ROWS, CONTAINER, EITHER)  # the references that list their parts in braces


def _periodic_trigger(call: Call, trigger: tuple[int, str, frozenset[str]] | None) -> bool:
    """Whether a scheduler call registers a job that repeats: it passes a trigger (at its position or keyword)
    other than a run-once literal (`"date"`); a trigger built elsewhere (`CronTrigger(...)`) repeats."""
    if trigger is None:
        return True
    position, keyword, once = trigger
    given, value = call.argument(position, keyword)
    return given and value not in once


def _inside(inner: Call | None, outer: Call) -> bool:
    """`inner` is written within `outer`'s parentheses (an argument's own call)."""
    return inner is not None and (outer.line, outer.col) <= (inner.line, inner.col) and \
        (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


@dataclass(frozen=True)
class Blocking:
    """A blocking library call made by a function."""

    call: Call
    callee: str  # qualified
    fix: str | None
    sdk: object | None = None  # the SDK Method for a sync generation call
    serving_only: bool = False  # blocks only where requests are served (`input()`: a console program's own)
    autofix: str | None = "to_thread"  # the automatic fix of a direct call (the table's `autofix`; None: none)
    file_io: bool = False  # opens a file
    writes: bool = False  # ... to write it (`write_text`, `open(path, "a")`, `path.open("w")`)


class ProjectModel:
    def __init__(self, layout: Layout, modules: dict[str, ModuleIndex], catalog, knowledge: EntryKnowledge,
                 console_scripts: bool = True, display=None, replay=None,
                 control_plane: Callable[[str, str], bool] | None = None) -> None:
        """`replay` (incremental.LinkReplay): what linking produced for the modules whose links cannot have
        changed since the last run, taken as it was instead of resolved again (a warm pre-commit run).
        `control_plane(path, function)`: whether an entry point is declared control plane (config)."""
        from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge

        self.layout = layout
        self.display = display  # a path as the reports show it (relative to the working directory)
        self.modules = modules
        # the program calls a model: a module imports an LLM SDK or framework, or names a model API's HTTP path
        self.calls_a_model = any(module.calls_model for module in modules.values())
        self.knowledge = knowledge
        self.sdk = sdk_knowledge(catalog)
        self.blocking_table = catalog.table("blocking_calls")
        self.offload_table = catalog.table("offload_calls")
        self.setup_functions = catalog.table("setup_functions")
        self.cache_decorators = catalog.table("cache_decorators")
        self.streaming_table = catalog.table("streaming_responses")
        self.library_results = catalog.table("library_results")
        self.peer_codes = {code: spec.peer_codes for code, spec in catalog.rules.items() if spec.peer_codes}
        self.nodes: list[Node] = []
        self.by_key: dict[tuple[str, str], int] = {}
        self.classes: dict[tuple[str, str], ClassInfo] = {}
        self.test_modules: set[str] = set()
        self.by_path: dict[str, list[int]] = {}
        self._resolved: dict[tuple, Target | None] = {}
        self.cuts = 0  # resolutions that met themselves (a cycle): their value depends on where it was entered
        # a parameter's reference ("P:x") is what the function's callers pass: known once every module is linked,
        # and then it depends on other modules' calls, which a replayed link (incremental.py) must not store
        self._linked = False
        self.parameter_uses = 0  # resolutions that read a parameter's callers (or would have, before the link)
        self._through_parameters: set[tuple] = set()  # the cached resolutions among them
        self.direct_through_parameters: set[int] = set()  # functions whose own blocking call needed a parameter
        self._replay = replay
        self._log: list | None = None  # the link effects of the module being linked (what `replay` takes back)
        self.link_logs: dict[str, tuple[list, list]] = {}  # path -> (effects of its functions, of its classes)
        self._direct: dict[int, Call | None] = {}  # the blocking call each sync function makes itself
        self._classified: dict[str, Blocking | None] = {}
        for path in sorted(modules):
            module = modules[path]
            for function in module.functions:
                node = Node(len(self.nodes), path, function, module)
                self.nodes.append(node)
                self.by_key.setdefault((path, function.key), node.id)
                self.by_path.setdefault(path, []).append(node.id)
            for klass in module.classes:
                self.classes[(path, klass.key)] = klass
            if self._is_test_module(path, module):
                self.test_modules.add(path)
        # the names of the project's properties: reading one runs its getter (`getters_read`)
        self._accessor_names = {f.name for module in modules.values() for f in module.functions if f.accessor}
        self.entries: dict[int, Entry] = {}
        self.once: set[int] = set()
        self._examples: dict[str, bool] = {}  # path -> under an example folder (_is_example)
        self._example_path = _any_of(knowledge.example_paths).fullmatch
        self.spawned: set[int] = set()  # coroutines handed to create_task, gather...: they run beside others
        self.hooks: set[int] = set()  # a server's start-up hooks: run once, on the loop that serves requests
        self.scheduled: set[int] = set()  # periodic jobs handed to a scheduler
        self.registered: dict[tuple[str, str], tuple[Target, ...]] = {}  # (empty while it is worked out)
        self.registered = self._registries()
        self.subclasses: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (empty while it is worked out)
        self.subclasses = self._subclass_map()
        # callee -> (caller, edge kind, call site), once every module is linked (`_caller_map`)
        self._callers: dict[int, list[tuple[int, int, Call | None]]] | None = None
        self._link(console_scripts)
        self.once |= {node.id for node in self.nodes if node.cached}
        self._declared = self._declared_entries(control_plane)
        self._after: dict[int, int] = {}  # queue consumers (entry points): only their calls after this line serve
        if self._serve_queues():
            self._declared = self._declared_entries(control_plane)
        # a health probe's route runs once per probe period, as a scheduled job does, for no one's request
        probes = {n for n, entry in self.entries.items() if self.knowledge.probe(entry.route)}
        self._declared |= probes
        self._serving, self._serving_parent = self._reach([n for n in self.entries if n not in probes],
                                                          through_cached=False, entries=True)
        self._data_plane, self._data_plane_parent = self._serving, self._serving_parent
        if self._declared:
            self._data_plane, self._data_plane_parent = self._reach(
                [n for n in self.entries if n not in self._declared], through_cached=False, entries=True)
        # an example's `__main__` runs the library once for a demo; the library's callers are not told by it
        self._once, self._once_parent = self._reach(
            sorted(n for n in self.once if not self._is_example(self.nodes[n].path)), skip=E_HANDED)
        self._periodic, self._periodic_parent = self._reach(sorted(self.scheduled | probes), skip=E_HANDED)
        self._concurrent = self._running_beside_other_work()
        self._beside_requests: set[int] | None = None  # (_running_beside_requests)
        self._api: tuple[set[int], dict[int, tuple[int, Call | None]]] | None = None  # (_library_api)
        self._private_loop: set[int] | None = None  # code that runs only on an event loop of its own
        self._one_client: set[int] | None = None  # code only the handlers of a server on stdio reach
        self._blocks: dict[int, tuple[Call, int | None, Blocking | None]] | None = None
        self._guards: dict[int, tuple[str, ...]] = {}
        self._streaming: tuple[set[int], dict] | None = None  # (_streaming_paths)

    # ------------------------------------------------------------------ questions

    def nodes_of(self, path: str) -> list[Node]:
        return [self.nodes[i] for i in self.by_path.get(path, ())]

    def node(self, path: str, key: str) -> Node | None:
        found = self.by_key.get((path, key))
        if found is None and "#" in key:
            found = self.by_key.get((path, key.split("#", 1)[0]))
        return None if found is None else self.nodes[found]

    def context_of(self, path: str, key: str, streams: bool = False, at: tuple[int, int] | None = None) -> Context:
        """`streams`: also decide the `streams` flag (a rule's policy names it), with its chain; for the call at
        `at` (line, column), only where that call's value is given back on the way to the reader."""
        if key == LAMBDA_KEY:  # a module-level lambda runs whenever someone calls it: who, the model cannot tell
            return Context(OFFLINE if path in self.test_modules or self._is_example(path) else UNKNOWN)
        node = self.node(path, key)
        if node is None:
            node = self.node(path, MODULE_KEY)
            if node is None:
                return Context(UNKNOWN)
        return self.context(node.id, streams, at)

    def context(self, node_id: int, streams: bool = False, at: tuple[int, int] | None = None) -> Context:
        node = self.nodes[node_id]
        if node.path in self.test_modules or self.layout.shadowed(node.path):
            return Context(OFFLINE)
        if node.cached:  # functools.cache & co.: the body runs once per distinct arguments
            return Context(RUN_ONCE)
        before_get = at is not None and at[0] <= self._after.get(node_id, 0)  # a queue consumer's own set-up
        if node_id in self._data_plane and not before_get:
            chain = self._chain(node_id, self._data_plane_parent)
            entry = self.entries[chain[0][0]]
            if not self._interactive(node_id):
                return Context(WORKER_CONTEXT, entry, tuple(chain))
            if not streams:
                return Context(SERVING, entry, tuple(chain))
            if self._streaming is None:
                self._streaming = self._streaming_paths()
            if node_id in self._streaming[0] and (at is None or self._answers_at(node, *at)):
                # the chain from an entry point whose channel streams, each call on it giving its value back
                chain = self._chain(node_id, self._streaming[1])
                return Context(SERVING, self.entries[chain[0][0]], tuple(chain), streams=True)
            return Context(SERVING, entry, tuple(chain))
        if node_id in self._serving and not before_get:  # reached only from entry points declared control plane
            chain = self._chain(node_id, self._serving_parent)
            return Context(CONTROL_PLANE, self.entries[chain[0][0]], tuple(chain))
        if node_id in self._periodic:  # a job or a health probe's route, what it calls (also run at start-up)
            chain = self._chain(node_id, self._periodic_parent)
            return Context(SCHEDULED, self.entries.get(chain[0][0]) if chain else None, tuple(chain))
        if self._is_test_function(node):
            return Context(OFFLINE)
        if node_id in self._once:
            if self._beside_requests is None:
                self._beside_requests = self._running_beside_requests()
            return Context(RUN_ONCE, None, tuple(self._chain(node_id, self._once_parent)),
                           concurrent=node_id in self._beside_requests)
        if self._is_example(node.path):
            return Context(OFFLINE)
        if self._api is None:
            self._api = self._library_api()
        api, parent = self._api
        if node_id in api:
            return Context(UNKNOWN, None, tuple(self._chain(node_id, parent)), api=True)
        return Context(UNKNOWN)

    @staticmethod
    def _answers_at(node: Node, line: int, column: int) -> bool:
        """Whether the call at `line`:`column` gives its value back (`Call.answers`); true where the index kept
        no call there."""
        found = _calls_at(node, line, column)
        return not found or any(call.answers for call in found)

    def on_private_loop(self, node_id: int) -> bool:
        """Code that runs only on an event loop of its own (a sync handler's or a worker thread's
        `asyncio.run(step())`), beside nothing else: no task spawned or gathered there. A call that blocks
        stalls only that loop, whose caller waits for it anyway."""
        if node_id in self._concurrent:
            return False
        if self._private_loop is None:
            self._private_loop = self._private_loop_nodes()
        return node_id in self._private_loop

    def serves_one_client(self, node_id: int) -> bool:
        """Code that only the entry points of a server started on stdio reach (entrypoints.yaml `one_client`:
        an MCP server spawned by its one client), not what tasks spawned beside them run. A call that blocks
        there stalls only that client's own other calls."""
        if self._one_client is None:
            self._one_client = self._one_client_nodes()
        return node_id in self._one_client

    def _one_client_nodes(self) -> set[int]:
        servers = {server.framework for server in self.knowledge.one_client}
        if not any(entry.framework in servers for entry in self.entries.values()):
            return set()
        frameworks = self._started_on_stdio_only()
        alone = sorted(n for n, entry in self.entries.items() if entry.framework in frameworks)
        if not alone:
            return set()
        others = sorted(n for n, entry in self.entries.items() if entry.framework not in frameworks)
        shared = self._reach(others, through_cached=False, entries=True)[0] | self._concurrent
        return self._reach(alone, through_cached=False, entries=True)[0] - shared

    def _started_on_stdio_only(self) -> set[str]:
        """The frameworks whose servers the project starts, each time, on stdio."""
        servers = self.knowledge.one_client
        last = set().union(*(server.last_names() for server in servers))
        started: dict[str, set[str]] = {}
        for node in self.nodes:
            for call in node.function.calls:
                if call.text.rsplit(".", 1)[-1] not in last:
                    continue
                qualified = self.qualified(node.id, call.ref)
                if qualified is None:
                    continue
                for server in servers:
                    how = server.started(call, qualified)
                    if how is not None:
                        started.setdefault(server.framework, set()).add(how)
        return {framework for framework, how in started.items() if how == {"stdio"}}

    def _private_loop_nodes(self) -> set[int]:
        """What the targets of `asyncio.run` & co. reach, less what also runs on a shared loop: reached
        without such an edge from an entry point, a run-once entry, or code nobody in the project calls (a
        library's API, awaited by its users on their loops). A coroutine only ever run that way is such API
        too, unless a request path runs it or its name is private (`_step`). One a function defines and runs so
        (`async def poll(): ...`, then `asyncio.run(poll())`) is no one else's way in: its definition is not
        followed, and what it calls is run there."""
        runs: set[int] = set()
        called: set[int] = set()
        run_here: set[tuple[int, int]] = set()  # (caller, callee) of each run
        for node in self.nodes:
            for callee, kind, _ in node.edges:
                if kind == E_RUN:
                    runs.add(callee)
                    run_here.add((node.id, callee))
        # `async def poll(): ...` then `asyncio.run(poll())`: no one outside its function can call it, and what it
        # calls is run there as the run's target would be
        defined_to_run = {(node.id, callee) for node in self.nodes for callee, kind, _ in node.edges
                          if kind == E_DEF and (node.id, callee) in run_here}
        nested_runs = {callee for _, callee in defined_to_run}
        for node in self.nodes:
            for callee, kind, _ in node.edges:
                if kind == E_RUN or (node.id, callee) in defined_to_run:
                    continue
                (runs if node.id in nested_runs else called).add(callee)
        if not runs:
            return set()
        roots = [node.id for node in self.nodes if node.id not in called and node.id not in nested_runs and not (
            node.id in runs and (node.id in self._serving or node.function.name.startswith("_")))]
        shared = self._reach(sorted({*self.entries, *self.once, *roots}), skip=E_RUN, through_cached=False,
                             entries=True, skip_edges=defined_to_run)[0]
        return self._reach(sorted(runs), through_cached=False)[0] - shared

    def steps(self, chain, last_line: int | None = None) -> list[Step]:
        """A chain as steps: each function with the line of the call leading on (the last: `last_line`)."""
        out = []
        for index, (node_id, call) in enumerate(chain):
            node = self.nodes[node_id]
            if index == len(chain) - 1:
                line = last_line if last_line is not None else node.function.line
            elif call is not None:
                line = call.line
            else:  # no call leads on: the next function is defined here (a factory's closure)
                line = self.nodes[chain[index + 1][0]].function.line
            out.append(Step(node.path, line, node.label))
        return out

    def resolve(self, node_id: int, ref: str | None) -> Target | None:
        if not ref or ref == "?":
            return None
        # imports, module names and builtins mean the same in every function of a module; `self.x` in every
        # method of a class
        node = self.nodes[node_id]
        if ref[0] in "IMRBF":
            key = (node.path, ref)
        elif ref[0] == "P":  # a parameter: what this function's callers pass
            if not self._linked:
                self.parameter_uses += 1
                return None
            key = (node.path, node.function.key, ref)
        else:
            key = (node.path, node.function.owner or node.function.parent or node.function.key, ref)
        found = self._resolved.get(key, _MISSING)
        if found is not _MISSING:
            if found is _PENDING:  # a cycle resolves to nothing
                self.cuts += 1
                return None
            if key in self._through_parameters:
                self.parameter_uses += 1
            return found
        self._resolved[key] = _PENDING
        uses = self.parameter_uses
        found = self._resolve(self.nodes[node_id], ref, 0)
        if self.parameter_uses != uses:
            if not self._linked:  # resolved again once every module is linked
                del self._resolved[key]
                return found
            self._through_parameters.add(key)
        self._resolved[key] = found
        return found

    def qualified(self, node_id: int, ref: str | None) -> str | None:
        target = self.resolve(node_id, ref)
        return target.name if target is not None and target.kind == "library" else None

    def blocking_call(self, node_id: int, call: Call) -> Blocking | None:
        """The library call `call` makes, when it blocks (not a lazy one-time initialisation)."""
        if call.kind != CALL or call.lazy:
            return None
        target = self.resolve(node_id, call.ref)
        if target is not None and target.kind == "any" and all(m.kind == "library" for m in target.members):
            # a client one of two branches built (`Anthropic()` or `AnthropicVertex()`): blocks if each one does
            found = [self._classify(member.name, call) for member in target.members]
            return found[0] if all(found) else None
        if target is None or target.kind != "library" or target.name.endswith(_ENTER_EXIT):
            return None  # (a library's context manager: the call that built it says what blocks)
        return self._classify(target.name, call)

    def blocking_chain(self, node_id: int) -> list[tuple[int, Call, Blocking]] | None:
        """For a sync function that blocks: the calls from it to the blocking library call (node, call site,
        the blocking call at the end), the shortest such chain; else None."""
        blocks = self._blocking()
        if node_id not in blocks:
            return None
        chain = []
        current: int | None = node_id
        seen = set()
        while current is not None and current not in seen:
            seen.add(current)
            call, following, blocking = blocks[current]
            chain.append((current, call, blocking))
            current = following
        return chain

    def callee_nodes(self, node_id: int, call: Call, run: bool = False) -> list[int]:
        """The project functions a call reaches: the function, or a class's `__init__`/`__post_init__`. With
        `run`, only those the call itself runs (calling a generator function runs nothing yet, unless a `for`
        iterates it there and then)."""
        target = self.resolve(node_id, call.ref)
        return self._callees(target, run and not call.iterated) if target is not None else []

    def _callees(self, target: Target, run: bool) -> list[int]:
        if target.kind == "any":  # `provider.get_token()` for a provider picked from a list of them
            return list(dict.fromkeys(n for member in target.members for n in self._callees(member, run)))
        if target.kind == "function":
            if run and self.nodes[target.node].function.generator:
                return []
            return [target.node]
        if target.kind == "class":
            return [n for n in (self._method(target.klass, name) for name in ("__init__", "__post_init__"))
                    if n is not None]
        if target.kind == "instance":
            found = self._method(target.klass, "__call__")
            return [found] if found is not None else []
        return []

    def memoised(self, path: str, key: str, line: int, column: int) -> bool:
        """Whether the call at `line`:`column` of function `key` runs under a lazy guard that keeps its result
        (`if key not in cache: ...`, or after `if self._x is not None: return self._x`)."""
        node = self.node(path, key)
        return node is not None and any(call.memo for call in _calls_at(node, line, column))

    def logging_helper(self, path: str, key: str, line: int, column: int, argument: str) -> LoggingHelper | None:
        """The function of the program that the call at `line`:`column` of function `key` of `path` hands its
        `argument` (a position or a keyword), where that function logs the parameter it lands in (Function.logs)."""
        node = self.node(path, key)
        for call in _calls_at(node, line, column) if node is not None else ():
            for callee in self.callee_nodes(node.id, call):
                function = self.nodes[callee].function
                if not function.logs:
                    continue
                if argument.isdigit():
                    positional = function.parameters[:function.parameters.index("*")] \
                        if "*" in function.parameters else function.parameters
                    parameter = positional[int(argument)] if int(argument) < len(positional) else None
                else:
                    parameter = argument
                if parameter in function.logs:
                    helper = self.nodes[callee]
                    return LoggingHelper(helper.path, function.line, helper.label, parameter,
                                         function.logs[parameter])
        return None

    def callers_omitting(self, path: str, key: str, keyword: str) -> int:
        """How many calls in the project reach the private function `key` of `path`, when they are all known
        (it is never handed over as a callback) and none passes `keyword=` or `**`; else 0."""
        node = self.node(path, key)
        calls = self._private_callers(node) if node is not None else None
        if not calls or any(keyword in call.keywords or "**" in call.keywords for call in calls):
            return 0
        return len(calls)

    def switched_off_by_callers(self, path: str, key: str, line: int) -> bool:
        """Whether the calls on `line` of the private function `key` of `path` run under a switch (`if stream:`,
        after `if async_client: return ...`) that every call of it in the project turns off (all known)."""
        node = self.node(path, key)
        guarded = [call for call in node.function.calls if call.line == line] if node is not None else []
        if not guarded or not all(call.guards for call in guarded):
            return False
        callers = self._private_callers(node)
        return bool(callers) and all(self.switched_off(caller, node.id, call.guards)
                                     for caller in callers for call in guarded)

    def _private_callers(self, node: Node) -> list[Call] | None:
        """The calls in the project of a private function (`_name`: no code outside the project calls it), when
        they are all known; None where it is public or handed over as a callback."""
        if not node.function.name.startswith("_") or node.function.name.startswith("__"):
            return None
        calls = []
        for _, kind, call in self._caller_map().get(node.id, []):
            if call is None:
                return None
            if kind not in (E_CALL, E_AWAIT, E_RUN):
                if all(ref.endswith(CALLED) for _, ref in call.args):
                    continue  # `results.append(f())`: handed what a call returned, not the function
                return None
            calls.append(call)
        return calls

    def _caller_map(self) -> dict[int, list[tuple[int, int, Call | None]]]:
        """Every edge into each function, by callee; read only once every module is linked."""
        if self._callers is None:
            self._callers = {}
            for caller in self.nodes:
                for callee, kind, call in caller.edges:
                    self._callers.setdefault(callee, []).append((caller.id, kind, call))
        return self._callers

    def is_offload(self, node_id: int, call: Call) -> bool:
        qualified = self.qualified(node_id, call.ref)
        return qualified is not None and self.offload_table.match(qualified) is not None

    def unreachable(self, path: str, line: int) -> bool:
        """Whether `line` lies in a branch a platform test rules out where the code runs (`python-platform`)."""
        module = self.modules.get(path)
        return module is not None and any(first <= line <= last for first, last in module.unreachable)

    def suppressed(self, path: str, code: str, lines) -> bool:
        """Whether a comment silences `code` on one of `lines` of `path`: by its code, every code, or a peer
        linter's code for the same check (the rule's `peer_codes`: ruff's `S113` for LLM006)."""
        module = self.modules.get(path)
        if module is None or not module.suppressions and not module.file_ignores:
            return False
        if silenced_by(module.file_ignores, code):
            return True
        peers = self.peer_codes.get(code, frozenset())
        return any(silenced_by(module.suppressions.get(line, ()), code, peers) for line in lines)

    # ------------------------------------------------------------------ linking

    def _link(self, scripts: bool) -> None:
        knowledge = self.knowledge
        for path, module in self.modules.items():
            module_node = self.by_key[(path, MODULE_KEY)]
            if path not in self.test_modules:
                self.once.add(module_node)
                imported = {".".join(parts[:end]) for parts in (name.split(".") for name in module.imports)
                            for end in range(1, len(parts) + 1)}  # `a.b.c`: a, a.b, a.b.c
                for prefix, framework, kind in knowledge.module_code:
                    if prefix in imported:
                        self.entries.setdefault(module_node, Entry(module_node, framework, kind))
        # a module's functions and classes are linked one module at a time, each module's effects on the
        # program (entries, run-once, spawned) logged in order: a warm run replays them for unchanged modules
        replay = self._replay
        for path, ids in self.by_path.items():
            if replay is not None and replay.clean(path):
                replay.link_functions(self, path)
                continue
            self._log = []
            for node_id in ids:
                self._link_function(self.nodes[node_id])
            self.link_logs[path] = (self._log, [])
        self._log = None
        classes: dict[str, list[ClassInfo]] = {}
        for (path, _), klass in self.classes.items():
            classes.setdefault(path, []).append(klass)
        for path in self.by_path:
            if replay is not None and replay.clean(path):
                replay.link_classes(self, path)
                continue
            self._log = self.link_logs[path][1]
            for klass in classes.get(path, ()):
                self._class_entries(path, klass)
        self._log = None
        for module_name, function_name in console_scripts(self.layout.root) if scripts else ():
            found = self.layout.absolute(os.path.join(self.layout.root, "__main__.py"), module_name)
            if found is not None and found[1] == len(module_name.split(".")):
                node = self.by_key.get((found[0], function_name))
                if node is not None:
                    self.once.add(node)
        self._parameter_decorators()
        self._linked = True

    def _parameter_decorators(self) -> None:
        """`def register_handlers(sio):` with `@sio.on("chat") async def chat(...)` inside, called as
        `register_handlers(sio)` where `sio = socketio.AsyncServer()`: a decorator on a parameter is one on
        what the function's callers pass there, when every call passes the same (worked out after every
        module is linked, so on every run: a warm run's replay holds no such effect)."""
        pending = [(node, decorator) for node in self.nodes for decorator in node.function.decorators
                   if decorator.ref is not None and decorator.ref.startswith(PARAMETER)]
        if not pending:
            return
        for node, decorator in pending:
            owner = self.node(node.path, node.function.parent) if node.function.parent else None
            parameter, _, attribute = decorator.ref[len(PARAMETER):].partition(".")
            names = _argument_names(owner.function.parameters, parameter) if owner is not None else None
            if names is None:
                continue
            passed = set()
            for caller, kind, call in self._caller_map().get(owner.id, ()):
                if kind not in (E_CALL, E_AWAIT) or call is None:
                    continue
                ref = next((ref for name, ref in call.args if name in names), None)
                passed.add(None if ref is None else self.qualified(
                    caller, ref + attribute if ref.endswith(":") else f"{ref}.{attribute}"))
            if len(passed) == 1 and None not in passed:
                self._decorator(node, decorator, passed.pop())

    def _registries(self) -> dict[tuple[str, str], tuple[Target, ...]]:
        """The containers registering class decorators fill: `@stage_class("load") class LoadStage` where
        `def stage_class(name): def decorator(cls): registry[name] = cls; return cls; return decorator`.
        (module path, container name) -> the classes registered in it."""
        found: dict[tuple[str, str], list[Target]] = {}
        for (path, key), klass in self.classes.items():
            module_node = self.by_key.get((path, MODULE_KEY)) if klass.decorators else None
            if module_node is None:
                continue
            for decorator in klass.decorators:
                target = self.resolve(module_node, decorator.ref)
                if target is not None and target.kind == "function" and decorator.called:
                    returned = self.nodes[target.node].function.returns
                    target = self.resolve(target.node, returned) if returned else None
                if target is None or target.kind != "function":
                    continue
                for ref in self.nodes[target.node].function.registers:
                    where = self._container(target.node, ref)
                    if where is not None:
                        found.setdefault(where, []).append(Target("class", klass=(path, key)))
        return {where: tuple(dict.fromkeys(classes)) for where, classes in found.items()}

    def _subclass_map(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """class -> the project classes deriving from it directly; for a `typing.Protocol`, the project
        classes that define every one of its methods (its implementations, structurally, as a type checker
        matches them: freeride's provider plugins implement `Provider(Protocol)` without naming it); for a
        protocol of one method, the classes defining it with the same parameters (a type checker matches their
        names too: distill-mcp's distillers implement `DistillerPort.distill(self, raw_text)`)."""
        found: dict[tuple[str, str], list[tuple[str, str]]] = {}
        protocols: list[tuple[tuple[str, str], set[str]]] = []
        for klass, info in self.classes.items():
            module_node = self.by_key.get((klass[0], MODULE_KEY)) if info.bases else None
            for ref, _ in info.bases if module_node is not None else ():
                base = self.resolve(module_node, ref)
                if base is not None and base.kind == "class":
                    found.setdefault(base.klass, []).append(klass)
                elif base is not None and base.kind == "library" and base.name in _PROTOCOL_BASES:
                    methods = {name for name in info.methods if not name.startswith("__")}
                    if methods:
                        protocols.append((klass, methods))
        defining: dict[str, list[tuple[str, str]]] = {}  # method name -> the classes defining it
        for klass, info in self.classes.items() if protocols else ():
            if klass[0] not in self.test_modules:
                for name in info.methods:
                    defining.setdefault(name, []).append(klass)
        for protocol, methods in protocols:
            rarest = min(methods, key=lambda name: len(defining.get(name, ())))
            alone = self._parameters(protocol, rarest) if len(methods) == 1 else None
            for klass in defining.get(rarest, ()):
                if klass != protocol and methods <= self.classes[klass].methods.keys() and (
                        len(methods) > 1 or (alone is not None and self._parameters(klass, rarest) == alone)):
                    found.setdefault(protocol, []).append(klass)
        return found

    def _parameters(self, klass: tuple[str, str], method: str) -> list[str] | None:
        node = self.by_key.get((klass[0], self.classes[klass].methods[method]))
        return None if node is None else self.nodes[node].function.parameters

    def _overrides(self, klass: tuple[str, str], name: str) -> list[int]:
        """The definitions of method `name` that the subclasses of `klass` (at any depth) have of their own."""
        out: list[int] = []

        def visit(sub: tuple[str, str]) -> bool:
            key = self.classes[sub].methods.get(name)
            found = self.by_key.get((sub[0], key)) if key is not None else None
            if found is not None and not self.nodes[found].function.abstract:
                out.append(found)
            return True

        self._visit_subclasses(klass, visit)
        return out

    def _visit_subclasses(self, klass: tuple[str, str], visit: Callable[[tuple[str, str]], bool]) -> None:
        """Calls `visit` on the project classes deriving from `klass`, nearest first (at most MAX_SUBCLASSES);
        it returns whether to go on to the classes deriving from the one it was given."""
        seen = {klass}
        queue = deque(self.subclasses.get(klass, ()))
        while queue and len(seen) <= MAX_SUBCLASSES:
            sub = queue.popleft()
            if sub in seen:
                continue
            seen.add(sub)
            if visit(sub):
                queue.extend(self.subclasses.get(sub, ()))

    def _container(self, node_id: int, ref: str) -> tuple[str, str] | None:
        """The module-level name a reference denotes: (module path, name)."""
        if ref.startswith("M:") and "." not in ref:
            return self.nodes[node_id].path, ref[2:]
        module_ref, _, name = ref.rpartition(".")
        module = self.resolve(node_id, module_ref) if module_ref and not module_ref.endswith(":") else None
        return (module.path, name) if module is not None and module.kind == "module" else None

    def _link_function(self, node: Node) -> None:
        function = node.function
        if function.parent is not None:
            parent = self.by_key.get((node.path, function.parent))
            if parent is not None:
                self.nodes[parent].edges.append((node.id, E_DEF, None))
        knowledge = self.knowledge
        if function.key and (function.name in knowledge.once_names or knowledge.once_name_globs.match(function.name)):
            self._add_once(node.id)
        self._decorators(node)
        for call in function.calls:
            self._call_edges(node, call)
        runs = [(callee, call) for callee, kind, call in node.edges if kind == E_RUN]
        if runs:  # `asyncio.run(main())` runs `main` on a loop of its own: not also a plain call of it
            # (nor `coro = main()` before it: calling a coroutine function only makes the coroutine)
            coroutines = {callee for callee, _ in runs if self.nodes[callee].function.is_async}
            node.edges[:] = [edge for edge in node.edges if not (edge[1] == E_CALL and (edge[0] in coroutines or any(
                edge[0] == callee and _inside(edge[2], call) for callee, call in runs)))]

    # the effects linking one module has on the program; each logged for the replay (`incremental.py`)

    def _add_once(self, node_id: int) -> None:
        if self._log is not None:
            self._log.append(("o", node_id))
        self.once.add(node_id)

    def _add_spawned(self, node_id: int) -> None:
        if self._log is not None:
            self._log.append(("s", node_id))
        self.spawned.add(node_id)

    def _add_scheduled(self, node_id: int) -> None:
        if self._log is not None:
            self._log.append(("p", node_id))
        self.scheduled.add(node_id)

    def _add_hook(self, node_id: int) -> None:
        if self._log is not None:
            self._log.append(("h", node_id))
        self.hooks.add(node_id)

    def _default_entry(self, entry: Entry) -> None:
        """An entry point unless the function is one already."""
        if self._log is not None:
            self._log.append(("d", entry))
        self.entries.setdefault(entry.node, entry)

    def _decorators(self, node: Node) -> None:
        for decorator in node.function.decorators:
            self._decorator(node, decorator, self.qualified(node.id, decorator.ref))

    def _decorator(self, node: Node, decorator, qualified: str | None) -> None:
        if self.cache_decorators.match(qualified or decorator.text) is not None:
            node.cached = True
            return
        found = self.knowledge.request_decorator(qualified) if qualified else None
        if found is not None:
            self._add_decorated_entry(node.id, found, decorator.text, decorator.literal)
            return
        if self.knowledge.once_decorators.match(qualified) or (
                self.knowledge.once_decorators.match(decorator.text) and self._receiver_known(node, decorator)):
            self._add_decorated_once(node.id, qualified or decorator.text)
            return
        if self.knowledge.scheduled_decorators.match(qualified):
            self._add_scheduled(node.id)
            return
        if (qualified is None and decorator.called and decorator.literal is not None
                and decorator.literal.startswith("/") and "." in decorator.text
                and decorator.text.rsplit(".", 1)[-1] in ROUTE_METHODS):
            route = _route(decorator.text, decorator.literal)  # `@api.post("/chat")` on an app we cannot type
            self._default_entry(Entry(node.id, "route", INTERACTIVE, route))

    def _add_decorated_entry(self, node_id: int, found: tuple[str, str], decorator: str, literal: str | None) -> None:
        """A request entry point a decorator makes (`found`: framework, kind), with the route its literal names;
        a bot's connection event (`on_ready`, by its name or the decorator's literal) is a start-up hook instead:
        once per connection, on the loop that then serves the messages."""
        events = self.knowledge.once_events
        if events and (self.nodes[node_id].function.name in events or literal in events):
            self._add_once(node_id)
            self._add_hook(node_id)
            return
        route = _route(decorator, literal) if literal is not None and literal.startswith("/") else ""
        self._add_entry(Entry(node_id, found[0], found[1], route))

    def _add_decorated_once(self, node_id: int, decorator: str) -> None:
        """A run-once entry a decorator makes; a start-up hook's runs on the loop that serves requests."""
        self._add_once(node_id)
        if self.knowledge.hook_decorators.match(decorator):
            self._add_hook(node_id)

    def _add_entry(self, entry: Entry) -> None:
        """An entry point; where two decorators say different things, someone waiting (interactive) wins."""
        if self._log is not None:
            self._log.append(("a", entry))
        current = self.entries.get(entry.node)
        if current is None or (current.kind == WORKER and entry.kind == INTERACTIVE):
            self.entries[entry.node] = entry

    def _receiver_known(self, node: Node, decorator) -> bool:
        """`@cli.command()`: the object before the last name resolves (a project click group, a library
        object): a pattern like `*.command` may then say what it is; on an object nothing tells, no guess."""
        ref = decorator.ref or ""
        if "." not in ref.partition(":")[2]:
            return False
        return self.resolve(node.id, ref.rsplit(".", 1)[0]) is not None

    def _call_edges(self, node: Node, call: Call) -> None:
        if call.kind == ASSIGNED:  # `app.post_init = f`: only what registering `f` there makes of it
            qualified = self.qualified(node.id, call.ref)
            if qualified is not None:
                self._registrations(node, call, qualified)
            return
        for getter in self.getters_read(node.id, call):
            node.edges.append((getter, E_CALL, call))
        edge = _EDGE_OF_CALL.get(call.kind, E_CALL)
        for callee in self.callee_nodes(node.id, call):
            node.edges.append((callee, edge, call))
        if not call.args:
            return
        qualified = self.qualified(node.id, call.ref)
        offload = qualified is not None and self.offload_table.match(qualified) is not None
        last = call.text.rsplit(".", 1)[-1]
        executor = last == "run_in_executor"
        registered = self._registrations(node, call, qualified)
        # a library call may keep what it is handed (a callback), and so does a constructor
        # (`Tool(function=f)`, `super().__init__(combine_function=self._combine)`); a project function or a
        # known runner runs it
        library = (qualified is not None and last not in self.knowledge.calls_now) or last == "__init__"
        callees: list[int] = []
        if not library:
            target = self.resolve(node.id, call.ref)
            library = target is not None and target.kind == "class"
            callees = [] if library else self.callee_nodes(node.id, call)
            self._runs_on_own_loop(node, call, callees, registered)
        for position, ref in call.args:
            if ref in registered:
                continue  # an entry point of its own, whatever its caller is
            target = self._argument_target(node.id, ref)
            if target is None:
                continue
            if target.kind == "function":
                offloaded = (offload and position == "0") or (executor and position == "1")
                # stored: it runs when someone reads it (a project function that neither calls it nor hands it on
                # keeps it too: `self.register(self.search)`)
                kept = library or position.endswith(IN_CONTAINER) or (
                    bool(callees) and not any(self._runs_argument(callee, position) for callee in callees))
                kind = E_OFFLOAD if offloaded else (E_HANDED if kept else E_REF)
                node.edges.append((target.node, kind, call))
        spawn = self.knowledge.spawn
        if spawn.match(qualified) or (qualified is None and spawn.match(call.text)):
            for _, ref in call.args:  # asyncio.create_task(worker()): worker runs beside its spawner
                target = self._argument_target(node.id, ref)
                if target is not None and target.kind == "function":
                    self._add_spawned(target.node)

    def _runs_argument(self, callee: int, position: str) -> bool:
        """Whether a project function may run what a call hands it at `position` ("0" or a keyword): the
        parameter there is one it calls or hands on (`Function.runs`); an argument landing in `*args` or
        `**kwargs` may be run."""
        parameters = self.nodes[callee].function.parameters
        if position.isdigit():
            index = int(position)
            star = parameters.index("*") if "*" in parameters else len(parameters)
            name = parameters[index] if index < star else None
        else:
            name = position if position in parameters else None
        return name is None or name in self.nodes[callee].function.runs

    def _argument_target(self, node_id: int, ref: str) -> Target | None:
        """What an argument hands over: `asyncio.run(main())` hands `main` (the call runs it), `add_route("/",
        Resource())` an instance."""
        members = members_of(ref)
        if len(members) > 1:  # `asyncio.run(conversion)`, one of the calls two branches made
            return _one_of([self._argument_target(node_id, member) for member in members])
        if ref.endswith(CALLED):
            inner = self.resolve(node_id, ref[: -len(CALLED)])
            if inner is not None and inner.kind == "function":
                return inner
        return self.resolve(node_id, ref)

    def _registrations(self, node: Node, call: Call, qualified: str | None) -> set[str]:
        """Mark what `call` registers (request entry points, run-once entries); the references registered."""
        registered: set[str] = set()
        self._handed_runner(node, call, registered)
        if qualified is not None and call.ref.endswith(CALLED):  # `app.command(name="cancel")(cancel)`
            self._decorated_by_hand(node, call, qualified, registered)
        if qualified is None:  # `router.add_api_route("/x", f)` on a router of unknown type
            method = call.text.rsplit(".", 1)[-1] if "." in call.text else ""
            if not method or not (call.literal or "").startswith("/"):
                return registered
            for registration in self.knowledge.registrations:
                if method in registration.unresolved_methods:
                    for target in self._registered(node.id, call, registration, registered):
                        self._add_entry(Entry(target, registration.framework, registration.kind, call.literal))
            return registered
        requests, once, scheduled = self.knowledge.registering(qualified)
        for registration in requests:
            route = call.literal if call.literal and call.literal.startswith("/") else ""
            for target in self._registered(node.id, call, registration, registered):
                self._add_entry(Entry(target, registration.framework, registration.kind, route))
        for registration in once:
            if registration.loop is not None and not self._private_loop_argument(node.id, call, registration.loop):
                continue  # run on a loop others share (the server's): as if called there
            for target in self._registered(node.id, call, registration, registered):
                if registration.in_caller:  # a sync wrapper's `asyncio.run(coro())`: as its caller
                    node.edges.append((target, E_RUN, call))
                else:
                    self._add_once(target)
                    if registration.serving_loop:
                        self._add_hook(target)
        for registration in scheduled:
            if _periodic_trigger(call, registration.trigger):
                for target in self._registered(node.id, call, registration, registered):
                    self._add_scheduled(target)
        return registered

    def _runs_on_own_loop(self, node: Node, call: Call, callees: list[int], registered: set[str]) -> None:
        """`run_async(brief(user))` with `def run_async(coro): return loop.run_until_complete(coro)` (a Celery
        task's sync wrapper): a project function that runs the coroutine it is handed on a loop of its own
        (`Function.runs_coroutine`) runs it as `asyncio.run(brief(user))` would, there and then."""
        for callee in callees:
            function = self.nodes[callee].function
            for name in function.runs_coroutine:
                if name not in function.parameters:
                    continue
                index = function.parameters.index(name)
                positional = str(index) if "*" not in function.parameters[:index] else None
                ref = next((ref for position, ref in call.args if position in (positional, name)), None)
                target = self._argument_target(node.id, ref) if ref is not None and ref.endswith(CALLED) else None
                if target is not None and target.kind == "function" and self.nodes[target.node].function.is_async:
                    node.edges.append((target.node, E_RUN, call))
                    registered.add(ref)

    def _handed_runner(self, node: Node, call: Call, registered: set[str]) -> None:
        """`pool.submit(asyncio.run, step())`, `loop.run_in_executor(None, asyncio.run, step())`: a runner handed
        on with the coroutine after it runs that coroutine as `asyncio.run(step())` would, on a loop of its own."""
        positional = {int(position): ref for position, ref in call.args if position.isdigit()}
        for position, ref in positional.items():
            coroutine = positional.get(position + 1)
            if coroutine is None or not coroutine.endswith(CALLED):
                continue
            runner = self.qualified(node.id, ref)
            if runner is None or not any(registration.in_caller and registration.loop is None
                                         and registration.calls.match(runner)
                                         for registration in self.knowledge.once_registrations):
                continue
            target = self._argument_target(node.id, coroutine)
            if target is not None and target.kind == "function":
                node.edges.append((target.node, E_RUN, call))
                registered.add(coroutine)

    def _decorated_by_hand(self, node: Node, call: Call, qualified: str, registered: set[str]) -> None:
        """A decorator applied as a call, `app.command(name="cancel")(cancel)` or `app.get("/x")(handler)`: the
        function handed over is an entry point as if it were decorated."""
        ref = next((ref for position, ref in call.args if position == "0"), None)
        target = self._argument_target(node.id, ref) if ref is not None and len(call.args) == 1 else None
        if target is None or target.kind != "function":
            return
        found = self.knowledge.request_decorator(qualified)
        if found is not None:  # the route is the decorator call's literal: `app.get("/x")`, the call inside
            inner = next((c for c in node.function.calls if c.line == call.line and c.ref == call.ref[:-len(CALLED)]),
                         None)
            self._add_decorated_entry(target.node, found, inner.text if inner else "", inner.literal if inner else None)
        elif self.knowledge.once_decorators.match(qualified):
            self._add_decorated_once(target.node, qualified)
        elif self.knowledge.scheduled_decorators.match(qualified):  # `repeat_every(seconds=60)(refresh)`
            self._add_scheduled(target.node)
        else:
            return
        registered.add(ref)

    def _private_loop_argument(self, node_id: int, call: Call, loop: tuple[int, str, Patterns]) -> bool:
        """`run_coroutine_threadsafe(coro, self.loop)` where `self.loop = asyncio.new_event_loop()`: a loop of its
        own, which some thread runs (a session's, a worker's)."""
        position, keyword, private = loop
        ref = next((ref for name, ref in call.args if name in (str(position), keyword)), None)
        return private.match(self.qualified(node_id, ref)) if ref is not None else False

    def _registered(self, node_id: int, call: Call, registration: Registration, seen: set[str]) -> list[int]:
        refs = [ref for position, ref in call.args
                if position in registration.keywords or position == str(registration.argument)]
        seen.update(refs)
        out = []
        for ref in refs:
            found = self._argument_target(node_id, ref)
            for target in (found.members if found is not None and found.kind == "any" else (found,)):
                if target is not None:
                    out.extend(self._registered_target(target, ref, registration))
        if not out and refs:  # path("x/", views.MyView.as_view()): the class before `.as_view()`
            for ref in refs:
                if ".as_view" in ref:
                    target = self.resolve(node_id, ref.split(".as_view", 1)[0])
                    if target is not None and target.kind == "class":
                        out.extend(self._class_methods(target.klass, registration.methods))
        return out

    def _registered_target(self, target: Target, ref: str, registration: Registration) -> list[int]:
        if target.kind == "function":
            return [target.node]
        if target.kind in ("class", "instance") and target.klass is not None:
            methods = registration.methods or frozenset({"__call__"})
            if target.kind == "class" and ref.endswith(".as_view()"):
                methods = registration.methods
            return self._class_methods(target.klass, methods)
        return []

    def _class_entries(self, path: str, klass: ClassInfo) -> None:
        owner = self.by_key.get((path, MODULE_KEY))
        if owner is None:
            return
        for base in self._library_bases((path, klass.key), set()):
            for entry in self.knowledge.bases:
                if entry.types.match(base):
                    for method in self._class_methods((path, klass.key), entry.methods):
                        self._add_entry(Entry(method, entry.framework, entry.kind))
        for decorator in klass.decorators:
            qualified = self.qualified(owner, decorator.ref) or decorator.text
            for entry in self.knowledge.class_decorators:
                if entry.types.match(qualified):
                    for method in self._class_methods((path, klass.key), entry.methods):
                        self._add_entry(Entry(method, entry.framework, entry.kind))
        for base in self._library_bases((path, klass.key), set()):
            for entry in self.knowledge.once_bases:  # Django's BaseCommand.handle, AppConfig.ready
                if entry.types.match(base):
                    for method in self._class_methods((path, klass.key), entry.methods):
                        self._add_once(method)

    def _library_bases(self, klass: tuple[str, str], seen: set) -> list[str]:
        """Qualified names of the library classes `klass` derives from (through project classes)."""
        if klass in seen or len(seen) > 30:
            return []
        seen.add(klass)
        info = self.classes.get(klass)
        if info is None:
            return []
        owner = self.by_key.get((klass[0], MODULE_KEY))
        out = []
        for ref, text in info.bases:
            target = self.resolve(owner, ref) if owner is not None else None
            if target is not None and target.kind == "class" and target.klass is not None:
                if text:
                    out.append(text)  # a project base keeps its name too (a generated `*Servicer`)
                out.extend(self._library_bases(target.klass, seen))
            elif target is not None and target.kind == "library":
                out.append(target.name)
            elif text:
                out.append(text)  # an unresolved base: its dotted text (`*Servicer` matches by name)
        return out

    def _class_methods(self, klass: tuple[str, str], methods: frozenset[str]) -> list[int]:
        info = self.classes.get(klass)
        if info is None:
            return []
        out = []
        for name, key in info.methods.items():
            if name in methods or ("*" in methods and (not name.startswith("_") or name == "__call__")) or any(
                    "*" in pattern and pattern != "*" and fnmatch.fnmatchcase(name, pattern) for pattern in methods):
                found = self.by_key.get((klass[0], key))
                if found is not None:
                    out.append(found)
        return out

    def _method(self, klass: tuple[str, str] | None, name: str, seen=None) -> int | None:
        """The function `name` resolves to on `klass` (its own, else its project bases', in order)."""
        if klass is None:
            return None
        seen = seen if seen is not None else set()
        if klass in seen or len(seen) > 30:
            return None
        seen.add(klass)
        info = self.classes.get(klass)
        if info is None:
            return None
        key = info.methods.get(name)
        if key is not None:
            return self.by_key.get((klass[0], key))
        owner = self.by_key.get((klass[0], MODULE_KEY))
        for ref, _ in info.bases:
            target = self.resolve(owner, ref) if owner is not None else None
            if target is not None and target.kind == "class":
                found = self._method(target.klass, name, seen)
                if found is not None:
                    return found
        return None

    def _attribute(self, klass: tuple[str, str] | None, name: str, seen=None) -> tuple[str, tuple[str, str]] | None:
        """(the value reference, the class it was recorded on) of `self.<name>`, through project bases."""
        if klass is None:
            return None
        seen = seen if seen is not None else set()
        if klass in seen or len(seen) > 30:
            return None
        seen.add(klass)
        info = self.classes.get(klass)
        if info is None:
            return None
        if name in info.attributes:
            value = info.attributes[name]
            return (value, klass) if value else None
        owner = self.by_key.get((klass[0], MODULE_KEY))
        for ref, _ in info.bases:
            target = self.resolve(owner, ref) if owner is not None else None
            if target is not None and target.kind == "class":
                found = self._attribute(target.klass, name, seen)
                if found is not None:
                    return found
        return None

    # ------------------------------------------------------------------ resolution

    def _called_with(self, node: Node, callee: str, where: str, position: int, depth: int) -> Target | None:
        """What the project function `callee` calls the callable it takes at `where` (a position or a keyword)
        with, at `position`, by that parameter's `Callable[[...], ...]` annotation."""
        target = self._resolve(node, callee, depth + 1)
        if target is None:
            return None
        if target.kind == "class":
            target_node = self._method(target.klass, "__init__")
        elif target.kind == "function":
            target_node = target.node
        else:
            return None
        if target_node is None:
            return None
        function = self.nodes[target_node].function
        name = where
        if where.isdigit():
            positional = function.parameters[:function.parameters.index("*")] if "*" in function.parameters \
                else function.parameters
            name = positional[int(where)] if int(where) < len(positional) else None
        called_with = function.callables.get(name) if name else None
        if not called_with or position >= len(called_with) or called_with[position] is None:
            return None
        return self._resolve(self.nodes[target_node], called_with[position], depth + 1)

    def _resolve(self, node: Node, ref: str, depth: int) -> Target | None:
        if depth > MAX_RESOLVE_DEPTH:
            return None
        root, _, rest = ref.partition(":")
        if root + ":" in _BRACED:  # "X:{a|b|c}<tail>": the parts in braces, then what follows them
            close = rest.find("}")
            if not rest.startswith("{") or close < 0:
                return None
            parts, tail = rest[1:close].split("|"), _tokens(rest[close + 1:])
            if root + ":" == LAMBDA_ARGUMENT:
                if len(parts) != 3 or not parts[2].isdigit():
                    return None
                return self._walk(self._called_with(node, parts[0], parts[1], int(parts[2]), depth), tail, depth)
            if root + ":" == ROWS:  # a container of tuples: an element's item i is part i ("": not known)
                row = Target("row", members=tuple(
                    (self._resolve(node, part, depth + 1) if part else None) or _UNKNOWN for part in parts))
                return self._walk(Target("items", members=(row,)), tail, depth)
            found = _one_of([self._resolve(node, member, depth + 1) for member in parts])
            if root + ":" == EITHER:  # the value is one of them
                return self._walk(found, tail, depth)
            container = Target("items", members=found.members if found.kind == "any" else (found,)) if found else None
            return self._walk(container, tail, depth)
        tokens = _TOKENS.get(rest)
        if tokens is None:
            tokens = _TOKENS[rest] = _tokens(rest)
        if root == "I":
            names = _leading_names(tokens)
            found = self.layout.absolute(node.path, ".".join(names)) if names else None
            if found is None:
                return self._library(names, tokens[len(names):])
            path, used = found
            return self._walk(Target("module", path=path), _skip_names(tokens, used), depth)
        if root.startswith("R") and root[1:].isdigit():
            names = _leading_names(tokens)
            found = self.layout.relative_import(node.path, int(root[1:]), ".".join(names))
            if found is None:
                return None
            path, used = found
            return self._walk(Target("module", path=path), _skip_names(tokens, used), depth)
        if root == "M":
            return self._walk(Target("module", path=node.path), tokens, depth)
        if root == "F":
            found = self.by_key.get((node.path, rest))
            return Target("function", node=found) if found is not None else None
        if root in ("S", "C", "U"):
            owner = node.function.owner
            if owner is None and node.function.parent is not None:  # a closure inside a method
                parent = self.node(node.path, node.function.parent)
                owner = parent.function.owner if parent is not None else None
            if owner is None:
                return None
            klass = (node.path, owner)
            if root == "U":
                info = self.classes.get(klass)
                module_node = self.by_key.get((node.path, MODULE_KEY))
                base = None
                for base_ref, _ in (info.bases if info else ()):
                    base = self.resolve(module_node, base_ref) if module_node is not None else None
                    if base is not None:
                        break
                if base is None or base.kind not in ("class", "library"):
                    return None
                if base.kind == "class" and tokens and tokens[0] != CALLED:  # `super().m()` looks up, never down
                    return self._walk(self._member(base.klass, tokens[0], depth), tokens[1:], depth)
                start = Target("instance", klass=base.klass) if base.kind == "class" else base
                return self._walk(start, tokens, depth)
            if tokens and tokens[0] != CALLED:  # `self.m()`: the object's own class decides, whatever subclass it is
                method = self._method(klass, tokens[0])
                if method is not None:
                    return self._walk(self._read(method), tokens[1:], depth)
            return self._walk(Target("instance" if root == "S" else "class", klass=klass), tokens, depth)
        if root == "B":
            return self._library(["builtins", *_leading_names(tokens)], tokens[len(_leading_names(tokens)):])
        if root == "P" and tokens:
            self.parameter_uses += 1
            return self._walk(self._passed(node, tokens[0], depth), tokens[1:], depth) if self._linked else None
        return None

    def _passed(self, node: Node, parameter: str, depth: int) -> Target | None:
        """What every call of `node` passes as its unannotated `parameter` (`_handle_upload(scope, runtime)`
        with the `runtime` module each time), when all of them are known and agree; else None. A function
        handed over as a callback has callers the project does not show."""
        names = _argument_names(node.function.parameters, parameter)
        if names is None:
            return None
        found: Target | None = None
        for caller, kind, call in self._caller_map().get(node.id, ()):
            if kind == E_DEF:
                continue
            if kind not in (E_CALL, E_AWAIT) or call is None:
                return None
            ref = next((ref for name, ref in call.args if name in names), None)
            target = self._resolve(self.nodes[caller], ref, depth + 1) if ref is not None else None
            if target is None or (found is not None and target != found):
                return None
            found = target
        return found

    def _library(self, names: list[str], rest: list[str]) -> Target | None:
        name: str | None = ".".join(names)
        for token in rest:
            if name:
                name = self._library_step(name, token)
            elif name is None:
                return None
            elif token != CALLED:
                name = token
        return Target("library", name=name) if name else None

    def _library_step(self, name: str, token: str) -> str | None:
        """The library value `token` makes of `name`: a call keeps a class's instance as the class, unless the
        call's result is another type (rules/common.yaml `library_results`: `path.joinpath(x)`, `path / x` is
        a `pathlib.Path`), as an attribute may be (`path.parent`); an element is of the type the table gives
        the value's `items` (`path.parents[2]`, `for p in root.glob("*.md")` are paths), else unknown (None)."""
        if token.startswith("["):
            entry = self.library_results.match(name)
            return entry.get("items") if entry is not None else None
        if token == CALLED:
            entry = self.library_results.match(name)
            return (entry.get("type") or name) if entry is not None and not entry.get("attribute") else name
        name = f"{name}.{token}"
        entry = self.library_results.match(name)
        return (entry.get("type") or name) if entry is not None and entry.get("attribute") else name

    def _walk(self, current: Target | None, tokens: list[str], depth: int) -> Target | None:
        for token in tokens:
            if current is None:
                return None
            current = self._step(current, token, depth)
        return current

    def _step(self, current: Target, token: str, depth: int) -> Target | None:
        kind = current.kind
        if kind == "any":
            return _one_of([self._step(member, token, depth) for member in current.members])
        if kind == "items":  # an element, by index or `.get(key)`
            if token.startswith("["):
                return _one_of(list(current.members))
            return Target("pick", members=current.members) if token == "get" else None
        if kind == "pick":
            return _one_of(list(current.members)) if token == CALLED else None
        if kind == "row":  # a tuple's item, by its position
            position = int(token[1:-1]) if token.startswith("[") and token[1:-1].isdigit() else -1
            item = current.members[position] if 0 <= position < len(current.members) else None
            return item if item is not _UNKNOWN else None
        if kind == "library":
            name = self._library_step(current.name, token)
            return Target("library", name=name) if name else None
        if kind == "result":  # what a project function returned (its `return`, read by the index)
            function = self.nodes[current.node].function
            if token.startswith("[") and function.returns_items is not None:
                items = function.returns_items
                position = int(token[1:-1]) if token[1:-1].isdigit() else -1
                value = items[position] if 0 <= position < len(items) else None
                return self._resolve(self.nodes[current.node], value, depth + 1) if value else None
            returned = self._resolve(self.nodes[current.node], function.returns, depth + 1) if function.returns else None
            if returned is not None and returned.kind == "library" and function.declared:
                declared = self._resolve(self.nodes[current.node], function.declared, depth + 1)
                if declared is not None and declared.kind == "library" \
                        and declared.name.split(".", 1)[0] != returned.name.split(".", 1)[0]:
                    # `-> sqlite3.Connection` returning `self._local.conn`: an attribute of a `threading.local()`
                    # says nothing of what it holds; the declaration, of another library, does
                    returned = declared
            found = self._step(returned, token, depth + 1) if returned is not None else None
            if found is None and function.declared:
                # `-> Path` types the result where the `return`s do not, and so does a project class no project
                # class derives from (`-> FolderServices | None`); a base class stands for every subclass (its
                # methods would all become callees, and `__init__`'s run-once reach would claim them first)
                declared = self._resolve(self.nodes[current.node], function.declared, depth + 1)
                if declared is not None and (declared.kind == "library" or (
                        declared.kind == "instance" and not self.subclasses.get(declared.klass))):
                    found = self._step(declared, token, depth + 1)
            return found
        if token == CALLED:
            if kind == "class":
                return Target("instance", klass=current.klass)
            if kind == "function":
                return Target("result", node=current.node)
            return None  # the result of calling an instance: unknown
        if token.startswith("["):
            return None
        if kind == "module":
            return self._module_attribute(current.path, token, depth)
        if kind in ("class", "instance"):
            found = self._member(current.klass, token, depth)
            if found is None and kind == "instance" and not token.startswith("__"):  # (`object` has the dunders)
                return self._mixin_member(current.klass, token, depth)
            return found
        return None

    def _member(self, klass: tuple[str, str], token: str, depth: int) -> Target | None:
        """What `token` is on an object of `klass`: its method (or, for an abstract one, every subclass's own
        definition), else the value its class assigns to that attribute."""
        method = self._method(klass, token)
        if method is not None:
            if self.nodes[method].function.abstract:  # the subclasses' own definitions run instead
                overrides = self._overrides(klass, token)
                if overrides:
                    return _one_of([self._read(n) for n in overrides])
            return self._read(method)
        found = self._attribute(klass, token)
        if found is None:
            return None
        value, owner = found
        holder = self._class_context(owner)
        return self._resolve(self.nodes[holder], value, depth + 1) if holder is not None else None

    def getters_read(self, node_id: int, call: Call) -> list[int]:
        """The property getters a call runs as it reads its callee and arguments (`self.client.generate(...)` reads
        `client`, `run(text, session.history)` reads `history`): each runs there and then, whether or not the call
        is awaited."""
        if not self._accessor_names:
            return []
        found: list[int] = []
        for ref in (call.ref, *(ref for _, ref in call.args)):
            root, _, rest = (ref or "").partition(":")
            if not rest or root == "P" or root + ":" in (CONTAINER, EITHER, ROWS):
                continue
            tokens = _TOKENS.get(rest)
            if tokens is None:
                tokens = _TOKENS[rest] = _tokens(rest)
            for position, token in enumerate(tokens):
                if token not in self._accessor_names or (not position and root not in ("S", "C")):
                    continue
                holder = self.resolve(node_id, f"{root}:{_joined(tokens[:position])}")
                for member in (holder.members if holder is not None and holder.kind == "any" else (holder,)):
                    if member is not None and member.kind == "instance":
                        method = self._method(member.klass, token)
                        if method is not None and self.nodes[method].function.accessor and method not in found:
                            found.append(method)
        return found

    def _read(self, method: int) -> Target:
        """What reading a method off an object gives: the method, or for a property what its getter returns."""
        return Target("result", node=method) if self.nodes[method].function.accessor else Target("function", node=method)

    def _mixin_member(self, klass: tuple[str, str], token: str, depth: int) -> Target | None:
        """`self.runtime` in a mixin that has none of its own: the object is one of the project classes deriving
        from it (alone, the mixin would raise AttributeError), so it is what the nearest of those that have it
        hold (`class Router(GitCommandsMixin, RouterBase)`, whose `RouterBase.__init__` sets `self.runtime`)."""
        targets: list[Target] = []

        def visit(sub: tuple[str, str]) -> bool:
            found = self._member(sub, token, depth + 1)
            if found is not None:
                targets.append(found)
            return found is None

        self._visit_subclasses(klass, visit)
        return _one_of(targets)

    def _class_context(self, klass: tuple[str, str]) -> int | None:
        """A node inside `klass` (its first method), to resolve values recorded on it (`self.x = ...`)."""
        info = self.classes.get(klass)
        if info is None:
            return None
        for key in info.methods.values():
            found = self.by_key.get((klass[0], key))
            if found is not None:
                return found
        return self.by_key.get((klass[0], MODULE_KEY))

    def _module_attribute(self, path: str, name: str, depth: int) -> Target | None:
        registered = self.registered.get((path, name))
        if registered:  # a registry its decorators fill: each element one of the classes registered
            return Target("items", members=registered)
        module = self.modules.get(path)
        if module is None:  # a namespace folder: only submodules
            found = self.layout.module_file(path, [name])
            return Target("module", path=found) if found else None
        if name in module.bindings:
            value = module.bindings[name]
            if value is None:
                return None
            if value == "M:" + name:  # defined here
                node = self.by_key.get((path, name))
                if node is not None:
                    return Target("function", node=node)
                if (path, name) in self.classes:
                    return Target("class", klass=(path, name))
                return None
            owner = self.by_key.get((path, MODULE_KEY))
            return self._resolve(self.nodes[owner], value, depth + 1) if owner is not None else None
        if path.endswith("__init__.py"):
            found = self.layout.module_file(os.path.dirname(path), [name])
            if found is not None:
                return Target("module", path=found)
        return None

    # ------------------------------------------------------------------ knowledge

    def _classify(self, qualified: str, call: Call) -> Blocking | None:
        if qualified not in self._classified:
            entry = self.blocking_table.match(qualified)
            method = None
            if entry is None:
                method = self.sdk.lookup(qualified)
                if method is None or method.is_async or method.local:  # the others send a request
                    method = None
            self._classified[qualified] = (entry, method) if entry is not None or method is not None else None
        found = self._classified[qualified]
        if found is None:
            return None
        entry, method = found
        if entry is not None:
            marker = entry.get("nonblocking_with")
            if marker and marker in call.marks:
                return None  # os.waitpid(pid, os.WNOHANG) returns at once
            if call.literal and any(call.literal.startswith(p) for p in entry.get("nonblocking_paths") or ()):
                return None  # open(f"/proc/{pid}/stat"): a kernel file, read from memory
            writes = _writes(call, qualified)
            instead = entry.get("use_instead_write") if writes and entry.get("use_instead_write") else \
                entry.get("use_instead")
            autofix = entry.get("autofix", "to_thread")  # `none`: the blocking work continues after the call
            return Blocking(call, qualified, f"use {instead}" if instead else None,
                            serving_only=bool(entry.get("serving_only")), file_io=bool(entry.get("file_io")),
                            writes=writes, autofix=None if autofix == "none" else autofix)
        if method.exempt.no_model_call & set(call.keywords):
            return None  # litellm.completion(mock_response=...) answers without a model
        return Blocking(call, qualified, None, sdk=method,
                        autofix=None if method.kind == "streaming" else "to_thread")  # a stream blocks as read

    def _is_test_function(self, node: Node) -> bool:
        """`def test_x()` at module level or a method of `class TestX` (and what they define inside)."""
        function = node.function
        while function.parent is not None:
            parent = self.node(node.path, function.parent)
            if parent is None:
                break
            function = parent.function
        if function.owner is not None:
            owner = function.owner.rsplit(".", 1)[-1]
            return any(fnmatch.fnmatchcase(owner, pattern) for pattern in self.knowledge.test_classes)
        return any(fnmatch.fnmatchcase(function.name, pattern) for pattern in self.knowledge.test_functions)

    def _is_test_module(self, path: str, module: ModuleIndex) -> bool:
        imports = self.knowledge.test_imports
        if any(name.split(".", 1)[0] in imports for name in module.imports):
            return True
        relative = self.layout.relative(path)
        paths, names = self._test_patterns
        return bool(paths.match(relative) or names.match(relative.rsplit("/", 1)[-1]))

    @property
    def _test_patterns(self) -> tuple[re.Pattern, re.Pattern]:
        """`offline.paths` as one pattern for the relative path and one (those without a `/`) for the file name."""
        found = getattr(self, "_test_regexes", None)
        if found is None:
            patterns = self.knowledge.test_paths
            found = self._test_regexes = (_any_of(patterns), _any_of([p for p in patterns if "/" not in p]))
        return found

    def _is_example(self, path: str) -> bool:
        """Under an examples/benchmarks folder of the project, or of the folder the scan runs in (a nested
        project such as `examples/pyproject.toml`)."""
        found = self._examples.get(path)
        if found is None:
            names = [self.layout.relative(path)]
            if self.display is not None:
                shown = self.display(path)
                if not shown.startswith(("/", "..")):
                    names.append(shown)
            found = self._examples[path] = any(self._example_path(name) for name in names)
        return found

    # ------------------------------------------------------------------ contexts

    def _reach(self, seeds: list[int], skip: int = -1, through_cached: bool = True, answering: bool = False,
               entries: bool = False, skip_edges: set[tuple[int, int]] | None = None,
               ) -> tuple[set[int], dict[int, tuple[int, Call | None]]]:
        """Breadth first from `seeds` over every edge (but those of kind `skip`): the nodes reached and, for
        each, the one it was reached from (shortest chains). Without `through_cached`, a cached function is
        reached but what it calls is not (its body runs once per distinct arguments, not per call), and a call
        whose result is memoised (`if key not in cache: cache[key] = make()`) is not followed. With
        `answering`, only calls whose value their caller gives back (`Call.answers`) are followed. With
        `entries` (the seeds are entry points), a queue consumer's calls before its `get` are not followed.
        `skip_edges`: (caller, callee) pairs whose definition edge is not followed."""
        reached = set(seeds)
        parent: dict[int, tuple[int, Call | None]] = {}
        queue = deque(seeds)
        after = {seed: self._after[seed] for seed in seeds if seed in self._after} if entries else {}
        while queue:
            current = queue.popleft()
            if not through_cached and self.nodes[current].cached and current not in seeds:
                continue
            start = after.pop(current, None)  # (a seed is taken off the queue once, before anything it reaches)
            for callee, kind, call in self.nodes[current].edges:
                if not through_cached and call is not None and call.memo:
                    continue
                if start is not None and (call is None or call.line <= start):
                    continue
                if answering and (kind not in _VALUE_EDGES or call is None or not call.answers
                                  or (kind == E_REF and self._ordering_key(current, call, callee))):
                    continue
                if skip_edges and kind == E_DEF and (current, callee) in skip_edges:
                    continue
                if kind != skip and callee not in reached and self.nodes[callee].path not in self.test_modules:
                    reached.add(callee)
                    parent[callee] = (current, call)
                    queue.append(callee)
        return reached, parent

    def _ordering_key(self, node_id: int, call: Call, callee: int) -> bool:
        """Whether `call` hands `callee` over as `key=` (`sorted(drafts, key=score)`): its value orders the items,
        it does not become the result."""
        for position, ref in call.args:
            if position == "key":
                target = self._argument_target(node_id, ref)
                if target is not None and target.kind == "function" and target.node == callee:
                    return True
        return False

    def _chain(self, node_id: int, parent: dict[int, tuple[int, Call | None]]) -> list[tuple[int, Call | None]]:
        """From the seed to `node_id`: (node, the call in it leading to the next node)."""
        chain = [(node_id, None)]
        seen = {node_id}
        current = node_id
        while current in parent:
            caller, call = parent[current]
            if caller in seen:
                break
            seen.add(caller)
            chain.append((caller, call))
            current = caller
        chain.reverse()
        return chain

    def _interactive(self, node_id: int) -> bool:
        """Reached from an interactive entry point (someone waits), not only from queued jobs."""
        interactive = [n for n, e in self.entries.items() if e.kind == INTERACTIVE and n not in self._declared]
        memo = getattr(self, "_interactive_set", None)
        if memo is None:
            memo = self._interactive_set = self._reach(interactive, through_cached=False, entries=True)[0]
        return node_id in memo

    def _streaming_paths(self) -> tuple[set[int], dict[int, tuple[int, Call | None]]]:
        """What the request entry points whose channel to the reader carries tokens as they come reach (with
        the shortest chains): a UI callback, a websocket, a chat bot (entrypoints.yaml `streams`), or a route
        whose request path builds a streaming response (rules/llm001.yaml `streaming_responses`: an SSE or
        `StreamingResponse`, `Response(generator())`, a websocket send). A route that answers with one JSON
        body cannot show a token sooner without a new API. Only through calls whose value their caller gives
        back: a helper whose result the caller parses into a score or feeds to the next step is not on the way
        to the reader."""
        table = self.streaming_table
        builders: set[int] = set()
        if table.entries:
            for node in self.nodes:
                if any(self._builds_stream(node.id, call, table) for call in node.function.calls):
                    builders.add(node.id)
        callers: dict[int, set[int]] = {}
        if builders:
            for node in self.nodes:
                for callee, _, _ in node.edges:
                    callers.setdefault(callee, set()).add(node.id)
        reaching, queue = set(builders), deque(builders)
        while queue:
            for caller in callers.get(queue.popleft(), ()):
                if caller not in reaching:
                    reaching.add(caller)
                    queue.append(caller)
        frameworks = self.knowledge.streaming_frameworks
        seeds = [n for n, entry in self.entries.items() if n not in self._declared and entry.kind == INTERACTIVE
                 and (entry.framework in frameworks or entry.route.startswith("WEBSOCKET ") or n in reaching)]
        return self._reach(seeds, through_cached=False, answering=True, entries=True)

    def _builds_stream(self, node_id: int, call: Call, table) -> bool:
        entry = table.match(self.qualified(node_id, call.ref))
        if entry is None:
            return False
        if not entry.get("generator_argument"):
            return True
        for _, ref in call.args:  # `Response(generate())`: streamed only when handed a generator
            target = self.resolve(node_id, ref[:-2]) if ref.endswith("()") else None
            if target is not None and target.kind == "function" and self.nodes[target.node].function.generator:
                return True
        return False

    def _running_beside_other_work(self) -> set[int]:
        """Nodes that run beside other work on their event loop: every coroutine spawned as a task or
        gathered (entrypoints.yaml `spawn`), with what it calls, up to a coroutine it runs on a loop of its own
        (`asyncio.run(step())` in a thread: nothing else is on that loop unless `step` spawns it)."""
        return self._reach(sorted(self.spawned), skip=E_RUN)[0]

    def _running_beside_requests(self) -> set[int]:
        """Run-once code that runs beside the requests of a server: the tasks its start-up hooks spawn (a
        monitor polling every minute on the serving loop), with what they call. A script's or a CLI's own
        tasks and gathers make that program slower, but no request waits on them. A hook runs once anyway: a
        task it starts through a cached or guarded call (`if self._running: return`, `self._task =
        create_task(...)`) runs beside the requests all the same."""
        started = self._reach(sorted(self.hooks))[0]
        return self._reach(sorted(self.spawned & started))[0]

    def _library_api(self) -> tuple[set[int], dict[int, tuple[int, Call | None]]]:
        """Library code nobody in the project calls whose name says it is a model API operation
        (entrypoints.yaml `library_api`: `chat_completion`, `embed`, `invoke_tool`; a function or a method, not
        a nested def, not a test: `test_file_search` is no API), with what it calls: its callers (a server's
        routing table to a configured provider, the library's users) call it once per request."""
        globs = self.knowledge.api_name_globs
        if not globs:
            return set(), {}
        seeds = [node.id for node in self.nodes if node.function.key and node.function.parent is None
                 and node.id not in self._serving and node.id not in self._once and globs.match(node.function.name)
                 and node.path not in self.test_modules and not self._is_test_function(node)]
        reached, parent = self._reach(seeds, skip=E_HANDED, through_cached=False)
        return reached - self._serving - self._once, parent

    def _declared_entries(self, control_plane) -> set[int]:
        """Entry points declared control plane, and those serving developer tooling or an admin console
        (entrypoints.yaml)."""
        return {n for n, entry in self.entries.items()
                if self.knowledge.dev_tooling(self.layout.relative(self.nodes[n].path), self.nodes[n].label,
                                              entry.route)
                or self.knowledge.admin_console(entry.route)
                or self.knowledge.admin_guarded(self.nodes[n].function.decorators)
                or (control_plane is not None and control_plane(self.nodes[n].path, self.nodes[n].label))}

    def _serve_queues(self) -> bool:
        """Makes each coroutine that takes requests off a queue which a serving path fills an entry point of its
        own, from its `get` on (entrypoints.yaml `handoffs`: a chat bot's message bus); whether any was made.
        A consumer may fill another queue in turn (the replies' outbound bus): repeated until none is new."""
        puts, gets = self._queue_ends()
        if not puts.keys() & gets.keys():
            return False
        served: set[tuple] = set()
        added = False
        while True:
            reached = self._reach([n for n in self.entries if n not in self._declared], through_cached=False,
                                  entries=True)[0]
            fed = [key for key, producers in puts.items() if key not in served and key in gets and producers & reached]
            if not fed:
                return added
            for key in fed:
                served.add(key)
                producer = self.nodes[min(puts[key] & reached)]
                for consumer, line in sorted(gets[key], key=lambda site: site[1]):
                    if consumer not in self.entries:
                        self.entries[consumer] = Entry(consumer, QUEUE_FRAMEWORK, INTERACTIVE,
                                                       route=f"queue put by {producer.label}")
                        self._after[consumer] = line
                        added = True

    def _queue_ends(self) -> tuple[dict[tuple, set[int]], dict[tuple, list[tuple[int, int]]]]:
        """The queues of entrypoints.yaml `handoffs` kept where several functions reach them (an attribute, a
        module-level name): queue -> the functions putting into it; queue -> (a coroutine taking from it, the
        line of that `get`, or of its call of a method returning the `get`)."""
        knowledge = self.knowledge
        puts: dict[tuple, set[int]] = {}
        gets: dict[tuple, list[tuple[int, int]]] = {}
        for node, call in self._queue_calls(knowledge.handoff_puts, async_only=False):
            puts.setdefault(self._queue_key(node, call), set()).add(node.id)
        puts.pop(None, None)
        if not puts:  # (a `get` is as common as a dict's: looked for only where something is put)
            return puts, gets
        for node, call in self._queue_calls(knowledge.handoff_gets, async_only=True):
            key = self._queue_key(node, call)
            if key not in puts:
                continue
            sites = gets.setdefault(key, [])
            sites.append((node.id, call.line))
            if call.answers:  # `return await self.inbound.get()`: its callers take the item
                sites.extend((caller, site.line) for caller, kind, site in self._caller_map().get(node.id, ())
                             if site is not None and kind in (E_CALL, E_AWAIT) and self.nodes[caller].function.is_async)
        return puts, gets

    def _queue_calls(self, patterns, async_only: bool):
        """(node, call) for each call outside the tests that `patterns` names (in a coroutine, with `async_only`)."""
        if not patterns:
            return
        methods = patterns.last_names()
        named = not any("*" in method for method in methods)  # (else any call may be one)
        for node in self.nodes:
            if node.path in self.test_modules or (async_only and not node.function.is_async):
                continue
            for call in node.function.calls:
                if call.kind in (CALL, AWAIT) and (not named or call.text.rsplit(".", 1)[-1] in methods) \
                        and patterns.match(self.qualified(node.id, call.ref)):
                    yield node, call

    def _queue_key(self, node: Node, call: Call) -> tuple | None:
        """Which queue a call of `<queue>.put` or `.get` reaches, by where it is kept: ("attribute", the class that
        sets it, name) or ("module", path, name); None for a local or a parameter (not shared by its ref)."""
        name, _, method = call.text.partition(".")
        value = node.module.bindings.get(name) if method and "." not in method else None
        if value is not None and value.endswith(CALLED) and call.ref == f"{value}.{method}":
            return ("module", node.path, name)  # a queue made here (the index reads the name as the value it holds)
        root, _, rest = (call.ref or "").partition(":")
        tokens = _tokens(rest)
        if root not in ("S", "C", "M", "I") and not (root.startswith("R") and root[1:].isdigit()):
            return None
        if len(tokens) < 2 or tokens[-2] == CALLED or tokens[-2].startswith("["):
            return None
        name, holder = tokens[-2], tokens[:-2]
        if root == "M" and not holder:
            return ("module", node.path, name)
        target = self.resolve(node.id, f"{root}:{_joined(holder)}") if holder or root in ("S", "C") else None
        if target is None:
            return None
        if target.kind == "module":
            return ("module", target.path, name)
        if target.kind in ("instance", "class"):
            found = self._attribute(target.klass, name)
            return ("attribute", found[1] if found is not None else target.klass, name)
        return None

    def _is_setup(self, node_id: int) -> bool:
        return self.setup_functions.match(self.nodes[node_id].function.name) is not None

    def _blocking(self) -> dict[int, tuple[Call, int | None, Blocking | None]]:
        """For each sync project function that blocks: (the call, the next function or None, the blocking
        library call when direct), found backwards from the direct ones over sync calls. A step under a
        switch the caller leaves off (`if synthesize:` with `synthesize=False` by default) is not followed;
        a function that blocks without a switch is preferred to one that needs it on."""
        if self._blocks is not None:
            return self._blocks
        blocks: dict[int, tuple[Call, int | None, Blocking | None]] = {}
        guards: dict[int, tuple[str, ...]] = {}  # the switches each one's blocking step needs on
        callers: dict[int, list[tuple[int, Call]]] = {}
        queue: deque[int] = deque()
        replay = self._replay
        for node in self.nodes:
            function = node.function
            if function.is_async or node.cached or not function.key:
                continue
            for callee, edge, call in node.edges:
                if edge == E_CALL and call is not None and not call.lazy and (
                        call.iterated or not self.nodes[callee].function.generator):
                    callers.setdefault(callee, []).append((node.id, call))
            stored = replay.direct_blocking(self, node) if replay is not None and replay.clean(node.path) else None
            if stored is not None:
                call = stored[0]
                found = self.blocking_call(node.id, call) if call is not None else None
            else:
                call, found = self._direct_blocking(node)
            self._direct[node.id] = call
            if call is not None and found is not None:
                blocks[node.id] = (call, None, found)
                guards[node.id] = call.guards
                queue.append(node.id)
        terminal = {node_id: blocks[node_id][2] for node_id in queue}
        while queue:
            current = queue.popleft()
            for caller, call in callers.get(current, ()):
                if terminal[current].file_io and self._is_setup(caller):
                    continue
                needs = self._guards_through(caller, call, current, guards[current])
                if needs is None:
                    continue  # the call leaves the step's switch off
                known = blocks.get(caller)
                if known is None or (guards[caller] and not needs):
                    blocks[caller] = (call, current, None)
                    guards[caller] = needs
                    terminal[caller] = terminal[current]
                    queue.append(caller)
        self._blocks = blocks
        self._guards = guards
        return blocks

    def _direct_blocking(self, node: Node) -> tuple[Call | None, Blocking | None]:
        """The blocking library call a sync function makes itself (the first not under a switch, else the first
        under one), with what it calls; (None, None) when it makes none."""
        chosen: tuple[Call | None, Blocking | None] = (None, None)
        setup = self._is_setup(node.id)
        uses = self.parameter_uses
        for call in node.function.calls:
            found = self.blocking_call(node.id, call)
            if found is not None and not (found.file_io and (setup or (call.shipped and not found.writes))) and \
                    not self.suppressed(node.path, "LLM004", (call.line, call.stmt_line)):
                if chosen[0] is None or (chosen[0].guards and not call.guards):
                    chosen = (call, found)
                if not call.guards:
                    break
        if self.parameter_uses != uses:  # what a parameter holds depends on other modules' calls: never replayed
            self.direct_through_parameters.add(node.id)
        return chosen

    def _guards_through(self, caller: int, call: Call, callee: int, needs: tuple[str, ...]) -> tuple[str, ...] | None:
        """What the caller's blocking through `call` still depends on: its own switches around the call, and
        the callee's `self.` switches (decided by the object: `__init__` turns them into its parameters);
        None where the call turns a switch off."""
        switches = tuple(n for n in needs if not n.startswith("self."))
        if switches and self.switched_off(call, callee, switches):
            return None
        out = list(call.guards)
        for need in switches:  # a type the argument must have: the caller's parameter it hands on must have it
            if need.startswith(TYPE_GUARD):
                handed = _handed_on(call, need)
                if handed is not None:
                    out.append(handed)
        inner, outer = self.nodes[callee].function, self.nodes[caller].function
        if outer.owner is not None and outer.owner == inner.owner:  # `self.m()` within the class
            for name in needs:
                if name.startswith("self."):
                    attribute = name[len("self."):]
                    out.append(outer.switch_attributes.get(attribute, name) if outer.name == "__init__" else name)
        return tuple(dict.fromkeys(out))

    def switched_off(self, call: Call, callee: int, guards: tuple[str, ...]) -> bool:
        """Whether `call` turns one of the callee's `guards` off: it passes the switch a literal False / None /
        0 / "", or leaves out a switch whose default is off (passing neither it, nor `*args`/`**kwargs`). A
        negated guard (`!media_id`: after `if media_id: return`) is off where the call names the switch with
        a value of its own (`Message(media_id=key)`): the early return is taken."""
        switches = self.nodes[callee].function.switches
        for guard in guards:
            if guard.startswith(TYPE_GUARD):
                if _never_of_type(call, guard):
                    return True
                continue
            negated = guard.startswith("!")
            name = guard[1:] if negated else guard
            found = switches.get(name)
            if found is None:
                continue
            position, default_on = found
            falsy = name in call.falsy or (position >= 0 and str(position) in call.falsy)
            if negated:
                named = name in call.keywords or (position >= 0 and 0 <= call.positional and call.positional > position)
                if named and not falsy:
                    return True
                continue
            if falsy:
                return True
            passed = name in call.keywords or "**" in call.keywords or call.positional < 0 or \
                (position >= 0 and call.positional > position)
            if not passed and not default_on:
                return True
        return False

    def blocking_chain_for(self, call: Call, callee: int) -> list[tuple[int, Call, Blocking]] | None:
        """`blocking_chain(callee)` as `call` runs it: None where the call leaves the step's switch off."""
        chain = self.blocking_chain(callee)
        switches = tuple(n for n in self._guards.get(callee, ()) if not n.startswith("self."))
        if chain and switches and self.switched_off(call, callee, switches):
            return None
        return chain


# ----------------------------------------------------------------------------- argument types

# classes whose instances are never instances of another class but these (`bool` is an `int`), and the classes
# an instance of them may be one of anyway (`str` is a `Sequence`)
_BUILTIN_TYPES = frozenset({"str", "bytes", "bytearray", "int", "float", "complex", "bool", "None", "list", "dict",
                            "tuple", "set", "frozenset"})
_ABSTRACT_TYPES = frozenset({"object", "Sequence", "MutableSequence", "Iterable", "Iterator", "Collection",
                             "Container", "Sized", "Hashable", "Reversible", "Mapping", "MutableMapping",
                             "AbstractSet", "MutableSet", "ByteString", "Buffer", "Number", "Complex", "Real",
                             "Rational", "Integral", "SupportsInt", "SupportsFloat", "SupportsIndex", "SupportsBytes"})


def _arguments_for(call: Call, parameter: str, position: str) -> list[str | None]:
    """What `call` passes to a parameter at `position` ("0", "k" keyword-only, "*N" the `*args` from N on), one
    entry of `Call.types` per argument (None: nothing evident); [] where it passes nothing there."""
    passed = dict(entry.split("=", 1) for entry in call.types)
    if position.startswith("*"):
        start = int(position[1:])
        if call.positional >= 0:
            return [passed.get(str(index)) for index in range(start, call.positional)]
        star = next((int(key[1:]) for key in passed if key.startswith("*")), None)
        if star is None or star < start:
            return [None]
        return [passed.get(str(index)) for index in range(start, star)] + [passed[f"*{star}"]]
    if parameter in call.keywords:
        return [passed.get(parameter)]
    if position != "k" and (call.positional < 0 or call.positional > int(position)):
        return [passed.get(position) if call.positional >= 0 else None]
    return [None] if "**" in call.keywords else []


def _never_of(argument: str | None, types: set[str]) -> bool:
    """An argument evidently, or by its annotation, of built-in types (`Call.types`: "str|None", "str@message:0")
    none of which is one of `types`."""
    argument = argument.split("@", 1)[0] if argument is not None else ""
    if not argument or types & _ABSTRACT_TYPES:
        return False
    return all(kind in _BUILTIN_TYPES and kind not in types and not (kind == "bool" and "int" in types)
               for kind in argument.split("|"))


def _never_of_type(call: Call, guard: str) -> bool:
    """Whether no argument `call` passes can take an `isinstance` branch (`isinstance:item:0:Path`): each is
    evidently of another type (a `str` is never a `Path`), or there are none (an empty `*args`)."""
    _, parameter, position, wanted = guard.split(":", 3)
    arguments = _arguments_for(call, parameter, position)
    if not arguments:
        return position.startswith("*")
    types = set(wanted.split("|"))
    return all(_never_of(argument, types) for argument in arguments)


def _handed_on(call: Call, guard: str) -> str | None:
    """The caller's own guard where `call` hands the branch's argument on from one parameter of the caller
    (`User(*content_items)`, `parse(path)`), its other arguments never of the type; None otherwise."""
    _, parameter, position, wanted = guard.split(":", 3)
    types = set(wanted.split("|"))
    handed = []
    for argument in _arguments_for(call, parameter, position):
        if _never_of(argument, types):
            continue
        if argument is None or "@" not in argument:
            return None
        handed.append(argument.split("@", 1)[1])
    return f"{TYPE_GUARD}{handed[0]}:{wanted}" if len(handed) == 1 else None


# ----------------------------------------------------------------------------- references


def _calls_at(node: Node, line: int, column: int) -> list[Call]:
    return [call for call in node.function.calls if call.line == line and call.col == column]


def _one_of(targets: list[Target | None]) -> Target | None:
    """The targets that resolved, as one: itself when they agree, else an `any` of them."""
    members: dict[Target, None] = {}
    for target in targets:
        if target is not None:
            members.update(dict.fromkeys(target.members if target.kind == "any" else (target,)))
    if not members:
        return None
    return next(iter(members)) if len(members) == 1 else Target("any", members=tuple(members))


def _route(decorator: str, path: str) -> str:
    """`POST /chat` for `@app.post("/chat")`; the path alone for `@app.route(...)` / `api_route`."""
    method = decorator.rsplit(".", 1)[-1]
    return path if method in ("route", "api_route", "websocket_route", "custom_route") else f"{method.upper()} {path}"


def _any_of(patterns) -> re.Pattern:
    """One regular expression matching what any of the glob `patterns` matches (`fnmatch.fnmatchcase`)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns) or "(?!)")


def _joined(tokens: list[str]) -> str:
    """The reference text `_tokens` splits: ["a", "b", "()", "c"] -> `a.b().c`."""
    out = ""
    for token in tokens:
        out += token if token == CALLED or token.startswith("[") else (f".{token}" if out else token)
    return out


def _writes(call: Call, callee: str) -> bool:
    """Whether a file call writes (`write_text`, `open(path, "a")`, `path.open("w")`, whose mode is its first
    argument): it is told the write fix, and a file shipped with the code is read, never written, so a path
    built from `__file__` that is written names the program's data."""
    if callee.endswith((".write_text", ".write_bytes")):
        return True
    mode = call.literal if callee == "pathlib.Path.open" else call.mode
    return bool(mode) and any(flag in mode for flag in "wax+")


def _tokens(dotted: str) -> list[str]:
    """`a.b().c` -> ["a", "b", "()", "c"]; `f()[1]` -> ["f", "()", "[1]"]."""
    out = []
    for part in dotted.split(".") if dotted else []:
        suffixes = []
        while part.endswith(CALLED) or (part.endswith("]") and "[" in part):
            if part.endswith(CALLED):
                part = part[: -len(CALLED)]
                suffixes.append(CALLED)
            else:
                start = part.rindex("[")
                suffixes.append(part[start:])
                part = part[:start]
        if part:
            out.append(part)
        out.extend(reversed(suffixes))
    return out


def _argument_names(parameters: list[str], parameter: str) -> set[str] | None:
    """How a call passes `parameter` of a function whose `Function.parameters` are `parameters`: by keyword, and
    by position ("0", "1"...) when it comes before the keyword-only marker "*"; None when there is no such one."""
    if parameter not in parameters:
        return None
    index = parameters.index(parameter)
    keyword_only = parameters.index("*") if "*" in parameters else len(parameters)
    return {parameter, str(index)} if index < keyword_only else {parameter}


def _leading_names(tokens: list[str]) -> list[str]:
    out = []
    for token in tokens:
        if token == CALLED:
            break
        out.append(token)
    return out


def _skip_names(tokens: list[str], count: int) -> list[str]:
    return tokens[count:]
