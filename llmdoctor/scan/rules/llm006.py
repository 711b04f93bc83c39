"""LLM006: an HTTP call that can wait forever (knowledge: the `timeout:` entries of rules/sdk-http.yaml and
rules/sdk-*.yaml; see docs/sdk-knowledge.md).

Reported: a call of a library whose timeout entry says `missing_is_finding` (requests: module functions and
`Session` request methods) without the timeout keyword; a literal `timeout=None` where `none_disables`
(constructors unless `constructor: false` / `constructor_none_disables: false`; calls when `per_call`).
`asyncio.to_thread(f, *args, **kwargs)` is read as the call `f(*args, **kwargs)` and reported where it is.
A private function handing its own `**kwargs` on is a candidate the project model keeps only where no call of
it passes the timeout keyword (link.py, `callers_omitting`).
Not reported: a timeout passed as any expression or possibly through `*args`/`**kwargs`; requests `Session`
calls in a module that defines its own `HTTPAdapter` subclass or patches `session.request` (a default
timeout is the usual reason). Where it runs (test modules, scripts) is the project model's context and the
YAML's `contexts:`.
"""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.rule import Rule
from llmdoctor.scan.rules.sdk_knowledge import ClientKnowledge, client_knowledge
from llmdoctor.scan.semantic import dotted_name

MISSING_FIX = ("pass `timeout=(connect, read)`, e.g. `timeout=(3.05, 30)`: a connect bound plus a read bound "
               "between bytes, so a long streamed answer still completes")
NONE_FIX = ("pass a finite timeout: a short connect bound and a read bound long enough for the slowest "
            "expected response (httpx-based clients: `httpx.Timeout(120, connect=5)`)")

FORWARDED_KEYWORD = "_forwarded_keyword"  # a candidate's extra (llmdoctor/scan/project/link.py)
THREAD_OFFLOAD = "asyncio.to_thread"  # to_thread(func, /, *args, **kwargs): func(*args, **kwargs) in a thread


def offloaded_call(node: cst.Call) -> cst.Call | None:
    """The call `asyncio.to_thread(f, *args, **kwargs)` makes, `f(*args, **kwargs)` (a node outside the tree:
    its arguments are the tree's), or None when `f` is not the first positional argument."""
    if not node.args or node.args[0].keyword is not None or node.args[0].star:
        return None
    return cst.Call(func=node.args[0].value, args=node.args[1:])


