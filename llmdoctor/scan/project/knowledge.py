"""The entry-point knowledge (`rules/entrypoints.yaml` and `entrypoints:` in the user's table files), validated
into matchers the project model asks: is this decorator a request route, this call a registration, this base
class a handler, this module test code?"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from dataclasses import dataclass, field

from llmdoctor.errors import UserError

KNOWLEDGE_STEM = "entrypoints"
INTERACTIVE = "interactive"
WORKER = "worker"
ENTRY_KINDS = (INTERACTIVE, WORKER)
FAMILY_KEYS = {"framework", "kind", "decorators", "registrations", "bases", "class_decorators", "module_code",
               "streams"}
RUN_ONCE_KEYS = {"decorators", "registrations", "names", "name_globs", "events", "spawn", "bases",
                 "calls_now", "enters"}
OFFLINE_KEYS = {"imports", "paths", "functions", "classes", "example_paths"}
SCHEDULED_KEYS = {"decorators", "registrations"}
LIBRARY_API_KEYS = {"name_globs"}
DEV_TOOLING_KEYS = {"route_segments", "name_words"}
ADMIN_CONSOLE_KEYS = {"route_segments", "guards"}
REPLIES_KEYS = {"methods"}
HANDOFF_KEYS = {"put", "get"}
PROBE_KEYS = {"route_segments"}
ONE_CLIENT_KEYS = {"framework", "stdio", "network"}
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins"}
ROUTE_METHODS = frozenset({"get", "post", "put", "delete", "patch", "route", "api_route", "websocket", "head",
                           "options"})


class Patterns:
    """Qualified names, exact or with `*` globs (a glob may span dots); answers are memoized."""

    def __init__(self, names=()) -> None:
        self.exact: set[str] = set()
        self.globs: list[str] = []
        self._regex: re.Pattern | None = None
        self._memo: dict[str, bool] = {}
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        (self.globs.append if "*" in name else self.exact.add)(name)
        self._regex = None
        self._memo.clear()

    def match(self, qualified: str | None) -> bool:
        if not qualified:
            return False
        found = self._memo.get(qualified)
        if found is None:
            if self._regex is None and self.globs:
                self._regex = re.compile("|".join(fnmatch.translate(g) for g in self.globs))
            found = qualified in self.exact or (self._regex is not None and self._regex.match(qualified) is not None)
            self._memo[qualified] = found
        return found

    def __getstate__(self) -> dict:  # (pickled with the catalog: the compiled pattern is rebuilt on demand)
        return {"exact": self.exact, "globs": self.globs, "_regex": None, "_memo": {}}

    def last_names(self) -> set[str]:
        """The last dotted part of each name (`put` of `asyncio.Queue.put`): what a call's text must end with."""
        return {name.rsplit(".", 1)[-1] for name in (*self.exact, *self.globs)}

    def __bool__(self) -> bool:
        return bool(self.exact or self.globs)


@dataclass
class Registration:
    """A call that hands a callable (or a class) to a framework: `app.add_api_route("/x", handler)`."""

    calls: Patterns
    argument: int | None
    keywords: tuple[str, ...]
    methods: frozenset[str] = frozenset()  # when the callable is a class (or its instance): its handler methods
    framework: str = ""
    kind: str = INTERACTIVE
    in_caller: bool = False  # runs the target there and then (`asyncio.run`): it runs where its caller runs
    serving_loop: bool = False  # a server's start-up hook: it runs on the loop that then serves requests
    # method names only this framework uses: `router.add_api_route("/x", handler)` on a receiver of unknown type
    # (a router taken from a parameter) registers too, when its first argument is a literal route
    unresolved_methods: frozenset[str] = frozenset()
    # runs the target only when the event loop it is handed was made by one of these (`new_event_loop()`, a
    # loop some thread runs for itself): (argument position, keyword, loop constructors)
    loop: tuple[int, str, Patterns] | None = None
    # registers a periodic job only when the call passes a trigger there (argument position, keyword) that is
    # not one of these literals (APScheduler's `add_job(f)` and `add_job(f, "date")` run `f` once)
    trigger: tuple[int, str, frozenset[str]] | None = None


