"""Caddy: a Caddyfile (snippets and `import` followed) or a JSON config (`caddy adapt` output, `/config/`).

Streamed routes are the `reverse_proxy` handlers. What can hold or cut their streams (rules CDY001-CDY005,
rules/proxy/cdy*.yaml): `encode` around them, `buffer_responses` / `response_buffers`, the http
transport's `read_timeout` and `response_header_timeout`, and the server's `write` timeout.
Facts from Caddy's source (v2.6.2 and HEAD) and measured on Debian's Caddy 2.6.2 (docs/proxies.md):
`reverse_proxy` flushes at once for text/event-stream and for responses without a Content-Length
(`streaming.go: flushInterval`), so `flush_interval` matters only for Content-Length framed non-SSE bodies.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from dataclasses import dataclass, field

from llmdoctor.proxy import durations
from llmdoctor.proxy.inputs import MAX_INCLUDE_DEPTH, InputProblem, YNode, load_json_document, read_text
from llmdoctor.proxy.model import HEADERS, IDLE, TOTAL, Hit, Layer, Limit, Options, Route, Where
from llmdoctor.report.model import display_path

ENCODE_FLUSHES_SINCE = (2, 9, 0)  # caddy 976469ca0 (#6471): encode flushes its compressor on Flush
DEFAULT_MIN_LENGTH = 512  # modules/caddyhttp/encode/encode.go: defaultMinLength
DEFAULT_ENCODE_TYPES = ("text/*", "application/json*", "application/javascript*", "application/xhtml+xml*",
                        "application/atom+xml*", "application/rss+xml*", "image/svg+xml*")


# ----------------------------------------------------------------------------- Caddyfile lexing and parsing


@dataclass
class Token:
    text: str
    where: Where
    quoted: bool = False


@dataclass
class Directive:
    tokens: list[Token]
    block: list[Directive] | None = None

    @property
    def name(self) -> str:
        return self.tokens[0].text if self.tokens else ""

    @property
    def where(self) -> Where:
        return self.tokens[0].where

    def args(self) -> list[str]:
        return [t.text for t in self.tokens[1:]]

    def text(self) -> str:
        return " ".join(t.text for t in self.tokens)

    def sub(self, name: str) -> list[Directive]:
        return [d for d in self.block or [] if d.name == name]


def lex(text: str, shown: str) -> list[list[Token]]:
    """Logical lines of tokens (a `\\` at the end of a line continues it; quotes may span lines)."""
    lines: list[list[Token]] = []
    current: list[Token] = []
    i, line, col = 0, 1, 1
    n = len(text)

    def flush_line() -> None:
        nonlocal current
        if current:
            lines.append(current)
            current = []

    while i < n:
        ch = text[i]
        if ch == "\n":
            flush_line()
            i, line, col = i + 1, line + 1, 1
            continue
        if ch in " \t\r":
            i, col = i + 1, col + 1
            continue
        if ch == "\\" and text[i + 1:i + 2] == "\n":
            i, line, col = i + 2, line + 1, 1
            continue
        if ch == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        start = Where(shown, line, col)
        if ch in "\"`":
            quote, buf = ch, []
            i, col = i + 1, col + 1
            while i < n and text[i] != quote:
                if quote == '"' and text[i] == "\\" and i + 1 < n and text[i + 1] in '"\\':
                    i, col = i + 1, col + 1
                if text[i] == "\n":
                    line, col = line + 1, 0
                buf.append(text[i])
                i, col = i + 1, col + 1
            if i >= n:
                raise InputProblem(shown, f"unterminated {quote} quote", start.line)
            i, col = i + 1, col + 1
            current.append(Token("".join(buf), start, True))
            continue
        buf = []
        while i < n and text[i] not in " \t\r\n":
            buf.append(text[i])
            i, col = i + 1, col + 1
        word = "".join(buf)
        heredoc = re.fullmatch(r"<<([A-Za-z0-9_]+)", word)
        if heredoc:  # Caddy 2.7+ heredocs: the body is one token, up to the marker line
            end = re.compile(rf"^\s*{heredoc.group(1)}\s*$", re.MULTILINE).search(text, i)
            if end is None:
                raise InputProblem(shown, f"heredoc {word} is never closed", start.line)
            body = text[i:end.start()].lstrip("\n")
            line += text[i:end.end()].count("\n")
            i = end.end()
            current.append(Token(body, start, True))
            continue
        current.append(Token(word, start))
    flush_line()
    return lines


def _blocks(lines: list[list[Token]], shown: str) -> list[Directive]:
    """Nest logical lines by `{` (last token of a line) and `}` (a line of its own)."""
    root: list[Directive] = []
    stack: list[list[Directive]] = [root]
    opened: list[Token] = []
    for tokens in lines:
        if len(tokens) == 1 and tokens[0].text == "}" and not tokens[0].quoted:
            if len(stack) == 1:
                raise InputProblem(shown, "unexpected `}`", tokens[0].where.line)
            stack.pop()
            opened.pop()
            continue
        if tokens[-1].text == "{" and not tokens[-1].quoted:
            directive = Directive(tokens[:-1] or [tokens[-1]] if not tokens[:-1] else tokens[:-1], [])
            if not tokens[:-1]:
                directive.tokens = []
            stack[-1].append(directive)
            stack.append(directive.block)  # type: ignore[arg-type]
            opened.append(tokens[-1])
            continue
        if tokens[-1].text == "}" and not tokens[-1].quoted and len(stack) > 1 and tokens[0].text != "{":
            stack[-1].append(Directive(tokens[:-1]))
            stack.pop()
            opened.pop()
            continue
        stack[-1].append(Directive(tokens))
    if len(stack) > 1:
        raise InputProblem(shown, "unclosed `{` (missing `}`)", opened[-1].where.line)
    return root


@dataclass
class Caddyfile:
    global_options: list[Directive] = field(default_factory=list)
    sites: list[Directive] = field(default_factory=list)  # tokens = addresses, block = directives
    files: set[str] = field(default_factory=set)


def parse_caddyfile(path: str, shown: str, *, named: bool = True, text: str | None = None) -> Caddyfile:
    text = read_text(path, shown=shown, named=named) if text is None else text
    top = _blocks(lex(text, shown), shown)
    result = Caddyfile(files={shown})
    base = os.path.dirname(os.path.abspath(path)) if path != "-" else os.getcwd()
    expander = _Imports({}, base, result)
    global_options: list[Directive] = []
    if top and not top[0].tokens and top[0].block is not None:
        global_options = top.pop(0).block or []
    # top-level `import FILE` first: imported files may define snippets (Caddy allows that)
    top = expander.expand_files(top, 0, (shown,))
    rest: list[Directive] = []
    for entry in top:
        if entry.tokens and re.fullmatch(r"&?\(.+\)", entry.name) and entry.block is not None:
            expander.snippets[entry.name.lstrip("&")[1:-1]] = entry
        else:
            rest.append(entry)
    rest = expander.expand(rest, 0, (shown,))
    if rest and rest[0].block is None:  # a single site without braces: the first line is its address
        result.sites = [Directive(rest[0].tokens, rest[1:])]
    else:
        result.sites = [d for d in rest if d.block is not None]
        for stray in (d for d in rest if d.block is None):
            raise InputProblem(stray.where.path, f"`{stray.text()}` outside any site block", stray.where.line)
    result.global_options = expander.expand(global_options, 0, (shown,))
    return result


class _Imports:
    def __init__(self, snippets: dict[str, Directive], base: str, result: Caddyfile) -> None:
        self.snippets = snippets
        self.base = base
        self.result = result

    def expand_files(self, directives: list[Directive], depth: int, stack: tuple[str, ...]) -> list[Directive]:
        """Only the top level's `import FILE` lines (snippets are not known yet)."""
        out: list[Directive] = []
        for directive in directives:
            target = directive.args()[0] if directive.name == "import" and directive.args() else None
            full = None if target is None else target if os.path.isabs(target) else os.path.join(self.base, target)
            if full is not None and (glob.has_magic(full) or os.path.exists(full)):
                for shown, body in self._files(directive, depth, stack):
                    out.extend(self.expand_files(body, depth + 1, (*stack, shown)))
            else:
                out.append(directive)
        return out

    def expand(self, directives: list[Directive], depth: int, stack: tuple[str, ...]) -> list[Directive]:
        out: list[Directive] = []
        for directive in directives:
            if directive.name != "import" or not directive.args():
                if directive.block is not None:
                    directive = Directive(directive.tokens, self.expand(directive.block, depth, stack))
                out.append(directive)
                continue
            if depth >= MAX_INCLUDE_DEPTH:
                raise InputProblem(directive.where.path, f"imports nested deeper than {MAX_INCLUDE_DEPTH}",
                                   directive.where.line)
            target, args = directive.args()[0], directive.args()[1:]
            if target in self.snippets:
                if target in stack:
                    raise InputProblem(directive.where.path, f"import cycle through snippet ({target})",
                                       directive.where.line)
                body = _substitute(self.snippets[target].block or [], args)
                out.extend(self.expand(body, depth + 1, (*stack, target)))
                continue
            for shown, body in self._files(directive, depth, stack):
                out.extend(self.expand(body, depth + 1, (*stack, shown)))
        return out

    def _files(self, directive: Directive, depth: int, stack: tuple[str, ...]) -> list[tuple[str, list[Directive]]]:
        """The directives of the file(s) an `import PATH|GLOB [args]` names, args substituted."""
        if depth >= MAX_INCLUDE_DEPTH:
            raise InputProblem(directive.where.path, f"imports nested deeper than {MAX_INCLUDE_DEPTH}",
                               directive.where.line)
        target, args = directive.args()[0], directive.args()[1:]
        pattern = target if os.path.isabs(target) else os.path.join(self.base, target)
        names = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not glob.has_magic(pattern) and not os.path.exists(pattern):
            raise InputProblem(directive.where.path, f"import {target}: no snippet of that name and no such "
                                                     f"file ({pattern})", directive.where.line)
        out: list[tuple[str, list[Directive]]] = []
        for name in names:
            shown = display_path(name)
            if shown in stack:
                raise InputProblem(directive.where.path, f"import cycle: {' -> '.join((*stack, shown))}",
                                   directive.where.line)
            self.result.files.add(shown)
            text = read_text(name, shown=shown)
            body = _blocks(lex(text, shown), shown)
            out.append((shown, _substitute(body, args) if args else body))  # snippets inside keep {args}
        return out