class HttpCallWithoutTimeout(Rule):
    code = "LLM006"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._knowledge: ClientKnowledge = client_knowledge(self.catalog)
        self._adapter_defaults = False  # the module may give its requests sessions a default timeout
        self._pending: list[tuple[cst.Call, cst.CSTNode | None, str, str, bool, str, bool, dict | None, dict]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:  # class TimeoutHTTPAdapter(HTTPAdapter): sends with a default timeout
            if (dotted_name(base.value) or "").rsplit(".", 1)[-1] == "HTTPAdapter":
                self._adapter_defaults = True

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:  # session.request = functools.partial(session.request, timeout=10)
            if isinstance(target.target, cst.Attribute) and target.target.attr.value == "request":
                self._adapter_defaults = True

    def leave_Module(self, node: cst.Module) -> None:
        for call, statement, message, fix, session_missing, function, configures, autofix, extra in self._pending:
            if session_missing and self._adapter_defaults:
                continue
            self.report(call, message, fix=fix, statement=statement, function=function, configures=configures,
                        autofix=autofix, **extra)

    def visit_Call(self, node: cst.Call) -> None:
        callee = self.context.callee_name(node)
        if callee is None:
            return
        if callee == THREAD_OFFLOAD:  # `asyncio.to_thread(requests.get, url)` calls requests.get(url)
            inner = offloaded_call(node)
            if inner is not None and (inner_callee := self.context.callee_name(inner)) is not None:
                self._visit(node, inner, inner_callee)
            return
        self._visit(node, node, callee)

    def _visit(self, node: cst.Call, call: cst.Call, callee: str) -> None:
        """`call` (with `callee`, its qualified name) is checked; `node` is where it is reported (the same
        call, or the `asyncio.to_thread(...)` that makes it: the timeout keyword goes there too)."""
        knowledge = self._knowledge
        shown = dotted_name(call.func) or callee
        library = knowledge.module_functions.get(callee)
        if library is not None:
            self._check(node, call, shown, library.name, dict(library.timeout), missing_applies=True,
                        session=False)
            return
        receiver = knowledge.receivers.get(callee)
        if receiver is not None:
            timeout = dict(receiver.timeout)
            if (receiver.is_module or not timeout.get("constructor", True)
                    or not timeout.get("constructor_none_disables", True)):
                return
            self._check(node, call, shown, callee, timeout, missing_applies=False, session=False, configures=True)
            return
        found = knowledge.receiver_of(callee)
        if found is None:
            return
        receiver, path = found
        timeout = dict(receiver.timeout)
        if not timeout.get("per_call"):
            return
        kwarg = timeout.get("per_call_kwarg", timeout.get("kwarg"))
        methods = knowledge.request_methods.get(receiver.name)
        if methods is not None:  # an HTTP client: only its request methods take a timeout
            if path not in methods:
                return
        elif receiver.is_module and knowledge.sdk.lookup(callee) is None:
            return
        self._check(node, call, shown, receiver.name, {**timeout, "kwarg": kwarg},
                    missing_applies=methods is not None, session=True)

    def _check(self, node: cst.Call, call: cst.Call, shown: str, owner: str, timeout: dict, *,
               missing_applies: bool, session: bool, configures: bool = False) -> None:
        """`call`'s arguments are checked, the finding is reported at `node`. `configures`: the call builds a
        client (its timeout holds for every request made through it, wherever the client is built)."""
        kwarg = timeout.get("kwarg")
        if not kwarg:
            return
        value = None
        forwarded = None  # the enclosing function's own `**kwargs`, handed on whole
        for arg in call.args:
            if arg.star == "**" and forwarded is None and self._own_keywords(arg.value):
                forwarded = arg.value.value
                continue
            if arg.star:
                return  # the timeout may arrive through *args / **kwargs
            if arg.keyword is not None and arg.keyword.value == kwarg:
                value = arg.value
        default = timeout.get("default") or "unknown"
        autofix = {"kind": "timeout", "kwarg": kwarg, "unit": timeout.get("unit", "s")}
        if value is None:
            if missing_applies and timeout.get("missing_is_finding"):
                library = owner.split('.')[0]
                if forwarded is None:
                    message = (f"`{shown}()` has no `{kwarg}=`: {library} has no default timeout, so a stalled "
                               "server holds this call (and the worker running it) forever")
                    fixable, extra = {**autofix, "missing": True}, {}
                else:  # reported only where no call of this function in the project passes the keyword
                    message = (f"`{shown}()` takes its keywords from `**{forwarded}`, and no call of "
                               f"`{self.context.scope.name}` in the project passes `{kwarg}=`: {library} has no "
                               "default timeout, so a stalled server holds this call (and the worker running it) "
                               "forever")
                    fixable, extra = None, {FORWARDED_KEYWORD: kwarg}
                self._pending.append((node, self.context.statement, message, MISSING_FIX, session,
                                      self.context.function_key, False, fixable, extra))
            return
        if not (isinstance(value, cst.Name) and value.value == "None") or not timeout.get("none_disables"):
            return
        if default.startswith("none"):
            message = (f"`{kwarg}=None` on `{shown}()` means no timeout at all ({owner} has none by default "
                       "either): a stalled server holds this call forever")
        else:
            message = (f"`{kwarg}=None` on `{shown}()` turns off {owner}'s default timeout ({default}): a stalled "
                       "server holds this call forever")
        self._pending.append((node, self.context.statement, message, NONE_FIX, False, self.context.function_key,
                              configures, autofix, {}))

    def _own_keywords(self, value: cst.BaseExpression) -> bool:
        """Whether `value` is the `**` parameter of the function being visited (`def f(url, **kwargs)`)."""
        scope = self.context.scope
        if scope is None or scope.kind != "function" or not isinstance(value, cst.Name):
            return False
        star = getattr(scope.node, "params", None)
        star = star.star_kwarg if star is not None else None
        return star is not None and star.name.value == value.value