@dataclass
class ClassEntry:
    """Subclasses of `types` (or classes decorated by one of them) serve these methods ("*": every public one)."""

    types: Patterns
    methods: frozenset[str]
    framework: str
    kind: str


@dataclass
class OneClient:
    """How a framework's server is started: on stdio, for the one client that spawned it, or on a network
    transport, for several (entrypoints.yaml `one_client`)."""

    framework: str
    # the calls that start it on stdio, each with where it may name its transport (position, keyword, the
    # literals meaning stdio; None: it names none)
    stdio: tuple[tuple[Patterns, tuple[int, str, frozenset[str]] | None], ...]
    network: Patterns

    def last_names(self) -> set[str]:
        return {name for calls, _ in self.stdio for name in calls.last_names()} | self.network.last_names()

    def started(self, call, qualified: str) -> str | None:
        """"stdio" or "network" when `call` (a qualified library call) starts the server, else None. A
        transport named by a literal outside the stdio ones, or not by a literal (`transport=args.transport`), is
        taken as a network one."""
        if self.network.match(qualified):
            return "network"
        for calls, transport in self.stdio:
            if not calls.match(qualified):
                continue
            if transport is None:
                return "stdio"
            position, keyword, stdio = transport
            given, named = call.argument(position, keyword)
            return "stdio" if not given or named in stdio else "network"  # not given: stdio, the default
        return None