def _substitute(directives: list[Directive], args: list[str]) -> list[Directive]:
    def replace(text: str) -> str:
        def one(match: re.Match) -> str:
            index = match.group(1) or match.group(2)
            if index == ":":
                return " ".join(args)
            return args[int(index)] if index.isdigit() and int(index) < len(args) else ""
        return re.sub(r"\{args(?:\[(\d+|:)\]|\.(\d+))\}", one, text)

    out = []
    for d in directives:
        tokens = [Token(replace(t.text), t.where, t.quoted) for t in d.tokens]
        out.append(Directive(tokens, _substitute(d.block, args) if d.block is not None else None))
    return out


# ----------------------------------------------------------------------------- the model both formats map to


@dataclass
class Encode:
    where: Where
    text: str
    matches_event_stream: bool
    min_length: int = DEFAULT_MIN_LENGTH


@dataclass
class Proxy:
    """One reverse_proxy handler with what applies to it."""

    where: Where
    label: str
    flush_interval: tuple[float | None, Where | None] = (None, None)
    buffer_responses: Where | None = None
    response_buffers: tuple[int, Where] | None = None
    read_timeout: tuple[float | None, Where | None] = (None, None)
    response_header_timeout: tuple[float | None, Where | None] = (None, None)
    encodes: list[Encode] = field(default_factory=list)
    write_timeout: tuple[float | None, Where | None] = (None, None)  # the server's


