"""HAProxy (`haproxy.cfg`, or a folder of `*.cfg` loaded in order as `haproxy -f DIR` does).

Sections are `global`, `defaults [NAME] [from NAME]`, `frontend|backend|listen NAME [from NAME]` and others
(`cache`, `peers`, ...). A proxy takes what it does not set itself from the `defaults` section named with
`from`, else from the last `defaults` section above it (configuration.txt §4: each `defaults` section resets
the previous one). `mode` defaults to tcp. Streamed routes: each backend behind each frontend that names it
(`default_backend`, `use_backend`), and each `listen` section. Rules HAP001–HAP005 (rules/proxy/hap*.yaml).
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from llmdoctor.proxy import durations
from llmdoctor.proxy.inputs import InputProblem, read_text
from llmdoctor.proxy.model import IDLE, Hit, Layer, Limit, Options, Route, Where
from llmdoctor.report.model import display_path

SECTIONS = {"global", "defaults", "frontend", "backend", "listen", "peers", "resolvers", "userlist", "cache",
            "program", "http-errors", "ring", "mailers", "crt-store", "traces", "log-forward", "fcgi-app"}
PROXIES = {"frontend", "backend", "listen"}
MEASURED_HOLD = ("measured on HAProxy 2.6: every write to the client was held about 200 ms (events 150 ms apart "
                 "arrived two at a time, the first 210-280 ms late; events 20 ms apart in bursts of ~10)")


@dataclass
class Line:
    words: list[str]
    where: Where

    def text(self) -> str:
        return " ".join(self.words)


@dataclass
class Section:
    kind: str
    name: str
    where: Where
    index: int
    parent_name: str | None = None  # `from NAME`
    lines: list[Line] = field(default_factory=list)
    defaults: Section | None = None

    def label(self) -> str:
        return f"{self.kind} {self.name}" if self.name else self.kind

    def chain(self) -> list[Section]:
        """This section, then its defaults, then theirs (a `defaults ... from` chain)."""
        out, seen, current = [], set(), self
        while current is not None and id(current) not in seen:
            out.append(current)
            seen.add(id(current))
            current = current.defaults
        return out

    def option(self, name: str) -> tuple[bool, Line | None]:
        """`option NAME` / `no option NAME` as effective here (own lines first, then defaults)."""
        for section in self.chain():
            found = None
            for line in section.lines:
                if line.words[:2] == ["option", name]:
                    found = (True, line)
                elif line.words[:3] == ["no", "option", name]:
                    found = (False, line)
            if found:
                return found
        return False, None

    def setting(self, *prefix: str) -> Line | None:
        """The last line starting with `prefix`, here or in the defaults."""
        for section in self.chain():
            found = [line for line in section.lines if line.words[: len(prefix)] == list(prefix)]
            if found:
                return found[-1]
        return None

    def rules(self, *prefix: str) -> list[Line]:
        out = []
        for section in self.chain():
            out.extend(line for line in section.lines if line.words[: len(prefix)] == list(prefix))
        return out

    @property
    def mode(self) -> str:
        line = self.setting("mode")
        return line.words[1] if line and len(line.words) > 1 else "tcp"

    def timeout(self, name: str) -> tuple[float | None, Line | None]:
        line = self.setting("timeout", name)
        if line is None or len(line.words) < 3:
            return None, line
        return durations.haproxy(line.words[2]), line


@dataclass
class Config:
    sections: list[Section] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def tokenize(line: str) -> list[str]:
    """HAProxy's word splitting: blanks separate words; quotes and backslashes escape; `#` starts a comment."""
    words: list[str] = []
    current: list[str] = []
    quote: str | None = None
    in_word = False
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"' and i + 1 < len(line):
                i += 1
                current.append(line[i])
            else:
                current.append(ch)
        elif ch in "\"'":
            quote, in_word = ch, True
        elif ch == "\\" and i + 1 < len(line):
            i += 1
            current.append(line[i])
            in_word = True
        elif ch == "#":
            break
        elif ch in " \t\r":
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(ch)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(current))
    return words


def parse_text(text: str, shown: str, config: Config) -> None:
    current: Section | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        words = tokenize(raw)
        if not words or words[0].startswith("."):  # .if/.else/.endif/.diag...: both branches are kept
            continue
        where = Where(shown, number, len(raw) - len(raw.lstrip()) + 1)
        if words[0] in SECTIONS:
            name = words[1] if len(words) > 1 and words[1] != "from" else ""
            parent = words[words.index("from") + 1] if "from" in words[1:-1] else None
            current = Section(words[0], name, where, len(config.sections), parent)
            config.sections.append(current)
            continue
        if current is None:
            raise InputProblem(shown, f"`{words[0]}` before any section (global, defaults, frontend, backend, "
                                      "listen): is this an HAProxy config?", number)
        current.lines.append(Line(words, where))


