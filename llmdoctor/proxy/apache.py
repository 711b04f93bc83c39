"""Apache httpd with mod_proxy / mod_proxy_http: `httpd.conf`, `apache2.conf`, a vhost file, or a folder.

Read as httpd reads it: `\\` continues a line; `<Section ...>` blocks nest; `Include` / `IncludeOptional`
take a file, a folder (every file in it) or a wildcard, relative to `ServerRoot` (else the main file's
folder); `<IfModule>`, `<IfDefine>`, `<If>` are transparent (both branches are read). Streamed routes:
`ProxyPass PATH URL` (server or `<VirtualHost>`), `ProxyPass URL` inside `<Location PATH>`,
`ProxyPassMatch`, and `RewriteRule ... [P]`. Rules APA001-APA002 (rules/proxy/apa*.yaml); measured on Debian's
Apache 2.4 (docs/proxies.md), where mod_proxy_http streamed by default and mod_deflate, mod_buffer,
mod_substitute, `flushpackets` and `proxy-sendchunked` did not change that.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from llmdoctor.proxy import durations
from llmdoctor.proxy.inputs import MAX_INCLUDE_DEPTH, InputProblem, read_text
from llmdoctor.proxy.model import IDLE, Hit, Layer, Limit, Options, Route, Where
from llmdoctor.report.model import display_path

DEFAULT_TIMEOUT_S = 60.0  # httpd core: `Timeout 60` (Debian's apache2.conf sets 300)
TRANSPARENT = {"ifmodule", "ifdefine", "if", "elseif", "else", "ifversion", "ifdirective", "ifsection", "ifile"}
MAIN_NAMES = ("apache2.conf", "httpd.conf")


@dataclass
class Directive:
    name: str
    args: list[str]
    where: Where
    block: list[Directive] | None = None

    @property
    def key(self) -> str:
        return self.name.lower()

    def text(self) -> str:
        shown = " ".join(self.args)
        return f"<{self.name} {shown}>" if self.block is not None else f"{self.name} {shown}".rstrip()


def _words(text: str) -> list[str]:
    words, current, quote, in_word = [], [], None, False
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
            else:
                current.append(ch)
        elif ch in "\"'" and not current:
            quote, in_word = ch, True
        elif ch in " \t":
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(ch)
            in_word = True
    if in_word:
        words.append("".join(current))
    return words


class _Reader:
    def __init__(self, root: str) -> None:
        self.root = root
        self.files: set[str] = set()

    def read(self, path: str, shown: str, stack: tuple[str, ...], named: bool = False,
             text: str | None = None) -> list[Directive]:
        if len(stack) > MAX_INCLUDE_DEPTH:
            raise InputProblem(shown, f"includes nested deeper than {MAX_INCLUDE_DEPTH}")
        text = read_text(path, shown=shown, named=named) if text is None else text
        self.files.add(shown)
        return self._parse(text, shown, (*stack, os.path.abspath(path)))

    def _parse(self, text: str, shown: str, stack: tuple[str, ...]) -> list[Directive]:
        root: list[Directive] = []
        levels: list[tuple[Directive | None, list[Directive]]] = [(None, root)]
        pending, start = "", 0
        for number, raw in enumerate(text.splitlines(), 1):
            if not pending:
                start = number
            stripped = raw.strip()
            if stripped.endswith("\\") and not stripped.startswith("#"):
                pending += stripped[:-1] + " "
                continue
            line = (pending + stripped).strip()
            pending = ""
            if not line or line.startswith("#"):
                continue
            where = Where(shown, start, len(raw) - len(raw.lstrip()) + 1 if start == number else 1)
            if line.startswith("</"):
                name = line[2:].rstrip(">").strip()
                opened = levels[-1][0]
                if opened is None or opened.name.lower() != name.lower():
                    expected = f"</{opened.name}>" if opened else "no open section"
                    raise InputProblem(shown, f"`{line}` does not close a section (expected {expected})", number)
                levels.pop()
                continue
            if line.startswith("<"):
                if not line.endswith(">"):
                    raise InputProblem(shown, f"`{line}`: a section line must end with `>`", number)
                words = _words(line[1:-1])
                directive = Directive(words[0], words[1:], where, [])
                levels[-1][1].append(directive)
                levels.append((directive, directive.block))  # type: ignore[arg-type]
                continue
            words = _words(line)
            directive = Directive(words[0], words[1:], where)
            if directive.key in ("include", "includeoptional") and directive.args:
                levels[-1][1].extend(self._include(directive, stack))
                continue
            if directive.key == "serverroot" and directive.args and os.path.isdir(directive.args[0]):
                self.root = directive.args[0]
            levels[-1][1].append(directive)
        if len(levels) > 1:
            opened = levels[-1][0]
            raise InputProblem(shown, f"<{opened.name}> (line {opened.where.line}) is never closed",
                               text.count("\n") + 1)
        return root

    def _include(self, directive: Directive, stack: tuple[str, ...]) -> list[Directive]:
        pattern = directive.args[0]
        optional = directive.key == "includeoptional"
        full = pattern if os.path.isabs(pattern) else os.path.join(self.root, pattern)
        if os.path.isdir(full):
            names = sorted(os.path.join(full, n) for n in os.listdir(full) if not n.startswith("."))
        elif glob.has_magic(full):
            names = sorted(glob.glob(full))
            if not names and not optional:
                raise InputProblem(directive.where.path, f"Include {pattern}: the wildcard matches no file "
                                                         f"(httpd refuses to start; IncludeOptional allows that)",
                                   directive.where.line)
        elif os.path.exists(full):
            names = [full]
        elif optional:
            names = []
        else:
            raise InputProblem(directive.where.path, f"Include {pattern}: no such file {full} (relative includes "
                                                     "resolve against ServerRoot, else the main file's folder)",
                               directive.where.line)
        out: list[Directive] = []
        for name in names:
            if os.path.isdir(name):
                continue
            if os.path.abspath(name) in stack:
                raise InputProblem(directive.where.path, f"include cycle: {display_path(name)} includes itself "
                                                         "through this line", directive.where.line)
            out.extend(self.read(name, display_path(name), stack))
        return out


@dataclass
class Scope:
    """The directives that apply at one level: the server, a virtual host, a location."""

    kind: str
    where: Where | None
    directives: list[Directive] = field(default_factory=list)
    parent: Scope | None = None
    path: str = ""  # a Location's path

    def find(self, name: str) -> Directive | None:
        """The last `name` directive in this scope or the nearest enclosing one."""
        scope: Scope | None = self
        while scope is not None:
            found = [d for d in scope.directives if d.key == name.lower()]
            if found:
                return found[-1]
            scope = scope.parent
        return None

    def all(self, name: str) -> list[Directive]:
        out, scope = [], self
        while scope is not None:
            out.extend(d for d in scope.directives if d.key == name.lower())
            scope = scope.parent
        return out


@dataclass
class ProxyRoute:
    path: str
    url: str
    params: dict[str, tuple[str, Where]]
    where: Where
    scope: Scope  # where ProxyTimeout/Timeout/CacheEnable are looked up
    location: Scope | None
    label: str


def _params(words: list[str], where: Where) -> dict[str, tuple[str, Where]]:
    out = {}
    for word in words:
        key, eq, value = word.partition("=")
        if eq:
            out[key.lower()] = (value, where)
    return out


def _flatten(directives: list[Directive]) -> list[Directive]:
    out = []
    for d in directives:
        if d.block is not None and d.key in TRANSPARENT:
            out.extend(_flatten(d.block))
        else:
            out.append(d)
    return out


def _routes(directives: list[Directive], scope: Scope, out: list[ProxyRoute], proxies: list[Directive]) -> None:
    for d in _flatten(directives):
        if d.block is None:
            scope.directives.append(d)
    for d in _flatten(directives):
        if d.block is not None:
            key = d.key
            if key == "virtualhost":
                child = Scope("virtual host", d.where, parent=scope)
                _routes(d.block, child, out, proxies)
            elif key in ("location", "locationmatch"):
                child = Scope("location", d.where, parent=scope, path=d.args[0] if d.args else "")
                _routes(d.block, child, out, proxies)
            elif key in ("proxy", "proxymatch"):
                proxies.append(d)
            continue
        if d.key in ("proxypass", "proxypassmatch"):
            args = [a for a in d.args if a]
            if scope.kind == "location":
                if not args or args[0] == "!":
                    continue
                path, url, rest = scope.path, args[0], args[1:]
            else:
                if len(args) < 2 or args[1] == "!":
                    continue
                path, url, rest = args[0], args[1], args[2:]
            where_scope = scope.parent if scope.kind == "location" else scope
            out.append(ProxyRoute(path, url, _params(rest, d.where), d.where, where_scope,
                                  scope if scope.kind == "location" else None,
                                  f"{d.name} {path} -> {url}{_in(scope)}"))
        elif d.key == "rewriterule" and len(d.args) >= 3 and re.search(r"(?i)\[(?:[^\]]*,)?\s*(P|proxy)\s*[,\]]",
                                                                           d.args[2]):
            out.append(ProxyRoute(d.args[0], d.args[1], {}, d.where, scope, None,
                                  f"RewriteRule {d.args[0]} -> {d.args[1]} [P]{_in(scope)}"))


def _in(scope: Scope) -> str:
    host = scope
    while host is not None and host.kind != "virtual host":
        host = host.parent
    if host is None:
        return ""
    names = [d.args[0] for d in host.directives if d.key == "servername" and d.args]
    return f" (virtual host {names[0]})" if names else f" (virtual host at line {host.where.line})"


def _worker_timeout(route: ProxyRoute, proxies: list[Directive], scope: Scope) -> tuple[float, Directive | None,
                                                                                          str]:
    if "timeout" in route.params:
        value, where = route.params["timeout"]
        seconds = durations.apache(value)
        if seconds is not None:
            return seconds, Directive("ProxyPass", [f"timeout={value}"], where), "timeout="
    url = route.url.split("|", 1)[-1]
    for block in proxies:
        target = block.args[0] if block.args else ""
        if target and (url.startswith(target.rstrip("*")) or (target.startswith("balancer://")
                                                               and url.startswith(target))):
            for d in _flatten(block.block or []):
                if d.key in ("proxyset", "balancermember"):
                    for word in d.args:
                        if word.lower().startswith("timeout="):
                            seconds = durations.apache(word.partition("=")[2])
                            if seconds is not None:
                                return seconds, d, "timeout="
    for d in scope.all("proxyset"):
        if d.args and url.startswith(d.args[0]):
            for word in d.args[1:]:
                if word.lower().startswith("timeout="):
                    seconds = durations.apache(word.partition("=")[2])
                    if seconds is not None:
                        return seconds, d, "timeout="
    for name in ("ProxyTimeout", "Timeout"):
        d = scope.find(name)
        if d is not None and d.args:
            seconds = durations.apache(d.args[0])
            if seconds is not None:
                return seconds, d, name
    return DEFAULT_TIMEOUT_S, None, "Timeout"


def _cache_enable(route: ProxyRoute) -> Directive | None:
    if route.location is not None:
        found = [d for d in route.location.directives if d.key == "cacheenable"]
        if found:
            return found[-1]
        disabled = [d for d in route.location.directives if d.key == "cachedisable"]
        if disabled:
            return None
    for d in route.scope.all("cachedisable"):
        if d.args and route.path.startswith(d.args[0]):
            return None
    for d in route.scope.all("cacheenable"):
        if len(d.args) >= 2 and (route.path.startswith(d.args[1]) or d.args[1] in ("/", "*")):
            return d
    return None


def apa001(route: ProxyRoute, timeout: tuple[float, Directive | None, str], options: Options) -> list[Hit]:
    seconds, directive, _ = timeout
    if seconds > options.short_idle:
        return []
    said = f"`{directive.text()}` ({directive.where})" if directive else (
        f"no Timeout, ProxyTimeout or timeout= is set, so the {DEFAULT_TIMEOUT_S:g} s default applies")
    return [Hit("APA001", "warning", directive.where if directive else route.where,
                f"the backend read timeout of {route.label} is {durations.shown(seconds)}: {said}. mod_proxy_http ends "
                "a response whose backend stays silent that long, so a slow first token or a pause cuts the stream "
                "(measured on Apache 2.4: status 200, body cut without the terminating chunk, `AH01110: error "
                "reading response`). Precedence measured: `timeout=` on the worker, then ProxyTimeout, then "
                "Timeout.",
                "add `timeout=300` to the ProxyPass line (or `ProxyTimeout 300` in the virtual host)", route.label)]


def apa002(route: ProxyRoute, options: Options) -> list[Hit]:
    directive = _cache_enable(route)
    if directive is None:
        return []
    return [Hit("APA002", "warning", directive.where,
                f"`{directive.text()}` covers {route.label}: mod_cache stores a cacheable response while streaming "
                "it and then replays it whole, without asking the backend (measured on Apache 2.4: the second GET "
                "got all events in one read after 4 ms with a Content-Length). A response is stored when it allows "
                "it (`Cache-Control: max-age`, or no validators with `CacheIgnoreNoLastMod On` and "
                "`CacheDefaultExpire`); `Cache-Control: no-cache` prevented it. POST requests are never cached.",
                f"`CacheDisable {route.path}` (or leave the streamed path out of CacheEnable), and send "
                "`Cache-Control: no-store` from the backend", route.label)]


def check(path: str, shown: str, options: Options, text: str | None = None) -> Layer:
    """A main config file (or a folder holding one); `text`: its content already read (stdin)."""
    layer = Layer("apache", shown)
    if text is None and os.path.isdir(path):
        main = next((os.path.join(path, n) for n in MAIN_NAMES if os.path.isfile(os.path.join(path, n))), None)
        if main is None:
            raise InputProblem(shown, f"no {' or '.join(MAIN_NAMES)} in this folder")
        path, shown = main, display_path(main)
    reader = _Reader(os.path.dirname(os.path.abspath(path)) if text is None else os.getcwd())
    directives = reader.read(path, shown, (), named=True, text=text)
    layer.files = reader.files
    server = Scope("server", None)
    found: list[ProxyRoute] = []
    proxies: list[Directive] = []
    _routes(directives, server, found, proxies)
    if not found:
        layer.notices.append(f"{shown}: no ProxyPass or RewriteRule [P]: nothing proxies")
    for route in found:
        timeout = _worker_timeout(route, proxies, route.scope)
        seconds, directive, name = timeout
        setting = "worker timeout=" if name == "timeout=" else name
        layer.routes.append(Route("apache", route.label, route.where,
                                  [Limit(IDLE, setting, seconds, directive.where if directive else None,
                                         "httpd core: Timeout 60" if directive is None else "")],
                                  match=route.path))
        layer.hits.extend(apa001(route, timeout, options))
        layer.hits.extend(apa002(route, options))
    return layer


def looks_like(text: str) -> bool:
    return bool(re.search(r"^\s*(<VirtualHost\b|<Location\b|ProxyPass\b|ProxyPassReverse\b|LoadModule\b|"
                          r"ServerName\b|DocumentRoot\b|<Directory\b|Listen\s+\d)", text, re.MULTILINE | re.IGNORECASE)
                and not re.search(r";\s*$", text, re.MULTILINE))