def _size(text: str) -> int | None:
    match = re.fullmatch(r"(?i)(-?\d+)\s*([kmg]i?b?|b)?", text.strip())
    if not match:
        return None
    unit = (match.group(2) or "").lower().rstrip("b").rstrip("i")
    return int(match.group(1)) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]


def _content_type_matches(patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase("text/event-stream", p.strip('"')) or p in ("*",) for p in patterns)


def _encode_from_caddyfile(d: Directive) -> Encode:
    min_length = DEFAULT_MIN_LENGTH
    types: list[str] | None = None
    for sub in d.block or []:
        if sub.name == "minimum_length" and sub.args():
            min_length = int(sub.args()[0]) if sub.args()[0].isdigit() else min_length
        if sub.name == "match" and sub.block is not None:
            headers = [m for m in sub.block if m.name == "header" and m.args()[:1] == ["Content-Type"]]
            types = [a for m in headers for a in m.args()[1:]] if headers else ["*"]
    if min_length == 0:
        min_length = DEFAULT_MIN_LENGTH  # 0 means unset: encode.go Provision
    matches = _content_type_matches(types if types is not None else list(DEFAULT_ENCODE_TYPES))
    return Encode(d.where, d.text(), matches, min_length)


def _matcher_of(d: Directive) -> str | None:
    args = d.args()
    if args and (args[0] == "*" or args[0].startswith("/") or args[0].startswith("@")):
        return args[0]
    return None


