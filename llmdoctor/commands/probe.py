"""`llmdoctor probe URL`: options and rendering only; the work lives in `llmdoctor.probe`."""

from __future__ import annotations

import typer

from llmdoctor.commands.options import PLAIN_FORMATS, format_option

OPENAI_PROMPT = "Count from 1 to 30, one number per line, nothing else."
OPENAI_MAX_TOKENS = 120
MAX_BODY_BYTES = 64 * 2**20


def register(app: typer.Typer) -> None:
    app.command("probe")(probe)


def probe(
    url: str = typer.Argument(..., metavar="URL", help="The endpoint to probe, e.g. https://llm.example.com/v1/chat/completions."),
    method: str = typer.Option(None, "--method", "-X", metavar="METHOD", help="HTTP method (default GET, or POST with a body)."),
    header: list[str] = typer.Option(None, "--header", "-H", metavar="'NAME: VALUE'", help="A request header 'Name: value' "
                                     "(repeatable). Secret values never appear in the output."),
    data: str = typer.Option(None, "--data", "-d", metavar="BODY", help="Request body, as is; @FILE reads a file, @- stdin."),
    json_body: str = typer.Option(None, "--json", metavar="JSON", help="JSON request body (validated, sent with Content-Type: "
                                  "application/json); @FILE reads a file, @- stdin."),
    openai: str = typer.Option(None, "--openai", metavar="MODEL", help="Probe an OpenAI-compatible endpoint: "
                               "POST a streaming chat-completions request for MODEL (a base URL gets "
                               "/v1/chat/completions appended); a stream without `data: [DONE]` is truncated."),
    trials: int = typer.Option(1, "--trials", min=1, max=50, metavar="N", help="Repeat the probe N times and vote."),
    timeout: float = typer.Option(30.0, "--timeout", metavar="SECONDS", help="Seconds each trial may take, connection included; "
                                  "the recording stops there."),
    min_events: int = typer.Option(5, "--min-events", min=2, metavar="N", help="Events needed for a verdict (fewer: "
                                   "inconclusive)."),
    direct: str = typer.Option(None, "--direct", metavar="UPSTREAM_URL", help="Also probe the upstream itself "
                               "(same request, trials alternating) and name the hop that adds buffering or delay."),
    fmt: str = format_option(*PLAIN_FORMATS),
) -> None:
    """Measure whether a live endpoint streams: time to headers, each read, each event; verdict and fix.

    Exit 0 streamed; 1 buffered, coalesced or truncated; 2 could not probe, or inconclusive. With --direct:
    0 no hop holds the stream (or only the upstream is slow), 1 a hop or the upstream holds or cuts it.
    """
    import sys

    from llmdoctor.errors import UserError

    bodies = [name for name, value in (("--data", data), ("--json", json_body), ("--openai", openai)) if value]
    if len(bodies) > 1:
        raise UserError(f"give one request body: {' and '.join(bodies)} were both given")
    headers = parse_headers(header or [])
    content: bytes | None = None
    expect_done = False
    if data is not None:
        content = read_body(data, "--data")
    elif json_body is not None:
        content = _valid_json(read_body(json_body, "--json"))
        _default_header(headers, "Content-Type", "application/json")
    elif openai is not None:
        url = openai_url(url)
        content = openai_body(openai)
        _default_header(headers, "Content-Type", "application/json")
        _default_header(headers, "Accept", "text/event-stream")
        expect_done = True
    chosen_method = (method or ("POST" if content is not None else "GET")).upper()

    if direct is not None:
        from llmdoctor.probe.hops import probe_hops
        from llmdoctor.probe.hops import render_text as render_hops

        if openai is not None:
            direct = openai_url(direct)
        hops = probe_hops(url, direct, trials=trials, method=chosen_method, headers=headers, content=content,
                          timeout=timeout, min_events=min_events, expect_done=expect_done)
        if fmt == "json":
            import json

            from llmdoctor.probe.redact import scrub

            text = json.dumps(hops.to_dict(), indent=2)
            sys.stdout.write(scrub(scrub(text, hops.public.result.secrets), hops.direct.result.secrets) + "\n")
        else:
            render_hops(hops, sys.stdout)
        raise typer.Exit(hops.exit_code)

    from llmdoctor.probe import run_probe
    from llmdoctor.probe.render import render_text, to_json

    result = run_probe(url, method=chosen_method, headers=headers, content=content, timeout=timeout,
                       min_events=min_events, trials=trials, expect_done=expect_done)
    if fmt == "json":
        sys.stdout.write(to_json(result) + "\n")
    else:
        render_text(result, sys.stdout)
    raise typer.Exit(result.exit_code)


