"""The LLM SDK knowledge (`rules/sdk-*.yaml`, `kind: tables`) as lookups for the SDK rules.

Schema: docs/sdk-knowledge.md. A call is matched by its qualified name as the semantic model resolves it:
`c = OpenAI(); c.chat.completions.create(...)` -> `openai.OpenAI.chat.completions.create`; the module client
`openai.chat.completions.create(...)` -> the same path under the module `openai`. Transparent segments
(`with_options`, `with_raw_response`, ...) are dropped before the lookup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.errors import UserError

METHOD_KINDS = ("generation", "streaming", "structured", "not_generation")
GENERATING_KINDS = ("generation", "streaming", "structured")
METHOD_KEYS = {"stream_twin", "async_twin", "async", "positional", "stream_kwarg", "report_on_unknown_receiver",
               "local"}
RECEIVER_KEYS = {"constructors", "module", "async", "async_twin", "pooled", "holds", "build_cost", "per_tenant", "timeout",
                 "transparent_calls", "transparent_attributes", "methods", "request_methods", "local_kwargs"}
METHOD_SET_KEYS = {"payload_kwargs", "exempt_when", "factories", *METHOD_KINDS}
EXEMPT_KEYS = {"kwargs", "kwarg_equals", "kwarg_has_key", "kwarg_at_most", "no_model_call"}


@dataclass(frozen=True)
class Exemptions:
    """Keyword arguments that mean the output is consumed by code (LLM001 does not apply)."""

    kwargs: frozenset[str] = frozenset()  # includes `no_model_call`
    no_model_call: frozenset[str] = frozenset()  # the SDK answers without a model call (litellm mock_response)
    kwarg_equals: tuple[tuple[str, Any], ...] = ()
    kwarg_has_key: tuple[tuple[str, frozenset[str]], ...] = ()
    kwarg_at_most: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Receiver:
    """A client type (by constructor) or a module that behaves like a client."""

    name: str  # the qualified constructor or module name
    table: str
    is_module: bool
    is_async: bool
    async_twin: str | None = None
    pooled: bool = False
    holds: str = "its own connection pool"  # what one holds, as LLM003's message says (`one connection`)
    build_cost: str | None = None
    per_tenant: str | None = None
    timeout: tuple[tuple[str, Any], ...] = ()
    transparent: frozenset[str] = frozenset()
    local_kwargs: frozenset[str] = frozenset()  # given one, it is an embedded store with no pool (`path=`)

    def timeout_get(self, key: str, default: Any = None) -> Any:
        return dict(self.timeout).get(key, default)


@dataclass(frozen=True)
class Method:
    path: str  # relative to the receiver: "chat.completions.create"
    kind: str  # generation | streaming | structured | not_generation
    receiver: Receiver
    is_async: bool
    stream_twin: str | None = None
    async_twin: str | None = None  # a method on the same receiver
    positional: tuple[str, ...] = ()
    stream_kwarg: str = "stream"
    unknown_receiver: bool = False
    local: bool = False  # runs in the process, sends no request (litellm.token_counter)
    payload_kwargs: frozenset[str] = frozenset()
    exempt: Exemptions = field(default_factory=Exemptions)

    @property
    def generates(self) -> bool:
        return self.kind in GENERATING_KINDS

    def async_fix(self, shown_receiver: str) -> str:
        """The fix text for LLM004: the async twin of this call."""
        if self.async_twin:
            return f"`await {shown_receiver}.{self.async_twin}(...)`"
        if self.receiver.async_twin:
            return f"`await {self.receiver.async_twin}().{self.path}(...)` (one shared async client)"
        return "an async client, or `await asyncio.to_thread(...)`"


@dataclass
class SdkKnowledge:
    calls: dict[str, Method] = field(default_factory=dict)  # qualified call name -> method
    unknown_chains: dict[str, Method] = field(default_factory=dict)  # method path -> method
    receivers: dict[str, Receiver] = field(default_factory=dict)  # constructor / module name -> receiver
    transparent: frozenset[str] = frozenset()
    imports: frozenset[str] = frozenset()

    def lookup(self, qualified: str | None) -> Method | None:
        if not qualified:
            return None
        found = self.calls.get(qualified)
        if found is None and self.transparent:
            parts = [p for p in qualified.split(".") if p not in self.transparent]
            found = self.calls.get(".".join(parts))
        return found

    def lookup_unknown(self, chain: str) -> Method | None:
        """For a receiver of unknown origin: match `report_on_unknown_receiver` paths as a suffix."""
        parts = [p for p in chain.split(".") if p not in self.transparent]
        for path, method in self.unknown_chains.items():
            want = path.split(".")
            if len(parts) > len(want) and parts[-len(want):] == want:
                return method
        return None


def build(knowledge: dict[str, dict]) -> SdkKnowledge:
    """Index every knowledge document that has `clients`, `modules` or `method_sets`."""
    result = SdkKnowledge()
    transparent: set[str] = set()
    imports: set[str] = set()
    pending_factories: list[tuple[Receiver, str, str]] = []
    for stem, doc in sorted(knowledge.items()):
        if isinstance(doc, dict) and doc.get("kind") == "tables":
            imports.update(doc.get("imports") or ())  # LLM frameworks (rules/sdk-logging.yaml): no clients here
        if not isinstance(doc, dict) or not ({"clients", "modules", "method_sets"} & doc.keys()):
            continue
        validate(stem, doc)
        imports.update(doc.get("imports") or ())
        sets = doc.get("method_sets") or {}
        for entry in doc.get("clients") or []:
            for constructor in entry["constructors"]:
                receiver = _receiver(stem, constructor, entry, is_module=False)
                transparent.update(receiver.transparent)
                result.receivers[constructor] = receiver
                _index(result, receiver, constructor, entry.get("methods") or [], sets, pending_factories)
        for entry in doc.get("modules") or []:
            receiver = _receiver(stem, entry["module"], entry, is_module=True)
            result.receivers[entry["module"]] = receiver
            _index(result, receiver, entry["module"], entry.get("methods") or [], sets, pending_factories)
    for owner, prefix, product in pending_factories:
        target = result.receivers.get(product)
        if target is None:
            continue
        for name, method in list(result.calls.items()):
            if method.receiver is target and name.startswith(product + "."):
                result.calls.setdefault(f"{prefix}.{method.path}", method)
    result.transparent = frozenset(transparent)
    result.imports = frozenset(imports)
    return result


def _receiver(stem: str, name: str, entry: dict, is_module: bool) -> Receiver:
    return Receiver(
        name=name, table=stem, is_module=is_module, is_async=bool(entry.get("async", False)),
        async_twin=entry.get("async_twin"), pooled=bool(entry.get("pooled", False)),
        **({"holds": entry["holds"]} if "holds" in entry else {}),
        build_cost=entry.get("build_cost"), per_tenant=entry.get("per_tenant"),
        timeout=tuple(sorted((entry.get("timeout") or {}).items())),
        transparent=frozenset([*(entry.get("transparent_calls") or ()), *(entry.get("transparent_attributes") or ())]),
        local_kwargs=frozenset(entry.get("local_kwargs") or ()),
    )


def _index(result: SdkKnowledge, receiver: Receiver, prefix: str, set_names: list[str], sets: dict,
           pending_factories: list) -> None:
    for set_name in set_names:
        method_set = sets[set_name]
        exempt = _exemptions(method_set.get("exempt_when") or {})
        payload = frozenset(method_set.get("payload_kwargs") or ())
        for kind in METHOD_KINDS:
            entries = method_set.get(kind) or {}
            items = entries.items() if isinstance(entries, dict) else ((path, {}) for path in entries)
            for path, options in items:
                options = options or {}
                method = Method(
                    path=path, kind=kind, receiver=receiver,
                    is_async=bool(options.get("async", receiver.is_async)),
                    stream_twin=options.get("stream_twin"), async_twin=options.get("async_twin"),
                    positional=tuple(options.get("positional") or ()),
                    stream_kwarg=options.get("stream_kwarg", "stream"),
                    unknown_receiver=bool(options.get("report_on_unknown_receiver", False)),
                    local=bool(options.get("local", False)),
                    payload_kwargs=payload, exempt=exempt,
                )
                result.calls.setdefault(f"{prefix}.{path}", method)
                if method.unknown_receiver:
                    result.unknown_chains.setdefault(path, method)
        for path, product in (method_set.get("factories") or {}).items():
            pending_factories.append((receiver, f"{prefix}.{path}", product))


def _exemptions(data: dict) -> Exemptions:
    no_model_call = frozenset(data.get("no_model_call") or ())
    return Exemptions(
        kwargs=frozenset(data.get("kwargs") or ()) | no_model_call,
        no_model_call=no_model_call,
        kwarg_equals=tuple(sorted((data.get("kwarg_equals") or {}).items())),
        kwarg_has_key=tuple(sorted((k, frozenset(v)) for k, v in (data.get("kwarg_has_key") or {}).items())),
        kwarg_at_most=tuple(sorted((data.get("kwarg_at_most") or {}).items())),
    )


def validate(stem: str, doc: dict, source: str | None = None) -> None:
    """Check the SDK schema; a malformed table names the file (`source`, else `<stem>.yaml`) and the key
    (exit 2, no traceback)."""

    def fail(key: str, problem: str) -> UserError:
        return UserError(f"rules file {source or stem + '.yaml'}: key '{key}': {problem}")

    def check_keys(where: str, value: Any, allowed: set[str]) -> None:
        if not isinstance(value, dict):
            raise fail(where, "must be a mapping")
        unknown = set(value) - allowed
        if unknown:
            raise fail(f"{where}.{min(unknown)}", f"unknown key (allowed: {', '.join(sorted(allowed))})")

    sets = doc.get("method_sets") or {}
    if not isinstance(sets, dict):
        raise fail("method_sets", "must be a mapping of method-set name -> methods")
    for key in ("clients", "modules"):
        entries = doc.get(key) or []
        if not isinstance(entries, list):
            raise fail(key, "must be a list")
        for index, entry in enumerate(entries):
            where = f"{key}[{index}]"
            check_keys(where, entry, RECEIVER_KEYS)
            if key == "clients" and not _dotted_list(entry.get("constructors")):
                raise fail(f"{where}.constructors", "a client needs a list of qualified constructor names")
            if key == "modules" and not (isinstance(entry.get("module"), str) and DOTTED.match(entry["module"])):
                raise fail(f"{where}.module", "a module entry needs the module's qualified name")
            if not isinstance(entry.get("async"), bool):
                raise fail(f"{where}.async", "say whether the calls must be awaited (true/false)")
            if not isinstance(entry.get("methods") or [], list):
                raise fail(f"{where}.methods", "must be a list of method-set names")
            if "holds" in entry and not (isinstance(entry["holds"], str) and entry["holds"].strip()):
                raise fail(f"{where}.holds", "must be a short text of what one holds, e.g. 'one connection'")
            local = entry.get("local_kwargs") or []
            if not isinstance(local, list) or not all(isinstance(k, str) and k.isidentifier() for k in local):
                raise fail(f"{where}.local_kwargs", "must be a list of keyword argument names")
            for set_name in entry.get("methods") or []:
                if not isinstance(set_name, str):
                    raise fail(f"{where}.methods", "must be a list of method-set names (strings)")
                if set_name not in sets:
                    raise fail(f"{where}.methods", f"no method set named '{set_name[:80]}'")
    for set_name, method_set in sets.items():
        where = f"method_sets.{set_name}"
        check_keys(where, method_set, METHOD_SET_KEYS)
        exempt = method_set.get("exempt_when") or {}
        if not isinstance(exempt, dict):
            raise fail(f"{where}.exempt_when", "must be a mapping")
        unknown = set(exempt) - EXEMPT_KEYS
        if unknown:
            raise fail(f"{where}.exempt_when.{min(unknown)}", "unknown key")
        for kind in METHOD_KINDS:
            entries = method_set.get(kind) or {}
            if kind == "generation" and not isinstance(entries, dict):
                raise fail(f"{where}.generation", "must be a mapping of method path -> options ({} for none)")
            if not isinstance(entries, (dict, list)) or not _dotted_list(list(entries)):
                raise fail(f"{where}.{kind}", "must be a list (or mapping) of dotted method paths like 'chat.complete'")
            if isinstance(entries, dict):
                for path, options in entries.items():
                    if options is not None and not isinstance(options, dict):
                        raise fail(f"{where}.{kind}.{path}", "options must be a mapping like {stream_twin: ...}")
                    if options and set(options) - METHOD_KEYS:
                        bad = min(set(options) - METHOD_KEYS)
                        raise fail(f"{where}.{kind}.{path}.{bad}", f"unknown key (allowed: {', '.join(sorted(METHOD_KEYS))})")


DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _dotted_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and DOTTED.match(v) for v in value)


def sdk_knowledge(catalog) -> SdkKnowledge:
    """The index for this catalog, built once (kept in the catalog's memo, so it travels with it)."""
    found = catalog.memo.get("sdk-knowledge")
    if found is None:
        found = catalog.memo["sdk-knowledge"] = build(catalog.knowledge)
    return found


LIBRARY_KEYS = {"library", "imports", "module_functions", "function_cost", "shared_client", "timeout", "clients"}


@dataclass(frozen=True)
class HttpLibrary:
    """An HTTP library of `sdk-http.yaml` (`libraries:`): its module-level request functions."""

    name: str
    function_cost: str | None = None
    shared_client: str | None = None  # what to build once instead (`requests.Session`)
    timeout: tuple[tuple[str, Any], ...] = ()

    def timeout_get(self, key: str, default: Any = None) -> Any:
        return dict(self.timeout).get(key, default)


@dataclass
class ClientKnowledge:
    """Every client constructor (SDK and HTTP) and HTTP module function, for LLM003 and LLM006."""

    receivers: dict[str, Receiver] = field(default_factory=dict)  # constructor or module name -> receiver
    request_methods: dict[str, frozenset[str]] = field(default_factory=dict)  # HTTP constructor -> methods
    module_functions: dict[str, HttpLibrary] = field(default_factory=dict)  # `requests.get` -> library
    sdk: SdkKnowledge = field(default_factory=SdkKnowledge)

    def receiver_of(self, qualified: str | None) -> tuple[Receiver, str] | None:
        """`openai.OpenAI.with_options` -> (the OpenAI receiver, "with_options"): the longest known prefix."""
        if not qualified:
            return None
        parts = qualified.split(".")
        for end in range(len(parts) - 1, 0, -1):
            receiver = self.receivers.get(".".join(parts[:end]))
            if receiver is not None:
                return receiver, ".".join(parts[end:])
        return None


def build_clients(knowledge: dict[str, dict], sdk: SdkKnowledge) -> ClientKnowledge:
    result = ClientKnowledge(receivers=dict(sdk.receivers), sdk=sdk)
    for stem, doc in sorted(knowledge.items()):
        if not isinstance(doc, dict) or "libraries" not in doc:
            continue
        libraries = doc["libraries"]
        if not isinstance(libraries, list):
            raise UserError(f"rules file {stem}.yaml: key 'libraries': must be a list")
        for index, entry in enumerate(libraries):
            where = f"rules file {stem}.yaml: key 'libraries[{index}]"
            if not isinstance(entry, dict) or not entry.get("library"):
                raise UserError(f"{where}.library': each library needs a name")
            unknown = set(entry) - LIBRARY_KEYS
            if unknown:
                raise UserError(f"{where}.{min(unknown)}': unknown key (allowed: {', '.join(sorted(LIBRARY_KEYS))})")
            library = HttpLibrary(
                name=entry["library"], function_cost=entry.get("function_cost"),
                shared_client=entry.get("shared_client"),
                timeout=tuple(sorted((entry.get("timeout") or {}).items())),
            )
            for name in entry.get("module_functions") or ():
                result.module_functions.setdefault(name, library)
            validate(stem, {"clients": [{k: v for k, v in c.items() if k != "request_methods"} | {"methods": []}
                                        for c in entry.get("clients") or []]})
            for client in entry.get("clients") or []:
                methods = frozenset(client.get("request_methods") or ())
                for constructor in client["constructors"]:
                    result.receivers.setdefault(constructor, _receiver(stem, constructor, client, is_module=False))
                    result.request_methods.setdefault(constructor, methods)
    return result


def client_knowledge(catalog) -> ClientKnowledge:
    """The client/pool index for this catalog, built once (memoized on the catalog like `sdk_knowledge`)."""
    found = catalog.memo.get("client-knowledge")
    if found is None:
        found = catalog.memo["client-knowledge"] = build_clients(catalog.knowledge, sdk_knowledge(catalog))
    return found