def _proxies_in(block: list[Directive], site: str, encodes: list[tuple[str | None, Encode]],
                out: list[Proxy]) -> None:
    local = list(encodes)
    for d in block:
        if d.name == "encode":
            local.append((_matcher_of(d), _encode_from_caddyfile(d)))
    for d in block:
        if d.name in ("handle", "handle_path", "route") and d.block is not None:
            matcher = _matcher_of(d)
            inherited = [(m, e) for m, e in local if m in (None, "*", matcher)]
            _proxies_in(d.block, f"{site} {d.name} {matcher or ''}".rstrip(), inherited, out)
        elif d.name == "reverse_proxy":
            matcher = _matcher_of(d)
            upstreams = [a for a in d.args() if a != matcher]
            label = f"reverse_proxy {' '.join(upstreams) or '(dynamic)'}" + (f" {matcher}" if matcher else "") + \
                f" in {site}"
            proxy = Proxy(d.where, label)
            proxy.encodes = [e for m, e in local if m in (None, "*", matcher)]
            for sub in d.block or []:
                value = sub.args()[0] if sub.args() else ""
                if sub.name == "flush_interval":
                    proxy.flush_interval = (durations.caddy(value), sub.where)
                elif sub.name == "buffer_responses":
                    proxy.buffer_responses = sub.where
                elif sub.name == "response_buffers":
                    size = -1 if value == "unlimited" else _size(value)
                    if size is not None:
                        proxy.response_buffers = (size, sub.where)
                elif sub.name == "transport" and sub.args()[:1] == ["http"]:
                    for option in sub.block or []:
                        seconds = durations.caddy(option.args()[0]) if option.args() else None
                        if option.name == "read_timeout":
                            proxy.read_timeout = (seconds, option.where)
                        elif option.name == "response_header_timeout":
                            proxy.response_header_timeout = (seconds, option.where)
            out.append(proxy)


def _port(address: str) -> str:
    """The port a Caddyfile site address or `servers` listener serves (Caddy's defaults: 443, http:// 80)."""
    text = address.strip()
    scheme, _, rest = text.rpartition("://")
    host_port = rest.split("/", 1)[0]
    match = re.search(r":(\d+)$", host_port)
    if match:
        return match.group(1)
    return "80" if scheme == "http" else "443"