@dataclass
class EntryKnowledge:
    decorators: list[tuple[Patterns, str, str]] = field(default_factory=list)  # (names, framework, kind)
    registrations: list[Registration] = field(default_factory=list)
    bases: list[ClassEntry] = field(default_factory=list)
    class_decorators: list[ClassEntry] = field(default_factory=list)
    module_code: list[tuple[str, str, str]] = field(default_factory=list)  # (import prefix, framework, kind)
    once_decorators: Patterns = field(default_factory=Patterns)
    hook_decorators: Patterns = field(default_factory=Patterns)  # ... of them, a server's start-up hooks
    once_registrations: list[Registration] = field(default_factory=list)
    once_names: frozenset[str] = frozenset()
    once_events: frozenset[str] = frozenset()  # a bot's connection events (`on_ready`): start-up hooks, not requests
    once_name_globs: Patterns = field(default_factory=Patterns)
    spawn: Patterns = field(default_factory=Patterns)
    scheduled_decorators: Patterns = field(default_factory=Patterns)  # a periodic job (`@repeat_every(seconds=60)`)
    scheduled_registrations: list[Registration] = field(default_factory=list)  # `scheduler.add_job(f, "cron")`
    once_bases: list[ClassEntry] = field(default_factory=list)
    calls_now: frozenset[str] = frozenset()  # library calls that run the callable they are handed, there and then
    enters: Patterns = field(default_factory=Patterns)  # library calls that enter the context manager they are handed
    test_imports: frozenset[str] = frozenset()
    test_paths: tuple[str, ...] = ()
    test_functions: tuple[str, ...] = ()
    test_classes: tuple[str, ...] = ()
    example_paths: tuple[str, ...] = ()  # examples, benchmarks: offline unless an entry point reaches them
    api_name_globs: Patterns = field(default_factory=Patterns)  # a model API operation (`chat_completion`)
    streaming_frameworks: set[str] = field(default_factory=set)  # entry points whose channel carries tokens
    dev_route_segments: frozenset[str] = frozenset()  # a route with one of them serves developer tooling
    dev_name_words: frozenset[str] = frozenset()  # ... as does an entry point in a module or class so named
    admin_route_segments: frozenset[str] = frozenset()  # a route with one of them serves an admin console
    admin_guards: Patterns = field(default_factory=Patterns)  # ... or a decorator so named on the entry point
    probe_route_segments: frozenset[str] = frozenset()  # a route with one of them answers a health probe
    reply_methods: frozenset[str] = frozenset()  # calls that hand the reader an answer (`ws.send_text`, `reply_text`)
    handoff_puts: Patterns = field(default_factory=Patterns)  # a queue handing requests to a consumer: its put
    handoff_gets: Patterns = field(default_factory=Patterns)  # ... and its get
    one_client: list[OneClient] = field(default_factory=list)  # servers that may serve only one client
    _registering: dict[str, tuple[tuple[Registration, ...], ...]] = field(default_factory=dict, repr=False,
                                                                        compare=False)

    def registering(self, qualified: str) -> tuple[tuple[Registration, ...], ...]:
        """The request, run-once and scheduled registrations whose calls name `qualified` (memoised: the link
        asks for every call of the program)."""
        found = self._registering.get(qualified)
        if found is None:
            found = self._registering[qualified] = tuple(
                tuple(r for r in kinds if r.calls.match(qualified))
                for kinds in (self.registrations, self.once_registrations, self.scheduled_registrations))
        return found

    def request_decorator(self, qualified: str | None) -> tuple[str, str] | None:
        """(framework, kind) when a decorator with this qualified callee makes a request entry point."""
        for names, framework, kind in self.decorators:
            if names.match(qualified):
                return framework, kind
        return None

    def dev_tooling(self, path: str, function: str, route: str) -> bool:
        """Whether an entry point serves developer tooling: its route has a segment such as `dev`
        (`/dev/apps/{app}/tests`), or its module or qualified name has a word such as `dev` (`dev_server.py`,
        `routers/dev.py`, `DevServer._register_dev_endpoints.create_test`)."""
        if _has_segment(route, self.dev_route_segments):
            return True
        if not self.dev_name_words:
            return False
        names = [*path.removesuffix(".py").split("/"), *function.split(".")]
        return any(word.lower() in self.dev_name_words for name in names for word in _words(name))

    def admin_console(self, route: str) -> bool:
        """Whether an entry point's route serves an admin console: it has a segment such as `admin`
        (`/api/admin/users`)."""
        return _has_segment(route, self.admin_route_segments)

    def probe(self, route: str) -> bool:
        """Whether an entry point's route answers a health probe (`GET /healthz`)."""
        return _has_segment(route, self.probe_route_segments)

    def admin_guarded(self, decorators) -> bool:
        """Whether a decorator lets only administrators in (`@is_admin()`, `@admin_required`,
        `@commands.is_owner()`), by the last part of its name."""
        return bool(self.admin_guards) and any(
            self.admin_guards.match(decorator.text.rsplit(".", 1)[-1].lower()) for decorator in decorators)


def _has_segment(route: str, segments: frozenset[str]) -> bool:
    """Whether a route (`GET /api/admin/users`) has one of `segments` among the segments of its path."""
    return bool(segments) and any(segment.lower() in segments for segment in route.rsplit(" ", 1)[-1].split("/"))


