"""Durations in each proxy's own syntax, as seconds (None when the text is not a duration).

- HAProxy (`configuration.txt` §2.5 "Time format"): a number with an optional unit `us ms s m h d`;
  **a bare number is milliseconds** (`timeout server 50000` is 50 s).
- Go (`time.ParseDuration`, used by Caddy, Traefik): `300ms`, `1.5h`, `2h45m`; units ns us µs ms s m h.
  Caddy also accepts `d` (days) and a bare integer as nanoseconds in JSON; Traefik reads a bare number as
  seconds.
- Gateway API (GEP-2257): `^([0-9]{1,5}(h|m|s|ms)){1,4}$`.
- Envoy (protobuf JSON `Duration`): `"15s"`, `"0.250s"`; in YAML also `{seconds: 15, nanos: 0}`.
- Apache: whole seconds (`Timeout 300`, `timeout=60`); `ProxyTimeout` also accepts `ms` (2.4.x).
"""

from __future__ import annotations

import re

_HAPROXY = re.compile(r"^(\d+)(us|ms|s|m|h|d)?$")
_HAPROXY_UNIT = {"us": 1e-6, "ms": 1e-3, None: 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d)")
_GO_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
            "d": 86400.0}
_GATEWAY = re.compile(r"^(?:[0-9]{1,5}(?:h|m|s|ms)){1,4}$")
_GATEWAY_PART = re.compile(r"([0-9]{1,5})(h|ms|m|s)")
_ENVOY = re.compile(r"^(\d+(?:\.\d{1,9})?)s$")


def haproxy(text: str) -> float | None:
    match = _HAPROXY.match(text.strip())
    if not match:
        return None
    return int(match.group(1)) * _HAPROXY_UNIT[match.group(2)]


def go(text: str, *, days: bool = False) -> float | None:
    """Go's time.ParseDuration (with `d` when `days`, as Caddy allows); "0" is zero."""
    value = text.strip()
    sign = 1.0
    if value[:1] in "+-":
        sign = -1.0 if value[0] == "-" else 1.0
        value = value[1:]
    if value == "0":
        return 0.0
    if not value:
        return None
    total, position = 0.0, 0
    for match in _GO_PART.finditer(value):
        if match.start() != position or (match.group(2) == "d" and not days):
            return None
        total += float(match.group(1)) * _GO_UNIT[match.group(2)]
        position = match.end()
    return sign * total if position == len(value) and position > 0 else None


def caddy(value: object) -> float | None:
    """A Caddyfile duration (Go syntax plus `d`), or a JSON number of nanoseconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) / 1e9
    if isinstance(value, str):
        return go(value, days=True)
    return None


def traefik(value: object) -> float | None:
    """Traefik's ptypes.Duration: a Go duration string, or a bare number of seconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return float(text)
        return go(text)
    return None


def gateway(text: object) -> float | None:
    if not isinstance(text, str) or not _GATEWAY.match(text.strip()):
        return None
    return sum(int(n) * _GO_UNIT[unit] for n, unit in _GATEWAY_PART.findall(text.strip()))


def envoy(value: object) -> float | None:
    """A protobuf Duration: `"15s"` / `"0.5s"`, or a mapping with `seconds` and `nanos`."""
    if isinstance(value, str):
        match = _ENVOY.match(value.strip())
        return float(match.group(1)) if match else None
    if isinstance(value, dict):
        seconds, nanos = value.get("seconds", 0), value.get("nanos", 0)
        try:
            return float(int(seconds)) + int(nanos) / 1e9
        except (TypeError, ValueError):
            return None
    return None


def apache(text: str) -> float | None:
    """Apache's seconds (`Timeout 300`, `timeout=60`); `ProxyTimeout 500ms` style with a unit too."""
    value = text.strip()
    match = re.fullmatch(r"(\d+)(ms|s|mi|hr)?", value)
    if not match:
        return None
    unit = {"ms": 1e-3, "s": 1.0, None: 1.0, "mi": 60.0, "hr": 3600.0}[match.group(2)]
    return int(match.group(1)) * unit


def shown(seconds: float | None) -> str:
    if seconds is None:
        return "no limit"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds:g} s ({seconds / 60:g} min)"
    return f"{seconds:g} s"