def proxies_from_caddyfile(cf: Caddyfile) -> list[Proxy]:
    writes: list[tuple[str | None, tuple[float | None, Where]]] = []  # (listener port or None, timeout)
    for option in cf.global_options:
        if option.name == "servers":
            port = _port(option.args()[0]) if option.args() else None
            for sub in option.block or []:
                if sub.name == "timeouts":
                    for timeout in sub.block or []:
                        if timeout.name == "write" and timeout.args():
                            writes.append((port, (durations.caddy(timeout.args()[0]), timeout.where)))
    out: list[Proxy] = []
    for site in cf.sites:
        found: list[Proxy] = []
        addresses = [t.text.rstrip(",") for t in site.tokens]
        _proxies_in(site.block or [], "site " + ", ".join(addresses), [], found)
        ports = {_port(a) for a in addresses if a}
        write = next((w for port, w in writes if port is not None and port in ports), None) or \
            next((w for port, w in writes if port is None), None)
        for proxy in found:
            proxy.write_timeout = write or (None, None)
        out.extend(found)
    return out


def proxies_from_json(doc: YNode, shown: str) -> list[Proxy]:
    """The reverse_proxy handlers of a JSON config (`shown`: the file, for every Where)."""
    servers = doc.get("apps", "http", "servers")
    out: list[Proxy] = []
    for name, server in servers.items() if servers else []:
        write_node = server.get("write_timeout")
        write = (durations.caddy(write_node.value), Where(shown, write_node.at)) if write_node else (None, None)
        found: list[Proxy] = []
        _json_routes(server.get("routes"), f"server {name}", [], found, shown)
        for proxy in found:
            proxy.write_timeout = write
        out.extend(found)
    return out


def _json_encode(handler: YNode, shown: str) -> Encode:
    min_node = handler.get("minimum_length")
    min_length = int(min_node.value) if min_node and isinstance(min_node.value, int) and min_node.value else \
        DEFAULT_MIN_LENGTH
    match = handler.get("match")
    types = list(DEFAULT_ENCODE_TYPES)
    if match is not None:
        header = match.get("headers", "Content-Type")
        types = [e.value for e in header.elements()] if header is not None else ["*"]
    names = [k for k, _ in handler.get("encodings").items()] if handler.get("encodings") else []
    return Encode(Where(shown, _handler_line(handler)), f"encode ({', '.join(names) or 'handler'})",
                  _content_type_matches(types), min_length)


def _handler_line(handler: YNode) -> int:
    kind = handler.get("handler")
    return kind.at if kind is not None else handler.line


def _route_label(route: YNode, index: int) -> str:
    parts = []
    for matcher in route.get("match").elements() if route.get("match") else []:
        for key in ("host", "path"):
            values = matcher.get(key)
            if values is not None:
                parts.extend(str(v.value) for v in values.elements())
    return f"route {' '.join(parts)}" if parts else f"route #{index + 1}"


