"""What every proxy kind reports: where a setting was written, the limits a route imposes, and hits.

A *route* is one path a streamed response can take through one layer: an HAProxy backend behind a
frontend, a Caddy `reverse_proxy`, an Apache `ProxyPass`, an nginx location, an Ingress path, an Envoy
route, a Traefik router. Each route carries its *limits* (the timeouts that can end a stream), which the
timeout chain compares across layers; the rules of the route's kind turn what they find into *hits*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

IDLE = "idle"  # the longest silence allowed between two reads: a slow first token or a pause cuts
TOTAL = "total"  # the whole response: any generation longer than it is cut
HEADERS = "headers"  # until the response headers: cuts only an upstream that sends them with the first token
LIMIT_KINDS = (IDLE, TOTAL, HEADERS)


@dataclass(frozen=True)
class Where:
    """A file and 1-based line (and column) a setting was written on."""

    path: str  # as displayed (relative to the working directory when below it)
    line: int
    column: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Limit:
    """One timeout that can end a stream on a route."""

    kind: str  # IDLE, TOTAL or HEADERS
    setting: str  # as the user writes it: `timeout server`, `proxy-read-timeout`, `route.timeout`
    seconds: float | None  # None: no limit (disabled or unset without a default)
    where: Where | None = None  # None: the layer's default applies
    default_source: str = ""  # for a default: where it is documented or measured

    def shown(self) -> str:
        value = "no limit" if self.seconds is None else f"{self.seconds:g} s"
        origin = str(self.where) if self.where else f"default{' (' + self.default_source + ')' if self.default_source else ''}"
        return f"{self.setting} = {value} [{origin}]"

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "setting": self.setting,
            "seconds": self.seconds,
            "where": str(self.where) if self.where else None,
            "default": self.where is None,
            "default_source": self.default_source or None,
        }


@dataclass
class Route:
    """One path of a streamed response through one layer, with the limits that can end it."""

    kind: str  # haproxy, caddy, apache, nginx, ingress-nginx, gateway-api, envoy, traefik, edge
    label: str  # "backend llm (frontend fe)", "location /v1/", "route /v1 (virtual host api)"
    where: Where | None
    limits: list[Limit] = field(default_factory=list)
    match: str = ""  # the host/path it serves, when known (for --route)

    def limit(self, kind: str) -> Limit | None:
        """The smallest finite limit of this kind (None when there is none)."""
        finite = [lim for lim in self.limits if lim.kind == kind and lim.seconds is not None and lim.seconds > 0]
        return min(finite, key=lambda lim: lim.seconds or 0.0) if finite else None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "route": self.label, "where": str(self.where) if self.where else None,
                "limits": [lim.to_dict() for lim in self.limits]}


@dataclass(frozen=True)
class Hit:
    """A rule's finding on one route, before the report layer renders it."""

    rule: str
    severity: str
    where: Where
    message: str
    fix: str
    route: str = ""


@dataclass
class Layer:
    """What one input (a file, a folder, stdin) turned out to be, and what was found in it."""

    kind: str
    name: str  # the input as given
    routes: list[Route] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    notices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Options:
    """What the checks cannot read from the config itself."""

    client_timeout: float = 600.0  # openai / anthropic SDK DEFAULT_TIMEOUT: 600 s read
    caddy_version: tuple[int, ...] | None = None
    nginx_version: tuple[int, ...] | None = None
    # an idle (read) limit at or under this cuts a slow first token or a pause: nginx's 60 s default, the
    # limit NGX003 uses (tests scale it down with their sub-second stalls)
    short_idle: float = 60.0
