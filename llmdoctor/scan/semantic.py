"""The semantic model every rule shares: imports, scopes, bindings and call context (like pyflakes'
scope stack or ruff's semantic model), maintained during the single batched visit of a file.

What it answers:
- `qualified_name(expr)`: the dotted name an expression refers to, through `import time as t`,
  `from time import sleep`, `from x import y as z`, builtins (`open` -> `builtins.open`, unless shadowed),
  and instances: `c = httpx.Client()`, `with httpx.Client() as c`, `def f(c: httpx.Client)`,
  `self.c = httpx.Client()` make `c.get` / `self.c.get` resolve to `httpx.Client.get`.
- `scope` / `function`: the innermost scope, and the innermost function (def, async def or lambda: a lambda
  or nested def is its own, synchronous, function; comprehensions inherit their enclosing function).
- `is_awaited(call)`, `is_offloaded(node)` (the callable handed to asyncio.to_thread, run_in_executor, ...),
  `statement` (the innermost statement: suppression comments are looked up from its first line).

Limits (precision first: an unresolved name yields no finding): star imports are not followed; names are
bound in source order inside functions (module-level names are collected before the visit); attribute
types are only tracked on `self`, one level deep.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

import libcst as cst

from llmdoctor.scan.fastwalk import children
from llmdoctor.scan.functionfacts import FunctionFacts

BUILTIN_NAMES = frozenset(dir(builtins))
_NOT_LIBRARY_BASES = ("builtins.", "typing.", "typing_extensions.", "abc.", "enum.", "collections.")
LAMBDA_KEY = "<lambda>"  # the project model's key for code in a lambda outside any def

# Binding kinds
IMPORT = "import"  # value: qualified name of the module/object
INSTANCE = "instance"  # value: qualified name of the type (a call to it produced the value)
LOCAL = "local"  # bound to something we do not track: shadows outer bindings and builtins
SELF = "self"  # the first parameter of a method; value unused (scope.owner_class holds the class)


@dataclass
class Binding:
    kind: str
    value: str | None = None
    call: cst.Call | None = field(default=None, compare=False)  # INSTANCE: the constructor call, when seen


@dataclass
class Scope:
    kind: str  # "module" | "class" | "function" | "lambda"
    node: cst.CSTNode
    name: str = ""
    is_async: bool = False
    decorators: list[str] = field(default_factory=list)  # qualified names (or dotted text) of decorators
    decorator_nodes: list[cst.Decorator] = field(default_factory=list)
    bindings: dict[str, Binding] = field(default_factory=dict)
    attribute_types: dict[str, str | None] = field(default_factory=dict)  # class scopes: self.<attr> -> type
    owner_class: Scope | None = None  # methods: the class scope they are defined in
    header_ids: frozenset[int] = frozenset()  # decorators, defaults, annotations: run in the outer scope
    global_names: set[str] = field(default_factory=set)  # functions: names declared `global` / `nonlocal`
    key: str = ""  # def/class scopes: the project model's key (`Service.run`, `outer.inner`, `f#2`)

    @property
    def is_function(self) -> bool:
        return self.kind in ("function", "lambda")


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


def _import_alias_targets(node: cst.Import | cst.ImportFrom) -> list[tuple[str, str]]:
    """(local name, qualified name) pairs bound by an import statement."""
    out = []
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                out.append((alias.asname.name.value, full))
            else:
                root = full.split(".", 1)[0]
                out.append((root, root))
        return out
    if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
        return out  # relative imports name the project's own modules; star imports are not followed
    module = dotted_name(node.module)
    if module is None:
        return out
    for alias in node.names:
        if not isinstance(alias.name, cst.Name):
            continue
        local = alias.name.value
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        out.append((local, f"{module}.{alias.name.value}"))
    return out


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        names = []
        for element in target.elements:
            names.extend(_target_names(element.value))
        return names
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


class SemanticModel:
    """Scope stack + resolution. The engine calls `enter`/`leave`; rules only read."""

    def __init__(self, offload_calls, offload_methods: frozenset[str]) -> None:
        self.scopes: list[Scope] = []
        self.statements: list[cst.CSTNode] = []
        self._awaited: set[int] = set()
        self._offloaded: set[int] = set()
        self._offload_calls = offload_calls  # a catalog Table
        self._offload_methods = offload_methods  # method names whose 2nd positional arg is a callable
        self._keys_seen: dict[str, int] = {}
        self._function_facts: dict[int, FunctionFacts] = {}
        self.source = ""  # the file's whole text, as written (the tree may be of a pruned copy)

    # ------------------------------------------------------------------ queries for rules

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    @property
    def module_scope(self) -> Scope:
        return self.scopes[0]

    @property
    def function(self) -> Scope | None:
        """The innermost def/async def/lambda, or None at module or class level."""
        for scope in reversed(self.scopes):
            if scope.is_function:
                return scope
            if scope.kind == "class":
                return None
        return None

    @property
    def in_async_function(self) -> bool:
        function = self.function
        return function is not None and function.is_async

    def executing_function(self, node: cst.CSTNode) -> Scope | None:
        """The function whose execution evaluates `node`: like `function`, except that a decorator,
        default value or parameter annotation of a def/lambda is evaluated by the code AROUND it
        (`async def f(x=time.sleep(1))` sleeps at import, not in the coroutine)."""
        skip = self.scopes[-1] if self.scopes and id(node) in self.scopes[-1].header_ids else None
        for scope in reversed(self.scopes):
            if scope is skip:
                continue
            if scope.is_function:
                return scope
            if scope.kind == "class":
                return None
        return None

    @property
    def statement(self) -> cst.CSTNode | None:
        return self.statements[-1] if self.statements else None

    def is_awaited(self, call: cst.Call) -> bool:
        return id(call) in self._awaited

    def is_offloaded(self, node: cst.CSTNode) -> bool:
        """True for the callable argument of asyncio.to_thread / run_in_executor / anyio... (not run here)."""
        return id(node) in self._offloaded

    def function_facts(self, function: cst.FunctionDef) -> FunctionFacts:
        """The facts of `function`'s body (functionfacts.py), walked on the first question about it."""
        facts = self._function_facts.get(id(function))
        if facts is None:
            facts = self._function_facts[id(function)] = FunctionFacts(function)
        return facts

    def lookup(self, name: str) -> Binding | None:
        innermost = len(self.scopes) - 1
        for index in range(innermost, -1, -1):
            scope = self.scopes[index]
            if scope.kind == "class" and index != innermost:
                continue  # class bodies are not visible from the methods inside them
            binding = scope.bindings.get(name)
            if binding is not None:
                return binding
        return None

    def qualified_name(self, expr: cst.BaseExpression) -> str | None:
        """Dotted qualified name of `expr` (a callee, a decorator, an annotation), or None if unknown."""
        kind, value = self._resolve(expr)
        if kind == IMPORT:
            return value
        return None

    def callee_name(self, call: cst.Call) -> str | None:
        return self.qualified_name(call.func)

    def instance_type(self, expr: cst.BaseExpression) -> str | None:
        """Qualified name of the type whose constructor produced `expr`'s value, if tracked."""
        kind, value = self._resolve(expr)
        return value if kind == INSTANCE else None

    @property
    def function_key(self) -> str:
        """The project model's key of the innermost def (a lambda belongs to its def); "" at module level,
        "<lambda>" in a lambda outside any def (it runs when called, not at import)."""
        in_lambda = False
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                return scope.key
            in_lambda = in_lambda or scope.kind == "lambda"
        return LAMBDA_KEY if in_lambda else ""

    def _new_key(self, name: str) -> str:
        """`parent.name` for the innermost def or class around, `#2`, `#3` for a name defined again there
        (the keys llmdoctor/scan/project/index.py gives the same definitions)."""
        parent = next((s.key for s in reversed(self.scopes) if s.kind in ("function", "class")), "")
        key = f"{parent}.{name}" if parent else name
        count = self._keys_seen.get(key, 0) + 1
        self._keys_seen[key] = count
        return key if count == 1 else f"{key}#{count}"

    def decorator_names(self, scope: Scope | None = None) -> list[str]:
        return list((scope or self.scope).decorators)

    # ------------------------------------------------------------------ resolution

    def _resolve(self, expr: cst.BaseExpression) -> tuple[str | None, str | None]:
        if isinstance(expr, cst.Name):
            binding = self.lookup(expr.value)
            if binding is None:
                if expr.value in BUILTIN_NAMES:
                    return IMPORT, f"builtins.{expr.value}"
                return None, None
            if binding.kind == SELF:
                return SELF, None
            return binding.kind, binding.value
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if isinstance(expr.value, cst.Name):
                binding = self.lookup(expr.value.value)
                if binding is not None and binding.kind == SELF:
                    owner = self._method_class()
                    attr_type = owner.attribute_types.get(attr) if owner else None
                    return (INSTANCE, attr_type) if attr_type else (None, None)
            kind, value = self._resolve(expr.value)
            if kind in (IMPORT, INSTANCE) and value:
                return IMPORT, f"{value}.{attr}"
            return None, None
        if isinstance(expr, cst.Call):
            callee = self.qualified_name(expr.func)
            if callee is not None:
                return INSTANCE, callee
        return None, None

    def _method_class(self) -> Scope | None:
        for scope in reversed(self.scopes):
            if scope.kind == "function" and scope.owner_class is not None:
                return scope.owner_class
            if scope.kind == "class":
                return None
        return None

    def _value_binding(self, value: cst.BaseExpression | None) -> Binding:
        if isinstance(value, (cst.BooleanOperation, cst.IfExp)):
            # `session or requests.Session()`, `A() if cond else None`: the one side that is known
            sides = (value.left, value.right) if isinstance(value, cst.BooleanOperation) else (value.body, value.orelse)
            known = [b for b in (self._value_binding(side) for side in sides if not _is_none(side))
                     if b.kind in (INSTANCE, IMPORT)]
            if len(known) == 1 or (len(known) == 2 and known[0] == known[1]):
                return known[0]
            return Binding(LOCAL)
        if value is not None:
            if isinstance(value, cst.Await):
                value = value.expression
            if isinstance(value, cst.Call):
                callee = self.qualified_name(value.func)
                if callee is not None:
                    return Binding(INSTANCE, callee, call=value)
            elif isinstance(value, (cst.Name, cst.Attribute)):
                kind, resolved = self._resolve(value)
                if kind in (IMPORT, INSTANCE):
                    return Binding(kind, resolved)
        return Binding(LOCAL)

    def _annotation_binding(self, annotation: cst.Annotation | None) -> Binding:
        if annotation is not None and isinstance(annotation.annotation, (cst.Name, cst.Attribute)):
            qualified = self.qualified_name(annotation.annotation)
            if qualified is not None and not qualified.startswith("builtins."):
                return Binding(INSTANCE, qualified)
        return Binding(LOCAL)

    # ------------------------------------------------------------------ maintenance (engine only)

    def start_module(self, module: cst.Module) -> None:
        scope = Scope("module", module)
        self.scopes = [scope]
        self._collect_module_bindings(module.body, scope)

    def _collect_module_bindings(self, body, scope: Scope) -> None:
        """Module-level names before the visit, so a function may use a name bound further down."""
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        for local, qualified in _import_alias_targets(small):
                            current = scope.bindings.get(local)
                            if current is None or current.kind != IMPORT:
                                scope.bindings[local] = Binding(IMPORT, qualified)
                    elif isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                        targets = ([t.target for t in small.targets] if isinstance(small, cst.Assign)
                                   else [small.target])
                        binding = self._value_binding(getattr(small, "value", None))
                        if isinstance(small, cst.AnnAssign) and binding.kind == LOCAL:
                            binding = self._annotation_binding(small.annotation)
                        for target in targets:
                            for name in _target_names(target):
                                self._bind_module(scope, name, binding)
            elif isinstance(statement, cst.FunctionDef):
                scope.bindings[statement.name.value] = Binding(LOCAL)  # a def replaces an imported name
            elif isinstance(statement, cst.ClassDef):
                scope.bindings[statement.name.value] = self._class_binding(statement)
            elif isinstance(statement, (cst.If, cst.Try, cst.TryStar, cst.With, cst.For, cst.While)):
                for block in _blocks_of(statement):
                    self._collect_module_bindings(block, scope)

    @staticmethod
    def _bind_module(scope: Scope, name: str, binding: Binding) -> None:
        current = scope.bindings.get(name)
        if current is None:
            scope.bindings[name] = binding
        elif current.kind == IMPORT:
            return  # `try: import x / except ImportError: x = None`: the import is what the code uses
        elif current.kind != binding.kind or current.value != binding.value:
            scope.bindings[name] = Binding(LOCAL)

    def bind(self, name: str, binding: Binding) -> None:
        """Bind in the current scope, unless it is the module (collected up front)."""
        if self.scope.kind != "module":
            self.scope.bindings[name] = binding

    def bind_targets(self, targets, value: cst.BaseExpression | None) -> None:
        binding = self._value_binding(value)
        for target in targets:
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
                self._bind_self_attribute(target, binding)
            for name in _target_names(target):
                self.bind(name, binding)

    def bind_imports(self, node: cst.Import | cst.ImportFrom) -> None:
        for local, qualified in _import_alias_targets(node):
            self.bind(local, Binding(IMPORT, qualified))

    def _bind_self_attribute(self, target: cst.Attribute, binding: Binding) -> None:
        holder = self.lookup(target.value.value)
        owner = self._method_class()
        if holder is None or holder.kind != SELF or owner is None:
            return
        attr = target.attr.value
        new = binding.value if binding.kind == INSTANCE else None
        if attr in owner.attribute_types and owner.attribute_types[attr] != new:
            owner.attribute_types[attr] = None  # assigned two different things: unknown
        else:
            owner.attribute_types[attr] = new

    def enter_function(self, node: cst.FunctionDef) -> None:
        decorators = [self._decorator_name(d) for d in node.decorators]
        outer = self.scope
        self.bind(node.name.value, Binding(LOCAL))
        scope = Scope("function", node, name=node.name.value, is_async=node.asynchronous is not None,
                      decorators=[d for d in decorators if d], decorator_nodes=list(node.decorators),
                      header_ids=_header_ids([*node.decorators, *_param_headers(node.params)]),
                      key=self._new_key(node.name.value))
        params = node.params
        positional = [*params.posonly_params, *params.params]
        is_static = any(d in ("staticmethod", "builtins.staticmethod") for d in scope.decorators)
        if outer.kind == "class" and not is_static:
            scope.owner_class = outer
        self.scopes.append(scope)
        for index, param in enumerate([*positional, *params.kwonly_params]):
            if index == 0 and scope.owner_class is not None and param in positional:
                scope.bindings[param.name.value] = Binding(SELF)
            else:
                scope.bindings[param.name.value] = self._annotation_binding(param.annotation)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.bindings[star.name.value] = Binding(LOCAL)

    def _decorator_name(self, decorator: cst.Decorator) -> str | None:
        expr = decorator.decorator
        if isinstance(expr, cst.Call):
            expr = expr.func
        return self.qualified_name(expr) or dotted_name(expr)

    def enter_lambda(self, node: cst.Lambda) -> None:
        scope = Scope("lambda", node, name="<lambda>", header_ids=_header_ids(_param_headers(node.params)))
        for param in [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]:
            scope.bindings[param.name.value] = Binding(LOCAL)
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.bindings[star.name.value] = Binding(LOCAL)
        self.scopes.append(scope)

    def enter_class(self, node: cst.ClassDef) -> None:
        self.bind(node.name.value, Binding(LOCAL))
        scope = Scope("class", node, name=node.name.value,
                      decorators=[d for d in (self._decorator_name(x) for x in node.decorators) if d],
                      key=self._new_key(node.name.value))
        self.scopes.append(scope)
        for statement in node.body.body:  # class-level annotations/assignments type `self.<attr>`
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        binding = self._value_binding(small.value)
                        if binding.kind != INSTANCE:
                            binding = self._annotation_binding(small.annotation)
                        if binding.kind == INSTANCE:
                            scope.attribute_types[small.target.value] = binding.value

    def _class_binding(self, node: cst.ClassDef) -> Binding:
        """A module-level class deriving from one library class alone is that class to the rules: building it
        builds the library's object (`class OpenAIClient(OpenAI)`: `OpenAIClient()` is an OpenAI client with its
        pool). Not a class a function defines (an ad-hoc subclass, say a connection to a Unix socket)."""
        if len(node.bases) == 1 and not node.keywords and node.bases[0].keyword is None:
            kind, value = self._resolve(node.bases[0].value)
            if kind == IMPORT and value and not value.startswith(_NOT_LIBRARY_BASES):
                return Binding(IMPORT, value)
        return Binding(LOCAL)

    def leave_scope(self) -> None:
        self.scopes.pop()

    def note_global(self, node: cst.Global | cst.Nonlocal) -> None:
        """`global x` / `nonlocal x`: assignments to x in this function outlive the call."""
        for scope in reversed(self.scopes):
            if scope.is_function:
                scope.global_names.update(name.name.value for name in node.names)
                return

    def note_await(self, node: cst.Await) -> None:
        if isinstance(node.expression, cst.Call):
            self._awaited.add(id(node.expression))

    def note_call(self, node: cst.Call) -> None:
        """Mark the callable argument of an offloading call (it runs in a worker thread, not here)."""
        index = None
        callee = self.qualified_name(node.func)
        if callee is not None and self._offload_calls.match(callee) is not None:
            index = 0
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value in self._offload_methods:
            index = 1
        if index is None:
            return
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if len(positional) > index:
            self._offloaded.add(id(positional[index].value))


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _param_headers(params: cst.Parameters) -> list[cst.CSTNode]:
    """Default values and annotations of parameters (evaluated when the def/lambda is evaluated)."""
    out: list[cst.CSTNode] = []
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    for param in every:
        if param.default is not None:
            out.append(param.default)
        if param.annotation is not None:
            out.append(param.annotation)
    return out


def _header_ids(roots: list[cst.CSTNode]) -> frozenset[int]:
    ids: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        ids.add(id(node))
        stack.extend(children(node))  # `node.children` without libcst rebuilding each node
    return frozenset(ids)


def _blocks_of(statement) -> list:
    blocks = []
    body = getattr(statement, "body", None)
    if isinstance(body, cst.IndentedBlock):
        blocks.append(body.body)
    for handler in getattr(statement, "handlers", ()) or ():
        if isinstance(handler.body, cst.IndentedBlock):
            blocks.append(handler.body.body)
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:
        if isinstance(orelse, cst.If):
            blocks.append(orelse.body.body if isinstance(orelse.body, cst.IndentedBlock) else [])
            orelse = orelse.orelse
            continue
        if isinstance(orelse.body, cst.IndentedBlock):
            blocks.append(orelse.body.body)
        break
    final = getattr(statement, "finalbody", None)
    if final is not None and isinstance(final.body, cst.IndentedBlock):
        blocks.append(final.body.body)
    return blocks
