"""Incremental linking: a warm run re-links only the modules whose links can have changed.

What linking produces for one module (`ProjectModel._link`, one module at a time) is its *link products*:
for each of its functions the edges to what its calls reach (callee, kind, which call), whether it is cached,
which blocking library call it makes itself; and, in order, its effects on the program (entry points,
run-once functions, start-up hooks, spawned coroutines). They depend on the module's own index and on what
other modules *declare* - their interface: names bound at module level, the functions (key, owner, parent, what they
return, switches, the containers a registering decorator fills...) and classes (bases, attributes, methods,
decorators) - never on other modules' call lists, lines or function decorators. So when the changed modules' interfaces are unchanged (an edit inside function bodies, the
common pre-commit case), every other module's products are those of the last run, and only the changed
modules are resolved again; the contexts (reachability), the blocking chains and the rules are recomputed
over the whole program, as in a cold run. Anything else - a changed interface, a module added or removed,
a project whose resolution met a cycle (whose value depends on the order it is entered in), a product that
does not validate - links the whole program, as a cold run does. Findings are therefore those of a cold run.

The products are stored in the scan cache folder (cache.ProgramCache): JSON, validated field by field before
use; a malformed file is a full link, never a crash.
"""

from __future__ import annotations

import hashlib
import json

from llmdoctor.scan.project.index import ModuleIndex
from llmdoctor.scan.project.model import E_RUN, Entry, Node, ProjectModel

PRODUCTS_FORMAT = 1
THROUGH_PARAMETERS = -2  # a function's stored blocking call: found again each run, as it reads callers' arguments


class ReplayError(ValueError):
    """A stored product that does not fit the program it is replayed into."""


def interface_digest(index: ModuleIndex) -> str:
    """sha256 of what other modules' links can read from this module (everything but call lists, lines,
    function decorators and suppressions)."""
    parts = [
        index.bindings, index.imports, index.main_block,
        [[f.key, f.name, f.is_async, f.owner, f.static, f.parent, f.returns, f.returns_items, f.generator,
          f.switches, f.switch_attributes, f.registers, f.abstract, f.parameters, f.runs, f.declared,
          f.accessor, f.runs_coroutine]
         for f in index.functions],
        # a class's decorators may register it in another module's container (ProjectModel._registries)
        [[c.key, c.name, [list(b) for b in c.bases], c.attributes, c.methods, [d.to_json() for d in c.decorators]]
         for c in index.classes],
    ]
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()


class LinkReplay:
    """The stored products of the `clean` modules, replayed into a ProjectModel as it links."""

    def __init__(self, products: dict[str, dict], clean: set[str]) -> None:
        self.products = products
        self._clean = clean

    def clean(self, path: str) -> bool:
        return path in self._clean

    # ------------------------------------------------------------------ into the model

    def link_functions(self, model: ProjectModel, path: str) -> None:
        product = self.products[path]
        ids = model.by_path[path]
        nodes = product["n"]
        if len(nodes) != len(ids):
            raise ReplayError(f"{path}: {len(nodes)} functions stored, {len(ids)} now")
        for node_id, stored in zip(ids, nodes):
            if not (type(stored) is list and len(stored) == 3 and type(stored[0]) is bool
                    and type(stored[1]) is list):
                raise ReplayError(f"{path}: a function of the wrong shape")
            node = model.nodes[node_id]
            node.cached = stored[0]
            calls = node.function.calls
            edges = []
            for edge in stored[1]:
                if not (type(edge) is list and len(edge) == 4):
                    raise ReplayError(f"{path}: an edge of the wrong shape")
                callee_path, position, kind, call = edge
                if not (type(kind) is int and type(call) is int and 0 <= kind <= E_RUN and -1 <= call < len(calls)):
                    raise ReplayError(f"{path}: an edge of the wrong shape")
                edges.append((_node_id(model, callee_path, position), kind, calls[call] if call >= 0 else None))
            node.edges = edges
        _apply(model, product["e"], path)

    def link_classes(self, model: ProjectModel, path: str) -> None:
        _apply(model, self.products[path]["k"], path)

    def direct_blocking(self, model: ProjectModel, node: Node) -> tuple | None:
        """(the call, stored by the last run, through which `node` blocks itself, or None: none); None when it
        is found again each run (it depends on what callers pass as a parameter: THROUGH_PARAMETERS)."""
        product = self.products[node.path]
        call = product["n"][node.id - model.by_path[node.path][0]][2]
        calls = node.function.calls
        if type(call) is not int or not THROUGH_PARAMETERS <= call < len(calls):
            raise ReplayError(f"{node.path}: no blocking call stored")
        if call == THROUGH_PARAMETERS:
            return None
        return (calls[call] if call >= 0 else None,)


def _node_id(model: ProjectModel, path: str, position: int) -> int:
    ids = model.by_path.get(path) if type(path) is str else None
    if ids is None or type(position) is not int or not 0 <= position < len(ids):
        raise ReplayError(f"an edge to {path}#{position}, not in the program")
    return ids[position]