def parse_headers(values: list[str]) -> list[tuple[str, str]]:
    """`Name: value` pairs; what HTTP cannot carry is rejected by `llmdoctor.probe.check_request`."""
    import re

    from llmdoctor.errors import UserError
    from llmdoctor.probe import HEADER_NAME

    headers = []
    for value in values:
        name, colon, rest = value.partition(":")
        if not colon or not HEADER_NAME.fullmatch(name.strip()):
            # only a leading name followed by a separator: the rest, or a lone word, may be a secret
            # (`-H "Authorization Bearer sk-..."`, `-H "$KEY"`)
            leading = re.match(f"({HEADER_NAME.pattern})[\\s=:]", value.strip())
            shown = repr(leading.group(1)[:40]) + "..." if leading else "(value not shown)"
            raise UserError(f"-H/--header {shown}: expected 'Name: value', e.g. -H 'Authorization: Bearer $KEY'")
        headers.append((name.strip(), rest.strip()))
    return headers


def read_body(value: str, option: str) -> bytes:
    import sys
    from pathlib import Path

    from llmdoctor.errors import UserError

    if value == "@-":
        return sys.stdin.buffer.read()
    if value.startswith("@"):
        from llmdoctor.limits import InputProblem, read_bounded

        path = Path(value[1:])
        try:  # bounded: a device such as /dev/zero never ends, a FIFO nobody writes to never starts
            return read_bounded(path, MAX_BODY_BYTES, streams=True, what="a probe's request")
        except InputProblem as problem:
            if "too large" in problem.reason:
                raise UserError(f"{option} {value}: larger than {MAX_BODY_BYTES // 2**20} MiB; a probe needs a "
                                "small request") from None
            reason = "Is a directory" if problem.reason == "is a directory" else problem.reason
            raise UserError(f"{option} {value}: cannot read {path}: {reason.removeprefix('cannot read: ')}") from None
    return value.encode("utf-8")


def _valid_json(content: bytes) -> bytes:
    import json

    from llmdoctor.errors import UserError
    from llmdoctor.limits import MAX_DEPTH, data_size

    try:
        data = json.loads(content)
    except ValueError as err:  # also a number past Python's 4,300-digit limit
        raise UserError(f"--json: not valid JSON ({str(err)[:200]})") from None
    except RecursionError:
        raise UserError(f"--json: not valid JSON (nested too deeply; at most {MAX_DEPTH} levels are "
                        "read)") from None
    if data_size(data, max_depth=MAX_DEPTH)[1] > MAX_DEPTH:
        raise UserError(f"--json: nested more than {MAX_DEPTH} levels: not a request body llmdoctor sends")
    return content


def _default_header(headers: list[tuple[str, str]], name: str, value: str) -> None:
    if all(existing.lower() != name.lower() for existing, _ in headers):
        headers.append((name, value))


def openai_url(url: str) -> str:
    """A base URL (`http://host:8000`, `.../v1`) gets the chat-completions path; a full one is kept."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url  # run_probe reports the bad URL
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):
        return url
    if path == "":
        path = "/v1/chat/completions"
    elif path.endswith("/v1"):
        path += "/chat/completions"
    else:
        return url
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def openai_body(model: str) -> bytes:
    import json

    return json.dumps({
        "model": model,
        "messages": [{"role": "user", "content": OPENAI_PROMPT}],
        "stream": True,
        "max_tokens": OPENAI_MAX_TOKENS,
        "temperature": 0,
    }).encode("utf-8")