def _json_routes(routes: YNode | None, label: str, encodes: list[Encode], out: list[Proxy], shown: str) -> None:
    inherited = list(encodes)
    for index, route in enumerate(routes.elements() if routes else []):
        matched = route.get("match") is not None
        local = list(inherited)
        for handler in (route.get("handle").elements() if route.get("handle") else []):
            kind = handler.get("handler").value if handler.get("handler") else ""
            if kind == "encode":
                local.append(_json_encode(handler, shown))
                if not matched:
                    inherited.append(local[-1])
            elif kind == "subroute":
                _json_routes(handler.get("routes"), f"{label} {_route_label(route, index)}", local, out, shown)
            elif kind == "reverse_proxy":
                upstreams = [u.get("dial").value for u in handler.get("upstreams").elements()] \
                    if handler.get("upstreams") else []
                proxy = Proxy(Where(shown, _handler_line(handler)),
                              f"reverse_proxy {' '.join(str(u) for u in upstreams) or '(dynamic)'} in {label} "
                              f"{_route_label(route, index)}", encodes=list(local))
                flush = handler.get("flush_interval")
                if flush is not None:
                    proxy.flush_interval = (durations.caddy(flush.value), Where(shown, flush.at))
                buffered = handler.get("buffer_responses")
                if buffered is not None and buffered.value is True:
                    proxy.buffer_responses = Where(shown, buffered.at)
                buffers = handler.get("response_buffers")
                if buffers is not None and isinstance(buffers.value, int) and buffers.value != 0:
                    proxy.response_buffers = (buffers.value, Where(shown, buffers.at))
                transport = handler.get("transport")
                if transport is not None and (transport.get("protocol") is None
                                              or transport.get("protocol").value == "http"):
                    for key, attr in (("read_timeout", "read_timeout"),
                                      ("response_header_timeout", "response_header_timeout")):
                        node = transport.get(key)
                        if node is not None:
                            setattr(proxy, attr, (durations.caddy(node.value), Where(shown, node.at)))
                out.append(proxy)


# ----------------------------------------------------------------------------- rules


def _version_text(options: Options) -> str:
    return ".".join(map(str, options.caddy_version)) if options.caddy_version else ""


def cdy001(proxy: Proxy, options: Options) -> list[Hit]:
    hits = []
    for encode in proxy.encodes:
        if not encode.matches_event_stream:
            continue
        version = options.caddy_version
        if version is not None and version >= ENCODE_FLUSHES_SINCE:
            continue
        measured = ("measured on Caddy 2.6.2: with 600-byte events the stream was gzip-compressed and every event "
                    "held to the end; 178-byte events (first write under minimum_length) passed uncompressed")
        threshold = (f"once the first write of a response is larger than minimum_length ({encode.min_length} B), "
                     "Caddy compresses the whole text/event-stream response and, before 2.9.0, never flushes its "
                     "compressor until the response ends")
        if version is not None:
            severity = "error" if encode.min_length < DEFAULT_MIN_LENGTH else "warning"
            when = f"Caddy {_version_text(options)} (before 2.9.0)"
        else:
            severity = "warning"
            when = "Caddy before 2.9.0 (Debian and Ubuntu ship 2.6.2; say --caddy-version)"
        hits.append(Hit("CDY001", severity, encode.where,
                        f"`{encode.text}` applies to {proxy.label} and matches text/event-stream: on {when}, "
                        f"{threshold}. {measured}.",
                        "exclude event streams: `encode { match { header Content-Type text/html* "
                        "application/json* } }` (or keep `encode` out of the streamed route); Caddy 2.9.0+ flushes "
                        "the compressor per event", proxy.label))
    return hits


def cdy002(proxy: Proxy, options: Options) -> list[Hit]:
    if proxy.buffer_responses is not None:
        return [Hit("CDY002", "error", proxy.buffer_responses,
                    f"`buffer_responses` on {proxy.label}: Caddy reads the whole response body into memory before "
                    "sending any of it, so a stream's headers and events arrive together at the end (measured on "
                    "Caddy 2.6.2: one read after 0.91 s, headers held).",
                    "remove `buffer_responses` from the streamed route", proxy.label)]
    if proxy.response_buffers is not None:
        size, where = proxy.response_buffers
        held = "the whole response" if size < 0 else f"the first {size} bytes of each response"
        return [Hit("CDY002", "error" if size < 0 or size >= 4096 else "warning", where,
                    f"`response_buffers` on {proxy.label}: Caddy reads {held} into memory before sending it "
                    "(reverseproxy.go: bufferedBody), so a stream's first events wait until that much has arrived.",
                    "remove `response_buffers` from the streamed route", proxy.label)]
    return []