def load(path: str, shown: str, text: str | None = None) -> Config:
    """A file, a folder of *.cfg (in order, as `haproxy -f DIR`), or `text` already read (stdin)."""
    config = Config()
    if text is not None:
        config.files.append(shown)
        parse_text(text, shown, config)
    elif os.path.isdir(path):
        names = sorted(p for p in glob.glob(os.path.join(path, "*.cfg")))
        if not names:
            raise InputProblem(shown, "no *.cfg file in this folder (haproxy -f DIR loads those)")
        for name in names:
            config.files.append(name)
            parse_text(read_text(name, shown=display_path(name)), display_path(name), config)
    else:
        config.files.append(path)
        parse_text(read_text(path, shown=shown, named=True), shown, config)
    _link_defaults(config)
    return config


def _link_defaults(config: Config) -> None:
    named = {s.name: s for s in config.sections if s.kind == "defaults" and s.name}
    last: Section | None = None
    for section in config.sections:
        if section.kind not in PROXIES and section.kind != "defaults":
            continue
        if section.parent_name:
            section.defaults = named.get(section.parent_name)
            if section.defaults is None:
                raise InputProblem(section.where.path, f"{section.label()}: `from {section.parent_name}` names no "
                                                       "defaults section", section.where.line)
        elif section.kind != "defaults":
            section.defaults = last
        if section.kind == "defaults":
            last = section


@dataclass
class Unit:
    """A backend as reached through one frontend (or a listen section, which is both)."""

    frontend: Section | None
    backend: Section

    def label(self) -> str:
        if self.backend.kind == "listen":
            return self.backend.label()
        via = f" (frontend {self.frontend.name})" if self.frontend else ""
        return f"{self.backend.label()}{via}"

    def sides(self) -> list[Section]:
        return [s for s in (self.frontend, self.backend) if s is not None and s is not self.backend] + [self.backend]


def units(config: Config) -> list[Unit]:
    backends = {s.name: s for s in config.sections if s.kind == "backend"}
    used: set[str] = set()
    out: list[Unit] = []
    for section in config.sections:
        if section.kind == "listen":
            out.append(Unit(section, section))
        if section.kind not in ("frontend", "listen"):
            continue
        names = []
        for line in section.lines:
            if line.words[0] in ("default_backend", "use_backend") and len(line.words) > 1:
                names.append(line.words[1])
        for name in dict.fromkeys(names):
            if name in backends:
                used.add(name)
                out.append(Unit(section, backends[name]))
    out.extend(Unit(None, b) for name, b in backends.items() if name not in used)
    return out


def limits(unit: Unit) -> list[Limit]:
    backend = unit.backend
    server, server_line = backend.timeout("server")
    tunnel, tunnel_line = backend.timeout("tunnel")
    out = []
    if backend.mode == "tcp" and tunnel is not None:
        out.append(Limit(IDLE, "timeout tunnel", tunnel, tunnel_line.where if tunnel_line else None))
    else:
        out.append(Limit(IDLE, "timeout server", server, server_line.where if server_line else None,
                         "none: HAProxy warns at start and never times out" if server_line is None else ""))
    return out


def route(unit: Unit) -> Route:
    return Route("haproxy", unit.label(), unit.backend.where, limits(unit), match=unit.label())


def _where(line: Line | None) -> str:
    return str(line.where) if line else "default"


def hap001(unit: Unit, options: Options) -> list[Hit]:
    if unit.backend.mode != "http":
        return []
    states = [(side, *side.option("http-no-delay")) for side in unit.sides()]
    if any(enabled for _, enabled, _ in states):
        return []
    disabled = next((line for _, _, line in states if line is not None), None)
    where = disabled.where if disabled else unit.backend.where
    said = f"`{disabled.text()}` ({disabled.where}) turns it off" if disabled else "it is off by default"
    return [Hit("HAP001", "warning", where,
                f"`option http-no-delay` is not set for {unit.label()} ({said}): HAProxy then holds small writes "
                f"to merge them, so each streamed event can wait ~200 ms; {MEASURED_HOLD}.",
                f"add `option http-no-delay` to {unit.backend.label()}: the streamed backends only (HAProxy's "
                "docs advise against it by default: more packets, more CPU)",
                unit.label())]


