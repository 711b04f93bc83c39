"""The timeout chain: every layer's limits on a streamed route, and which one ends a long generation first.

Layers are given client-side first (`llmdoctor proxy ingress.yaml haproxy.cfg nginx.conf`), edges
(`--edge cloudflare`) in front of them, and the client's own read timeout (`--client-timeout`, default 600 s:
openai and anthropic `DEFAULT_TIMEOUT`) in front of all. Within a layer with several routes, each route is
listed; the chain's verdict takes each layer's tightest route unless `--route` narrows them to the streamed
ones. Three questions, three limits: the longest silence (a slow first token or a pause), the longest whole
response (a long generation), and the longest wait for headers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from llmdoctor.proxy import durations
from llmdoctor.proxy.model import HEADERS, IDLE, TOTAL, Layer, Limit, Route, Where


@lru_cache(maxsize=1)
def edges() -> dict:
    import yaml

    from llmdoctor.proxy.catalog import rules_dir

    return yaml.safe_load((rules_dir() / "edges.yaml").read_text(encoding="utf-8"))["edges"]


def edge_layer(name: str) -> tuple[Layer, list[str]]:
    spec = edges()[name]
    limits = [Limit(item["kind"], item["setting"], float(item["seconds"]), None,
                    f"{item['note']}; {item['source']}") for item in spec["limits"]]
    layer = Layer("edge", spec["name"], routes=[Route("edge", spec["name"], None, limits)])
    notes = list(spec.get("notes") or [])
    if spec.get("buffered"):
        notes.insert(0, spec["buffered"])
    return layer, notes


@dataclass
class Step:
    layer: str  # the input or edge it comes from
    kind: str
    route: str
    limits: dict[str, Limit | None]


@dataclass
class Chain:
    client_timeout: float
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    first: dict[str, Step | None] = field(default_factory=dict)  # per limit kind: the step that cuts first

    def to_dict(self) -> dict:
        def limit(lim: Limit | None) -> dict | None:
            return lim.to_dict() if lim else None

        out = {
            "client_timeout_s": self.client_timeout,
            "layers": [{"input": s.layer, "kind": s.kind, "route": s.route,
                        **{k: limit(v) for k, v in s.limits.items()}} for s in self.steps],
            "first_to_cut": {},
            "notes": self.notes,
        }
        for kind, step in self.first.items():
            lim = step.limits[kind] if step else None
            out["first_to_cut"][kind] = None if step is None else {
                "input": step.layer, "route": step.route, "setting": lim.setting if lim else None,
                "seconds": lim.seconds if lim else None, "where": str(lim.where) if lim and lim.where else None}
        return out

    def lines(self) -> list[str]:
        out = [f"timeout chain (client first; the client waits {durations.shown(self.client_timeout)} for each read):"]
        for step in self.steps:
            parts = []
            for kind, label in ((IDLE, "silence"), (TOTAL, "whole response"), (HEADERS, "headers")):
                lim = step.limits.get(kind)
                if lim is not None:
                    origin = str(lim.where) if lim.where else "default"
                    parts.append(f"{label} {durations.shown(lim.seconds)} ({lim.setting}, {origin})")
            out.append(f"  {step.layer}: {step.route}: " + ("; ".join(parts) if parts else "no limit found"))
        idle = self.first.get(IDLE)
        total = self.first.get(TOTAL)
        if idle is not None:
            lim = idle.limits[IDLE]
            assert lim is not None
            out.append(f"  a first token or pause longer than {durations.shown(lim.seconds)} is cut first by "
                       f"{idle.layer} ({idle.route}: {lim.setting})")
        else:
            out.append(f"  no layer limits a silence: the client's {durations.shown(self.client_timeout)} read timeout "
                       "decides")
        if total is not None:
            lim = total.limits[TOTAL]
            assert lim is not None
            out.append(f"  a generation longer than {durations.shown(lim.seconds)} is cut by {total.layer} "
                       f"({total.route}: {lim.setting}), however steadily it streams")
        else:
            out.append("  no layer bounds the whole response")
        out.extend(f"  note: {note}" for note in self.notes)
        return out


def build(layers: list[Layer], client_timeout: float, notes: list[str] | None = None) -> Chain:
    chain = Chain(client_timeout, notes=list(notes or []))
    client = Limit(IDLE, "client read timeout (--client-timeout)", client_timeout, None,
                   "openai/anthropic DEFAULT_TIMEOUT 600 s")
    chain.steps.append(Step("client", "client", "SDK", {IDLE: client, TOTAL: None, HEADERS: None}))
    tightest: dict[str, list[Step]] = {IDLE: [], TOTAL: [], HEADERS: []}
    for layer in layers:
        per_kind: dict[str, Step | None] = {IDLE: None, TOTAL: None, HEADERS: None}
        for route in layer.routes:
            step = Step(layer.name, layer.kind, route.label,
                        {kind: route.limit(kind) or _unlimited(route, kind) for kind in (IDLE, TOTAL, HEADERS)})
            chain.steps.append(step)
            for kind in (IDLE, TOTAL, HEADERS):
                lim = route.limit(kind)
                if lim is None:
                    continue
                best = per_kind[kind]
                if best is None or (lim.seconds or 0) < (best.limits[kind].seconds or 0):  # type: ignore[union-attr]
                    per_kind[kind] = step
        for kind, step in per_kind.items():
            if step is not None:
                tightest[kind].append(step)
    chain.steps[0].limits[IDLE] = client
    for kind in (IDLE, TOTAL, HEADERS):
        candidates = [s for s in tightest[kind] if s.limits[kind] is not None]
        if kind == IDLE:
            candidates.append(chain.steps[0])
        finite = [s for s in candidates if s.limits[kind] and s.limits[kind].seconds]  # type: ignore[union-attr]
        chain.first[kind] = min(finite, key=lambda s: s.limits[kind].seconds) if finite else None  # type: ignore[union-attr]
        if kind == IDLE and chain.first[kind] is chain.steps[0]:
            chain.first[kind] = None
    return chain


def _unlimited(route: Route, kind: str) -> Limit | None:
    """The route's own entry for a limit kind that does not bound anything (shown, so defaults are visible)."""
    return next((lim for lim in route.limits if lim.kind == kind), None)


__all__ = ["Chain", "Where", "build", "edge_layer", "edges"]