def cdy003(proxy: Proxy, options: Options) -> list[Hit]:
    seconds, where = proxy.read_timeout
    if where is None or seconds is None or seconds <= 0 or seconds > options.short_idle:
        return []
    return [Hit("CDY003", "warning", where,
                f"`read_timeout {durations.shown(seconds)}` on the http transport of {proxy.label}: it is the longest "
                "wait for the next read from the upstream, so a slow first token or a pause longer than that ends "
                "the stream. Caddy then closes the response cleanly (measured on 2.6.2: 3 events, then the "
                "terminating chunk), so the client sees a complete but short answer, with no error.",
                "raise `read_timeout` above the slowest first token and longest pause (e.g. 300s), or remove it "
                "(no limit by default)", proxy.label)]


def cdy004(proxy: Proxy, options: Options) -> list[Hit]:
    seconds, where = proxy.response_header_timeout
    if where is None or seconds is None or seconds <= 0 or seconds > options.short_idle:
        return []
    return [Hit("CDY004", "warning", where,
                f"`response_header_timeout {durations.shown(seconds)}` on {proxy.label}: an upstream that sends its "
                "headers only with the first token (as servers that write headers on the first body write do) is "
                "answered 504 after a prefill longer than that (measured: 504 at 0.5 s). Upstreams that send "
                "headers at once (uvicorn, vLLM) are not affected.",
                "raise `response_header_timeout` above the slowest time to first token, or remove it", proxy.label)]


def cdy005(proxy: Proxy, options: Options) -> list[Hit]:
    seconds, where = proxy.write_timeout
    if where is None or seconds is None or seconds <= 0 or seconds >= options.client_timeout:
        return []
    return [Hit("CDY005", "warning", where,
                f"the server's `write` timeout is {durations.shown(seconds)}: it bounds the whole response, not the "
                f"gap between writes, so every stream through {proxy.label} longer than that is cut (measured on "
                "Caddy 2.6.2: `write 0.5s` cut a 0.9 s stream after 4 events, no terminating chunk).",
                f"remove the write timeout or raise it above the longest generation (the client waits "
                f"{options.client_timeout:g} s)", proxy.label)]


CHECKS = (cdy001, cdy002, cdy003, cdy004, cdy005)


def limits(proxy: Proxy) -> list[Limit]:
    read, read_where = proxy.read_timeout
    header, header_where = proxy.response_header_timeout
    write, write_where = proxy.write_timeout
    return [
        Limit(IDLE, "transport read_timeout", read if read else None, read_where,
              "none (httptransport.go: ReadTimeout)" if read_where is None else ""),
        Limit(HEADERS, "transport response_header_timeout", header if header else None, header_where,
              "none" if header_where is None else ""),
        Limit(TOTAL, "servers timeouts write", write if write else None, write_where,
              "none" if write_where is None else ""),
    ]


def check(path: str, shown: str, options: Options, *, json_config: bool | None = None,
          text: str | None = None) -> Layer:
    layer = Layer("caddy", shown)
    text = read_text(path, shown=shown, named=True) if text is None else text
    if json_config is None:
        json_config = text.lstrip().startswith("{") and '"apps"' in text
    if json_config:
        doc = load_json_document(text, shown)
        if not isinstance(doc.value, dict):
            raise InputProblem(shown, "not a Caddy JSON config (no top-level object)")
        found = proxies_from_json(doc, shown)
        layer.files = {shown}
    else:
        cf = parse_caddyfile(path, shown, text=text)
        found = proxies_from_caddyfile(cf)
        layer.files = set(cf.files)
    if not found:
        layer.notices.append(f"{shown}: no reverse_proxy: nothing proxies")
    for proxy in found:
        layer.routes.append(Route("caddy", proxy.label, proxy.where, limits(proxy), match=proxy.label))
        for rule in CHECKS:
            layer.hits.extend(rule(proxy, options))
    return layer


def looks_like(text: str) -> bool:
    return bool(re.search(r"^\s*(reverse_proxy|encode|handle(_path)?|respond|file_server|import|tls)\b", text,
                          re.MULTILINE)) and not re.search(r";\s*$", text, re.MULTILINE)