def hap002(unit: Unit, options: Options) -> list[Hit]:
    backend = unit.backend
    limit = limits(unit)[0]
    if limit.seconds is None or limit.seconds > options.short_idle or limit.where is None:
        return []
    tunnel_note = ""
    if backend.mode == "http":
        tunnel_line = backend.setting("timeout", "tunnel")
        if tunnel_line is not None:
            tunnel_note = (f" `{tunnel_line.text()}` ({tunnel_line.where}) does not change that: it applies to "
                           "WebSocket/CONNECT tunnels, not to an HTTP response (measured).")
    line = backend.setting("timeout", "tunnel" if limit.setting == "timeout tunnel" else "server")
    return [Hit("HAP002", "warning", line.where if line else backend.where,
                f"`{line.text() if line else limit.setting}` for {unit.label()} is {durations.shown(limit.seconds)}: "
                "HAProxy closes a response whose upstream stays silent that long, so a slow first token or a "
                "pause longer than that cuts the stream (measured: status 200, body cut without the terminating "
                "chunk). `timeout client` does not cut it (measured)." + tunnel_note,
                f"`timeout server 300s` in {backend.label()} (longer than the slowest first token and longest "
                "pause), or an SSE comment heartbeat from the upstream more often than that",
                unit.label())]


def hap003(unit: Unit, options: Options) -> list[Hit]:
    backend = unit.backend
    if backend.mode != "http":
        return []
    tunnel, tunnel_line = backend.timeout("tunnel")
    server, server_line = backend.timeout("server")
    if tunnel_line is None or tunnel is None or server is None or tunnel <= server:
        return []
    return [Hit("HAP003", "warning", tunnel_line.where,
                f"`{tunnel_line.text()}` for {unit.label()} does not cover a streamed HTTP response: it applies "
                f"only once a connection is upgraded (WebSocket, CONNECT). The stream is still cut after "
                f"{durations.shown(server)} of silence by `timeout server` ({_where(server_line)}); measured: "
                "`timeout server 1s` with `timeout tunnel 1h` cut a stream at a 2 s pause.",
                f"raise `timeout server` in {backend.label()} instead (e.g. `timeout server 300s`)", unit.label())]


def hap004(unit: Unit, options: Options) -> list[Hit]:
    hits = []
    for side in unit.sides():
        for line in side.rules("http-response", "wait-for-body"):
            at_least = line.words[line.words.index("at-least") + 1] if "at-least" in line.words[:-1] else None
            if at_least is None:
                hits.append(Hit("HAP004", "error", line.where,
                                f"`{line.text()}` in {side.label()} holds the response of {unit.label()} until the "
                                "whole body has arrived, the buffer is full or the time is up: headers and events "
                                "of a stream arrive together at the end (measured: one read after 1.0 s, headers "
                                "held).",
                                "remove the rule for streamed paths (add `unless { res.hdr(content-type) -m beg "
                                "text/event-stream }`), or add `at-least 1` so it releases at the first byte",
                                unit.label()))
            else:
                hits.append(Hit("HAP004", "warning", line.where,
                                f"`{line.text()}` in {side.label()} holds the first {at_least} bytes of each "
                                f"response of {unit.label()}: a stream's first events wait until that much has "
                                "arrived (measured with `at-least 100`: released after the first 178-byte event).",
                                "skip the rule for text/event-stream responses, or lower `at-least`", unit.label()))
    return hits


def hap005(unit: Unit, options: Options) -> list[Hit]:
    hits = []
    for side in unit.sides():
        for line in side.rules("http-response", "cache-store"):
            hits.append(Hit("HAP005", "warning", line.where,
                            f"`{line.text()}` in {side.label()} stores cacheable responses of {unit.label()} and "
                            "replays them whole without asking the upstream: a GET stream whose response allows "
                            "caching (e.g. `Cache-Control: max-age=60`) came back from the cache as one burst "
                            "(measured). HAProxy caches GET and HEAD only, so POST generations are not stored.",
                            "`http-response cache-store` only for static paths (`if { path_beg /static }`), and "
                            "`Cache-Control: no-store` on streamed responses", unit.label()))
    return hits


CHECKS = (hap001, hap002, hap003, hap004, hap005)


def check(path: str, shown: str, options: Options, text: str | None = None) -> Layer:
    config = load(path, shown, text)
    layer = Layer("haproxy", shown, files={display_path(f) if text is None else f for f in config.files})
    found = units(config)
    if not found:
        layer.notices.append(f"{shown}: no backend or listen section: nothing proxies")
    for unit in found:
        layer.routes.append(route(unit))
        for rule in CHECKS:
            layer.hits.extend(rule(unit, options))
    return layer


def looks_like(text: str) -> bool:
    """An HAProxy config: section keywords at the start of lines, no braces or semicolons structure."""
    starts = re.findall(r"^(global|defaults|frontend|backend|listen)\b", text, re.MULTILINE)
    return bool(starts) and "{" not in re.sub(r"#.*|\{[^}\n]*\}", "", text)