def _words(name: str) -> list[str]:
    """`_register_dev_endpoints` -> register, dev, endpoints; `DevServer` -> Dev, Server."""
    return [word for part in re.split(r"[_\-]+", name) for word in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", part)]


@dataclass(frozen=True)
class Interest:
    """What the index must keep of a call to the standard library or a builtin (the rest cannot matter to
    any rule or entry point): the names the knowledge mentions."""

    roots: frozenset[str]  # top-level modules some table or entry point names (of the stdlib, the index keeps these)
    builtins: frozenset[str]  # builtins some table names (`open`, `input`)
    replies: frozenset[str] = frozenset()  # the methods that hand the reader an answer (entrypoints.yaml `replies`)
    # the keywords that hand a generation call its prompt (the SDK tables' `payload_kwargs`: `messages`, `prompt`)
    prompt_keywords: frozenset[str] = frozenset()
    # the calls that run the coroutine they are handed on a loop of their own (`asyncio.run`, `*.run_until_complete`)
    runners: Patterns | None = None
    enters: Patterns | None = None  # the calls that enter the context manager they are handed (`enter_context`)
    # what a module that calls a model holds: an import of an LLM SDK or framework (the SDK tables' `imports`,
    # anywhere in the module), or a model API's HTTP path in its text (sdk-logging.yaml `http_paths`)
    model_imports: tuple[str, ...] = ()
    model_paths: tuple[str, ...] = ()
    peer_codes: tuple[str, ...] = ()  # other linters' codes for a rule's check (rule files' `peer_codes`)
    # sdk-logging.yaml's LoggingKnowledge: which of its parameters a function logs (Function.logs)
    logging: object = field(default=None, compare=False)

    def imports_model(self, node: ast.Import | ast.ImportFrom) -> bool:
        """`import openai`, `from google import genai`, `from langchain_core.messages import ...`."""
        if type(node) is ast.Import:
            names = [alias.name for alias in node.names]
        elif node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            return False
        return any(name == prefix or name.startswith(prefix + ".") for name in names for prefix in self.model_imports)

    def names_model_path(self, source: str) -> bool:
        return any(path in source for path in self.model_paths)

    def names_peer_code(self, source: str) -> bool:
        """Whether the text holds a peer linter's code, which a `# noqa` may name to silence a rule's finding."""
        return any(code in source for code in self.peer_codes)

    def runs_coroutine(self, ref: str | None) -> bool:
        """Whether a library call (`I:asyncio.new_event_loop().run_until_complete`) is one of `runners`."""
        return _library_call_in(ref, self.runners)

    def enters_context(self, ref: str | None) -> bool:
        """Whether a library call (`I:contextlib.AsyncExitStack().enter_async_context`) is one of `enters`."""
        return _library_call_in(ref, self.enters)

    def keeps(self, ref: str) -> bool:
        if ref.startswith("B:"):
            return ref[2:].split(".", 1)[0].split("(", 1)[0] in self.builtins
        if ref.startswith("I:"):
            root = ref[2:].split(".", 1)[0].split("(", 1)[0]
            return root not in _STDLIB or root in self.roots
        return True


def _library_call_in(ref: str | None, names: Patterns | None) -> bool:
    return bool(ref) and ref.startswith("I:") and names is not None and names.match(ref[2:].replace("()", ""))


def index_interest(catalog) -> Interest:
    found = catalog.memo.get("index-interest")
    if found is None:
        from llmdoctor.scan.rules.logging_knowledge import logging_knowledge
        from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge

        names: set[str] = set()
        for table in catalog.tables.values():
            names.update(table.names())
        knowledge = entry_knowledge(catalog)
        registrations = (*knowledge.registrations, *knowledge.once_registrations, *knowledge.scheduled_registrations)
        for patterns in [*(p for p, _, _ in knowledge.decorators), knowledge.once_decorators, knowledge.spawn,
                         knowledge.scheduled_decorators, knowledge.handoff_puts, knowledge.handoff_gets,
                         *(r.calls for r in registrations)]:
            names.update(patterns.exact)
            names.update(patterns.globs)
        names.update(sdk_knowledge(catalog).calls)
        roots = {name.split(".", 1)[0] for name in names}
        builtins = {name.split(".")[1] for name in names if name.startswith("builtins.") and "." in name}
        prompts = frozenset(keyword for method in sdk_knowledge(catalog).calls.values()
                            if method.kind == "generation" for keyword in method.payload_kwargs)
        runners = Patterns(name for registration in knowledge.once_registrations
                           if registration.in_caller and registration.loop is None and registration.argument == 0
                           for name in (*registration.calls.exact, *registration.calls.globs))
        found = catalog.memo["index-interest"] = Interest(
            frozenset(roots), frozenset(builtins), knowledge.reply_methods, prompts, runners, knowledge.enters,
            model_imports=tuple(sorted(sdk_knowledge(catalog).imports)),
            model_paths=tuple(logging_knowledge(catalog).http_paths),
            peer_codes=tuple(sorted({code for spec in catalog.rules.values() for code in spec.peer_codes})),
            logging=logging_knowledge(catalog))
    return found


def entry_knowledge(catalog) -> EntryKnowledge:
    found = catalog.memo.get(KNOWLEDGE_STEM)
    if found is None:
        docs = [(stem, doc) for stem, doc in sorted(catalog.knowledge.items())
                if isinstance(doc, dict) and isinstance(doc.get("entrypoints"), dict)]
        found = catalog.memo[KNOWLEDGE_STEM] = build(docs)
    return found


def build(docs: list[tuple[str, dict]]) -> EntryKnowledge:
    knowledge = EntryKnowledge()
    once_names: set[str] = set()
    once_events: set[str] = set()
    calls_now: set[str] = set()
    test_imports: set[str] = set()
    test_paths: list[str] = []
    test_functions: list[str] = []
    test_classes: list[str] = []
    example_paths: list[str] = []
    dev_segments: set[str] = set()
    dev_words: set[str] = set()
    admin_segments: set[str] = set()
    probe_segments: set[str] = set()
    reply_methods: set[str] = set()
    for stem, doc in docs:
        data = doc["entrypoints"]
        where = f"rules file {stem}.yaml: key 'entrypoints"
        _keys(data, {"request", "run_once", "scheduled", "offline", "library_api", "dev_tooling",
                     "admin_console", "probes", "replies", "handoffs", "one_client"}, where + "'")
        for index, family in enumerate(_list(data.get("request"), f"{where}.request'")):
            _family(knowledge, family, f"{where}.request[{index}]")
        once = data.get("run_once") or {}
        _keys(once, RUN_ONCE_KEYS, where + ".run_once'")
        for entry in _list(once.get("decorators"), f"{where}.run_once.decorators'"):
            hook = isinstance(entry, dict) and entry.get("serving_loop", False)
            if not isinstance(hook, bool):
                raise UserError(f"{where}.run_once.decorators': 'serving_loop' must be true or false")
            for name in _decorator_names(entry, f"{where}.run_once.decorators'", hooks=True):
                knowledge.once_decorators.add(name)
                if hook:
                    knowledge.hook_decorators.add(name)
        for i, entry in enumerate(_list(once.get("registrations"), f"{where}.run_once.registrations'")):
            knowledge.once_registrations.append(_registration(entry, f"{where}.run_once.registrations[{i}]'",
                                                              "run-once", INTERACTIVE))
        once_names.update(_strings(once.get("names"), f"{where}.run_once.names'"))
        once_events.update(_strings(once.get("events"), f"{where}.run_once.events'"))
        for glob in _strings(once.get("name_globs"), f"{where}.run_once.name_globs'"):
            knowledge.once_name_globs.add(glob if "*" in glob else f"{glob}*")
        for name in _strings(once.get("spawn"), f"{where}.run_once.spawn'"):
            knowledge.spawn.add(name)
        for i, entry in enumerate(_list(once.get("bases"), f"{where}.run_once.bases'")):
            label = f"{where}.run_once.bases[{i}]'"
            if not isinstance(entry, dict):
                raise UserError(f"{label}: must be a mapping with types and methods")
            _keys(entry, {"types", "methods"}, label)
            types, methods = Patterns(_strings(entry.get("types"), label)), frozenset(_strings(entry.get("methods"), label))
            if not types or not methods:
                raise UserError(f"{label}: needs types and methods")
            knowledge.once_bases.append(ClassEntry(types, methods, "run-once", INTERACTIVE))
        calls_now.update(_strings(once.get("calls_now"), f"{where}.run_once.calls_now'"))
        for name in _strings(once.get("enters"), f"{where}.run_once.enters'"):
            knowledge.enters.add(name)
        scheduled = data.get("scheduled") or {}
        _keys(scheduled, SCHEDULED_KEYS, where + ".scheduled'")
        for entry in _list(scheduled.get("decorators"), f"{where}.scheduled.decorators'"):
            for name in _decorator_names(entry, f"{where}.scheduled.decorators'"):
                knowledge.scheduled_decorators.add(name)
        for i, entry in enumerate(_list(scheduled.get("registrations"), f"{where}.scheduled.registrations'")):
            knowledge.scheduled_registrations.append(
                _registration(entry, f"{where}.scheduled.registrations[{i}]'", "scheduled", INTERACTIVE))
        offline = data.get("offline") or {}
        _keys(offline, OFFLINE_KEYS, where + ".offline'")
        test_imports.update(_strings(offline.get("imports"), f"{where}.offline.imports'"))
        test_paths.extend(_strings(offline.get("paths"), f"{where}.offline.paths'"))
        example_paths.extend(_strings(offline.get("example_paths"), f"{where}.offline.example_paths'"))
        test_functions.extend(_strings(offline.get("functions"), f"{where}.offline.functions'"))
        test_classes.extend(_strings(offline.get("classes"), f"{where}.offline.classes'"))
        api = data.get("library_api") or {}
        _keys(api, LIBRARY_API_KEYS, where + ".library_api'")
        for glob in _strings(api.get("name_globs"), f"{where}.library_api.name_globs'"):
            knowledge.api_name_globs.add(glob)
        dev = data.get("dev_tooling") or {}
        _keys(dev, DEV_TOOLING_KEYS, where + ".dev_tooling'")
        dev_segments.update(s.lower() for s in _strings(dev.get("route_segments"), f"{where}.dev_tooling.route_segments'"))
        dev_words.update(s.lower() for s in _strings(dev.get("name_words"), f"{where}.dev_tooling.name_words'"))
        admin = data.get("admin_console") or {}
        _keys(admin, ADMIN_CONSOLE_KEYS, where + ".admin_console'")
        admin_segments.update(
            s.lower() for s in _strings(admin.get("route_segments"), f"{where}.admin_console.route_segments'"))
        for glob in _strings(admin.get("guards"), f"{where}.admin_console.guards'"):
            knowledge.admin_guards.add(glob.lower())
        probes = data.get("probes") or {}
        _keys(probes, PROBE_KEYS, where + ".probes'")
        probe_segments.update(
            s.lower() for s in _strings(probes.get("route_segments"), f"{where}.probes.route_segments'"))
        replies = data.get("replies") or {}
        _keys(replies, REPLIES_KEYS, where + ".replies'")
        reply_methods.update(_strings(replies.get("methods"), f"{where}.replies.methods'"))
        handoffs = data.get("handoffs") or {}
        _keys(handoffs, HANDOFF_KEYS, where + ".handoffs'")
        for name in _strings(handoffs.get("put"), f"{where}.handoffs.put'"):
            knowledge.handoff_puts.add(name)
        for name in _strings(handoffs.get("get"), f"{where}.handoffs.get'"):
            knowledge.handoff_gets.add(name)
        for i, entry in enumerate(_list(data.get("one_client"), f"{where}.one_client'")):
            knowledge.one_client.append(_one_client(entry, f"{where}.one_client[{i}]"))
    knowledge.reply_methods = frozenset(reply_methods)
    knowledge.dev_route_segments = frozenset(dev_segments)
    knowledge.dev_name_words = frozenset(dev_words)
    knowledge.admin_route_segments = frozenset(admin_segments)
    knowledge.probe_route_segments = frozenset(probe_segments)
    knowledge.once_names = frozenset(once_names)
    knowledge.once_events = frozenset(once_events)
    knowledge.calls_now = frozenset(calls_now)
    knowledge.test_imports = frozenset(test_imports)
    knowledge.test_paths = tuple(test_paths)
    knowledge.example_paths = tuple(example_paths)
    knowledge.test_functions = tuple(test_functions)
    knowledge.test_classes = tuple(test_classes)
    return knowledge


def _family(knowledge: EntryKnowledge, family, where: str) -> None:
    if not isinstance(family, dict):
        raise UserError(f"{where}': must be a mapping with framework, kind and what marks its entry points")
    _keys(family, FAMILY_KEYS, where + "'")
    framework = family.get("framework")
    kind = family.get("kind", INTERACTIVE)
    if not isinstance(framework, str) or not framework:
        raise UserError(f"{where}.framework': missing or not a string")
    if kind not in ENTRY_KINDS:
        raise UserError(f"{where}.kind': must be one of {', '.join(ENTRY_KINDS)} (got {kind!r})")
    streams = family.get("streams", False)
    if not isinstance(streams, bool):
        raise UserError(f"{where}.streams': must be true or false")
    if streams:
        knowledge.streaming_frameworks.add(framework)
    names = Patterns()
    for entry in _list(family.get("decorators"), f"{where}.decorators'"):
        for name in _decorator_names(entry, f"{where}.decorators'"):
            names.add(name)
    if names:
        knowledge.decorators.append((names, framework, kind))
    for i, entry in enumerate(_list(family.get("registrations"), f"{where}.registrations'")):
        knowledge.registrations.append(_registration(entry, f"{where}.registrations[{i}]'", framework, kind))
    for key, target in (("bases", knowledge.bases), ("class_decorators", knowledge.class_decorators)):
        for i, entry in enumerate(_list(family.get(key), f"{where}.{key}'")):
            label = f"{where}.{key}[{i}]'"
            if not isinstance(entry, dict):
                raise UserError(f"{label}: must be a mapping with types (or names) and methods")
            _keys(entry, {"types", "names", "methods"}, label)
            types = Patterns(_strings(entry.get("types") or entry.get("names"), label))
            methods = frozenset(_strings(entry.get("methods"), label))
            if not types or not methods:
                raise UserError(f"{label}: needs types (or names) and methods")
            target.append(ClassEntry(types, methods, framework, kind))
    for prefix in _strings(family.get("module_code"), f"{where}.module_code'"):
        knowledge.module_code.append((prefix, framework, kind))


def _one_client(entry, where: str) -> OneClient:
    _keys(entry, ONE_CLIENT_KEYS, where + "'")
    framework = entry.get("framework")
    if not isinstance(framework, str) or not framework:
        raise UserError(f"{where}.framework': missing or not a string")
    stdio = []
    for i, start in enumerate(_list(entry.get("stdio"), f"{where}.stdio'")):
        label = f"{where}.stdio[{i}]'"
        _keys(start, {"calls", "transport"}, label)
        calls = Patterns(_strings(start.get("calls"), label))
        if not calls:
            raise UserError(f"{label}: needs calls")
        transport = start.get("transport")
        if transport is not None:
            argument, keyword = _argument_or_keyword(transport, "stdio", label.rstrip("'") + ".transport'")
            transport = (argument, keyword, frozenset(_strings(transport.get("stdio"), label)))
        stdio.append((calls, transport))
    return OneClient(framework, tuple(stdio), Patterns(_strings(entry.get("network"), f"{where}.network'")))


def _decorator_names(entry, where: str, hooks: bool = False) -> list[str]:
    """`hooks`: a run-once entry, which may say its functions are a server's start-up hooks (`serving_loop`)."""
    if isinstance(entry, dict):
        _keys(entry, {"types", "methods", "names", *(("serving_loop",) if hooks else ())}, where)
        names = _strings(entry.get("names"), where)
        types = _strings(entry.get("types"), where)
        methods = _strings(entry.get("methods"), where)
        if types and not methods:
            raise UserError(f"{where}: 'types' needs 'methods'")
        return [*names, *(f"{t}.{m}" for t in types for m in methods)]
    if isinstance(entry, str):
        return [entry]
    raise UserError(f"{where}: entries are names or mappings of types/methods/names")


def _registration(entry, where: str, framework: str, kind: str) -> Registration:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: must be a mapping with calls, argument and/or keyword")
    _keys(entry, {"calls", "argument", "keyword", "methods", "in_caller", "unresolved_methods", "loop",
                  "serving_loop", "trigger"}, where)
    calls = Patterns(_strings(entry.get("calls"), where))
    argument = entry.get("argument")
    keyword = entry.get("keyword")
    keywords = [keyword] if isinstance(keyword, str) else keyword
    if argument is not None:
        _position(argument, where)
    if keywords is not None and not (isinstance(keywords, list) and keywords
                                     and all(isinstance(k, str) and k.isidentifier() for k in keywords)):
        raise UserError(f"{where}: 'keyword' must be a keyword argument name (or a list of them)")
    if not calls or (argument is None and not keywords):
        raise UserError(f"{where}: needs calls and an argument position or keyword")
    in_caller, serving_loop = entry.get("in_caller", False), entry.get("serving_loop", False)
    for key, value in (("in_caller", in_caller), ("serving_loop", serving_loop)):
        if not isinstance(value, bool):
            raise UserError(f"{where}: '{key}' must be true or false")
    unresolved = frozenset(_strings(entry.get("unresolved_methods"), where))
    if not all(name.isidentifier() for name in unresolved):
        raise UserError(f"{where}: 'unresolved_methods' must be method names")
    return Registration(calls, argument, tuple(keywords or ()), frozenset(_strings(entry.get("methods"), where)),
                        framework, kind, in_caller, serving_loop, unresolved,
                        _loop(entry.get("loop"), where.rstrip("'") + ".loop'"),
                        _trigger(entry.get("trigger"), where.rstrip("'") + ".trigger'"))


def _trigger(data, where: str) -> tuple[int, str, frozenset[str]] | None:
    if data is None:
        return None
    argument, keyword = _argument_or_keyword(data, "once", where)
    return argument, keyword, frozenset(_strings(data.get("once"), where))


def _loop(data, where: str) -> tuple[int, str, Patterns] | None:
    if data is None:
        return None
    argument, keyword = _argument_or_keyword(data, "private", where)
    private = Patterns(_strings(data.get("private"), where))
    if not private:
        raise UserError(f"{where}: needs 'private', the calls that make a loop of its own")
    return argument, keyword, private


def _argument_or_keyword(data, other: str, where: str) -> tuple[int, str]:
    """A call argument named both ways, `{argument: 1, keyword: trigger, <other>: ...}`: (position, keyword)."""
    _keys(data, {"argument", "keyword", other}, where)
    argument, keyword = _position(data.get("argument"), where), data.get("keyword")
    if not isinstance(keyword, str) or not keyword.isidentifier():
        raise UserError(f"{where}: 'keyword' must be a keyword argument name")
    return argument, keyword


def _position(argument, where: str) -> int:
    if not isinstance(argument, int) or isinstance(argument, bool) or not 0 <= argument < 64:
        raise UserError(f"{where}: 'argument' must be a position from 0 to 63")
    return argument


def _keys(data, allowed: set[str], where: str) -> None:
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a mapping")
    for key in data:
        if key not in allowed:
            raise UserError(f"{where}: unknown key {str(key)[:40]!r}; allowed: {', '.join(sorted(allowed))}")


def _list(value, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserError(f"{where}: must be a list")
    return value


def _strings(value, where: str) -> list[str]:
    items = _list(value, where)
    if not all(isinstance(item, str) and item and len(item) < 300 for item in items):
        raise UserError(f"{where}: must be a list of names")
    return items