def _apply(model: ProjectModel, effects: list, path: str) -> None:
    for effect in effects:
        if not (type(effect) is list and effect and effect[0] in ("a", "d", "o", "s", "h", "p")
                and len(effect) == (6 if effect[0] in ("a", "d") else 3)):
            raise ReplayError(f"{path}: an effect of the wrong shape")
        op = effect[0]
        if op in ("a", "d"):
            _, target_path, position, framework, kind, route = effect
            if not (type(framework) is str and type(kind) is str and type(route) is str):
                raise ReplayError(f"{path}: an entry of the wrong shape")
            entry = Entry(_node_id(model, target_path, position), framework, kind, route)
            if op == "a":
                model._add_entry(entry)
            else:
                model._default_entry(entry)
        elif op == "o":
            model._add_once(_node_id(model, effect[1], effect[2]))
        elif op == "s":
            model._add_spawned(_node_id(model, effect[1], effect[2]))
        elif op == "h":
            model._add_hook(_node_id(model, effect[1], effect[2]))
        elif op == "p":
            model._add_scheduled(_node_id(model, effect[1], effect[2]))
        else:
            raise ReplayError(f"{path}: an effect of the wrong kind")


# ----------------------------------------------------------------------------- from the model


def products_of(model: ProjectModel, replay: LinkReplay | None) -> dict[str, dict]:
    """The link products of every module of `model` (a replayed module's as they were replayed)."""
    blocks = model._blocks is not None
    where: dict[int, tuple[str, int]] = {}
    for path, ids in model.by_path.items():
        for position, node_id in enumerate(ids):
            where[node_id] = (path, position)

    def effects(log: list) -> list:
        out = []
        for op, value in log:
            if op in ("a", "d"):
                out.append([op, *where[value.node], value.framework, value.kind, value.route])
            else:
                out.append([op, *where[value]])
        return out

    products = {}
    for path, ids in model.by_path.items():
        if replay is not None and replay.clean(path):
            products[path] = replay.products[path]
            continue
        nodes = []
        for node_id in ids:
            node = model.nodes[node_id]
            position_of = {id(call): index for index, call in enumerate(node.function.calls)}
            edges = [[*where[callee], kind, position_of[id(call)] if call is not None else -1]
                     for callee, kind, call in node.edges]
            direct = model._direct.get(node_id) if blocks else None
            blocking = (position_of[id(direct)] if direct is not None else -1) if blocks else None
            if blocks and node_id in model.direct_through_parameters:
                blocking = THROUGH_PARAMETERS
            nodes.append([node.cached, edges, blocking])
        logs = model.link_logs.get(path, ([], []))
        products[path] = {"n": nodes, "e": effects(logs[0]), "k": effects(logs[1])}
    return products


# ----------------------------------------------------------------------------- validation (hostile input)


def valid_product(product) -> bool:
    """The shape of a module's product as `products_of` writes it; each function, edge and effect is checked as
    it is replayed (ReplayError: the whole program is linked instead)."""
    return (type(product) is dict and type(product.get("n")) is list and type(product.get("e")) is list
            and type(product.get("k")) is list)


def replay_for(stored: dict, indexes: dict[str, ModuleIndex], digests: dict[str, str]) -> LinkReplay | None:
    """The replay of the stored program (`{path: {"d": content sha256, "i": interface digest, "p": product}}`)
    into the program of `indexes` (whose files' content digests are `digests`), or None where the whole
    program must be linked: another set of modules, a changed module whose interface changed too, an entry
    that does not validate."""
    if set(stored) != set(indexes):
        return None
    clean = set()
    for path, index in indexes.items():
        entry = stored[path]
        if not (type(entry) is dict and type(entry.get("d")) is str and type(entry.get("i")) is str
                and valid_product(entry.get("p"))):
            return None
        if entry["d"] and digests.get(path) == entry["d"]:
            clean.add(path)
        elif interface_digest(index) != entry["i"]:
            return None
    return LinkReplay({path: stored[path]["p"] for path in clean}, clean)


def stored_program(model: ProjectModel, replay: LinkReplay | None, digests: dict[str, str],
                   previous: dict | None) -> dict | None:
    """What to store of `model` for the next run (see `replay_for`); None when its links cannot be stored."""
    try:
        products = products_of(model, replay)
    except KeyError:  # an edge whose call is not one of its function's own
        return None
    out = {}
    for path, product in products.items():
        digest = digests.get(path, "")
        old = previous.get(path) if previous else None
        if (replay is not None and replay.clean(path)) or (
                type(old) is dict and digest and old.get("d") == digest and type(old.get("i")) is str):
            interface = old["i"] if type(old) is dict else interface_digest(model.modules[path])
        else:
            interface = interface_digest(model.modules[path])
        out[path] = {"d": digest, "i": interface, "p": product}
    return out
