"""Fuzz llmdoctor with hostile input and count what held: `python bench/fuzz/fuzz.py [TARGET...] [--cases N]`.

Targets (docs/reliability.md has the counts of the last full run):

- `scan`: Python programs from hypothesmith (its grammar- and libcst-based strategies), byte-level mutations
  of the shipped fixtures, and pathological programs (long chains, deep nesting, huge literals, many defs,
  odd encodings, control characters, hostile file names, FIFOs, symlinks, directories named `*.py`). Cases
  are scanned in batches by the installed `llmdoctor scan` (a crash of native code cannot take the harness
  down), four times: `--jobs 2` cold (writing a cache), `--jobs 1` cold, and warm from the cache in JSON and
  in text. A batch fails on a traceback, an exit code other than 0/1/2, a run past the timeout, JSON that a
  strict parser rejects, a control character in the text output, a missing sentinel finding, or any
  difference between the three JSON reports (what `--jobs`, or the cache, lost or changed). A failing batch
  is re-run case by case to name the culprit.
- `nginx`: generated configs (random blocks, directives, values, quoting, comments, includes: globs,
  chains, cycles, missing files, FIFOs, deep nesting) and mutations of the shipped nginx fixtures;
- `kv`: generated config.json files (keys with values of every JSON type and magnitude) with random options;
- `tokens`: generated texts and chat-completions bodies (messages, tools, nesting, huge numbers), pipes;
- `probe`: request bodies (`--json @file`) and timeouts against a closed local port (nothing listens).

In-process targets run `llmdoctor.cli.main` with an alarm per case; a case fails on an exception escaping
main, an exit code other than 0/1/2, a case running past the alarm, invalid JSON with `--format json`, or a
control character in text output. Every failing input is saved under `--save DIR` for a regression test.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
SENTINEL = "import time\n\nasync def sentinel_handler():\n    time.sleep(1)\n"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what text output must never carry (tab, LF allowed)
DEFAULT_CASES = {"scan": 10_000, "nginx": 2_000, "kv": 1_000, "tokens": 1_000, "probe": 200}
BATCH = 200  # scan cases per batch (each batch costs four start-ups of the command)


@dataclass
class Outcome:
    target: str
    cases: int = 0
    clean: int = 0
    failures: list[dict] = field(default_factory=list)
    exit_codes: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    slowest: list[tuple[float, str]] = field(default_factory=list)

    def record(self, name: str, elapsed: float) -> None:
        self.slowest.append((elapsed, name))
        self.slowest = sorted(self.slowest, reverse=True)[:5]

    def line(self) -> str:
        codes = ", ".join(f"exit {code}: {n}" for code, n in sorted(self.exit_codes.items()))
        slow = ", ".join(f"{name} {seconds:.1f}s" for seconds, name in self.slowest[:3])
        return (f"{self.target:<7} {self.cases:>6} cases, {self.clean:>6} clean, {len(self.failures):>3} failures "
                f"({codes}) in {self.seconds:.0f} s; slowest: {slow}")


# ============================================================================ scan: generators


def _fixture_sources() -> list[bytes]:
    return [p.read_bytes() for p in sorted((FIXTURES / "python").rglob("*.py"))]


def _hypothesmith_sources(count: int, seed: int) -> list[str]:
    """`count` programs from hypothesmith (half from its grammar strategy, half from its libcst one)."""
    if count <= 0:
        return []
    saved = Path(tempfile.gettempdir()) / f"llmdoctor-fuzz-hypothesmith-{count}-{seed}.json"
    if saved.is_file():  # generating is the slow part (~0.2 s a program): reuse the same programs
        return json.loads(saved.read_text())
    try:
        import hypothesmith
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
    except ImportError:
        print("hypothesmith is not installed (pip install -e '.[bench]'): its programs are skipped", file=sys.stderr)
        return []
    out: list[str] = []
    strategy = st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node())

    @settings(max_examples=count, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(source: str) -> None:
        if len(out) < count:
            out.append(source)

    import warnings

    random_state = random.getstate()
    random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # hypothesmith compiles what it generates: SyntaxWarnings
            collect()
    finally:
        random.setstate(random_state)
    saved.write_text(json.dumps(out))
    return out


_HEADERS = [
    "import time\nimport requests\nimport openai\n\nasync def h():\n    time.sleep(1)\n\n",
    "from openai import OpenAI\nclient = OpenAI()\n\ndef f(q):\n    return client.chat.completions.create(model='m', messages=q)\n\n",
    "",
]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four byte- or line-level edits of `data`."""
    for _ in range(rng.randint(1, 4)):
        lines = data.split(b"\n")
        choice = rng.randrange(12)
        if choice == 0 and data:  # delete a span
            start = rng.randrange(len(data))
            data = data[:start] + data[start + rng.randint(1, 40):]
        elif choice == 1:  # insert hostile bytes
            where = rng.randrange(len(data) + 1)
            junk = rng.choice([b"\x00", b"\r", b"\x1b[2J", b"\xff\xfe", b"\xef\xbb\xbf", b"(", b")", b"[", b"\\",
                               b"'''", b'"', b"\t", b"\x0c", b":", b"async ", b"await ", b"lambda: ", b"\xe9"])
            data = data[:where] + junk * rng.randint(1, 3) + data[where:]
        elif choice == 2 and len(lines) > 1:  # duplicate a line many times
            index = rng.randrange(len(lines))
            lines[index:index] = [lines[index]] * rng.choice([2, 10, 500])
            data = b"\n".join(lines)
        elif choice == 3 and len(lines) > 2:  # swap lines
            a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[a], lines[b] = lines[b], lines[a]
            data = b"\n".join(lines)
        elif choice == 4:  # truncate
            data = data[: rng.randrange(len(data) + 1)]
        elif choice == 5:  # re-indent a line
            index = rng.randrange(len(lines))
            lines[index] = b" " * rng.randint(0, 9) + lines[index].lstrip()
            data = b"\n".join(lines)
        elif choice == 6:  # an encoding cookie
            cookie = rng.choice([b"latin-1", b"utf-8", b"utf-16", b"bogus", b"ascii", b"cp1252"])
            data = b"# -*- coding: " + cookie + b" -*-\n" + data
        elif choice == 7:  # wrap an expression in deep nesting
            where = rng.randrange(len(lines))
            depth = rng.choice([50, 150, 199, 250, 450])
            lines.insert(where, b"x = " + b"(" * depth + b"1" + b")" * depth)
            data = b"\n".join(lines)
        elif choice == 8:  # a long operator chain
            op = rng.choice([b" and ", b" or ", b" + ", b".a", b"[0]", b" if x else "])
            n = rng.choice([100, 500, 1500, 2500, 9000])
            line = b"    y = a" + op.join([b"a"] * n) if op.strip() and op[0:1] == b" " else b"    y = a" + op * n
            lines.insert(rng.randrange(len(lines) + 1), line)
            data = b"\n".join(lines)
        elif choice == 9:  # CRLF or lone CR line ends
            data = data.replace(b"\n", rng.choice([b"\r\n", b"\r"]))
        elif choice == 10:  # a noqa / ignore comment somewhere
            index = rng.randrange(len(lines))
            lines[index] += rng.choice([b"  # noqa", b"  # noqa: LLM004", b"  # llmdoctor: ignore[", b"# llmdoctor: ignore-file"])
            data = b"\n".join(lines)
        else:  # splice two random points
            if data:
                a, b = sorted(rng.randrange(len(data)) for _ in range(2))
                data = data[:a] + data[b:] + data[a:b]
    return data


def _pathological(rng: random.Random) -> bytes:
    head = rng.choice(_HEADERS)
    kind = rng.randrange(10)
    if kind == 0:
        n = rng.choice([1000, 3000, 5000])
        body = "x = (" + " ".join(['"s"'] * n) + ")\n"
    elif kind == 1:
        body = "DATA = [" + ", ".join(str(i) for i in range(rng.choice([1000, 5000, 30000]))) + "]\n"
    elif kind == 2:
        body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(rng.choice([100, 500, 2000])))
    elif kind == 3:
        depth = rng.choice([90, 99, 100, 101])
        body = "".join(" " * i + "if a:\n" for i in range(depth)) + " " * depth + "pass\n"
    elif kind == 4:
        body = "import " + ".".join(["a"] * rng.choice([100, 600, 1200])) + "\n"
    elif kind == 5:
        body = "x = " + "lambda: " * rng.choice([100, 350, 450]) + "1\n"
    elif kind == 6:
        body = "s = '" + "\\x1b]0;PWNED\\x07" * 10 + "'\nprint(s)  # \x1b[2J\n"
    elif kind == 7:
        body = "x = [" + "[" * rng.choice([50, 150]) + "]" * rng.choice([50, 150]) + "]\n"
    elif kind == 8:
        body = "async def g():\n" + "".join(f"    requests.get(u{i})\n" for i in range(rng.choice([10, 300])))
    else:
        body = "y = " + " + ".join(f"'s{i}'" for i in range(rng.choice([100, 600]))) + "\n"
    return (head + body).encode("utf-8")


def _name(rng: random.Random, index: int) -> bytes:
    if rng.random() < 0.9:
        return f"case_{index:05d}.py".encode()
    odd = rng.choice([b"esc\x1b]0;PWN\x07", b"bad\xffname", b"caf\xe9", b"sp ace", b"new\nline", b"-dash", b"%s%n",
                      b"\xe2\x80\xaerev", b"\x9b31m"])
    return odd + f"_{index:05d}".encode() + rng.choice([b".py", b".pyi"])


def scan_cases(count: int, seed: int) -> list[tuple[bytes, bytes | str]]:
    """(file name, content | 'fifo' | 'devzero' | 'dir' | 'loop') for `count` cases."""
    rng = random.Random(seed)
    fixtures = _fixture_sources()
    programs = _hypothesmith_sources(count // 4, seed)
    cases: list[tuple[bytes, bytes | str]] = []
    for index in range(count):
        roll = rng.random()
        if programs and roll < 0.25:
            content: bytes | str = (rng.choice(_HEADERS) + programs.pop()).encode("utf-8", "surrogatepass")
        elif roll < 0.85:
            content = _mutate(rng.choice(fixtures), rng)
        elif roll < 0.97:
            content = _pathological(rng)
        else:
            content = rng.choice(["fifo", "devzero", "dir", "loop"])
        cases.append((_name(rng, index), content))
    return cases


# ============================================================================ scan: running batches


def _llmdoctor() -> str:
    candidate = Path(sys.executable).with_name("llmdoctor")
    return str(candidate) if candidate.exists() else (shutil.which("llmdoctor") or "llmdoctor")


def _write_case(folder: bytes, name: bytes, content: bytes | str) -> None:
    path = os.path.join(folder, name)
    if content == "fifo":
        os.mkfifo(path)
    elif content == "devzero":
        os.symlink(b"/dev/zero", path)
    elif content == "dir":
        os.mkdir(path)
    elif content == "loop":
        os.symlink(path, path)
    else:
        assert isinstance(content, bytes)
        with open(path, "wb") as handle:
            handle.write(content)


def _run(args: list[str], cwd: str, timeout: float) -> tuple[int | None, str, str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("CI", None)
    try:
        proc = subprocess.run([_llmdoctor(), *args], cwd=cwd, capture_output=True, timeout=timeout, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        return None, "", "timeout"
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def _batch_problems(folder: str, timeout: float, files: int) -> list[str]:
    """What went wrong scanning `folder` four ways (empty: it held)."""
    cache = os.path.join(os.path.dirname(folder), "cache")
    shutil.rmtree(cache, ignore_errors=True)
    runs = {
        "jobs2": ["scan", "--format", "json", "--jobs", "2", "--cache-dir", cache, "--isolated", "."],
        "jobs1": ["scan", "--format", "json", "--jobs", "1", "--no-cache", "--isolated", "."],
        "warm": ["scan", "--format", "json", "--jobs", "1", "--cache-dir", cache, "--isolated", "."],
        "text": ["scan", "--format", "text", "--cache-dir", cache, "--isolated", "."],
    }
    problems, reports = [], {}
    for label, args in runs.items():
        code, out, err = _run(args, folder, timeout)
        if code is None:
            problems.append(f"{label}: no answer within {timeout:.0f} s")
            continue
        if code not in (0, 1, 2):
            problems.append(f"{label}: exit {code}")
        if "Traceback" in err:
            problems.append(f"{label}: stderr {err.strip()[-300:]!r}")
        if label == "text":
            if CONTROL.search(out):
                problems.append(f"text: a control character in the output: {CONTROL.search(out).group()!r}")
            continue
        try:
            report = json.loads(out)
        except ValueError as parse_error:
            problems.append(f"{label}: invalid JSON ({parse_error})")
            continue
        if not any(f["path"] == "sentinel.py" for f in report.get("findings", [])):
            problems.append(f"{label}: the sentinel's finding is missing")
        if report.get("summary", {}).get("files") != files:
            problems.append(f"{label}: {report.get('summary', {}).get('files')} files checked, expected {files}")
        report.get("summary", {}).pop("parsed", None)
        report.get("summary", {}).pop("prefiltered", None)
        report.pop("notices", None)
        reports[label] = report
    baseline = reports.get("jobs1")
    for label in ("jobs2", "warm"):
        if baseline is not None and label in reports and reports[label] != baseline:
            problems.append(f"{label} differs from jobs1: {_difference(reports[label], baseline)}")
    return problems


def _difference(a: dict, b: dict) -> str:
    for key in ("findings", "errors", "summary"):
        if a.get(key) != b.get(key):
            left = [json.dumps(x, sort_keys=True) for x in a.get(key) or []] if key != "summary" else [str(a[key])]
            right = [json.dumps(x, sort_keys=True) for x in b.get(key) or []] if key != "summary" else [str(b[key])]
            return f"{key}: only in one {sorted(set(left) ^ set(right))[:2]}"
    return "?"


def _regular_files(cases) -> int:
    return sum(1 for _, content in cases if isinstance(content, bytes)) + 1  # + the sentinel


def fuzz_scan(count: int, seed: int, save: Path | None, timeout: float = 300) -> Outcome:
    outcome = Outcome("scan")
    started = time.time()
    cases = scan_cases(count, seed)
    for first in range(0, len(cases), BATCH):
        batch = cases[first:first + BATCH]
        with tempfile.TemporaryDirectory(prefix="llmdoctor-fuzz-") as tmp:
            folder = os.path.join(tmp, "cases")
            os.mkdir(folder)
            for name, content in batch:
                _write_case(os.fsencode(folder), name, content)
            with open(os.path.join(folder, "sentinel.py"), "w") as handle:
                handle.write(SENTINEL)
            began = time.time()
            problems = _batch_problems(folder, timeout, _files_counted(folder))
            outcome.record(f"batch {first // BATCH}", time.time() - began)
            if not problems:
                outcome.clean += len(batch)
            else:
                culprits = _culprits(batch, timeout)
                outcome.clean += len(batch) - len(culprits)
                for name, content, found in culprits or [(b"?", b"", problems)]:
                    outcome.failures.append({"case": os.fsdecode(name), "problems": found})
                    _save(save, "scan", os.fsdecode(name), content if isinstance(content, bytes) else b"")
        outcome.cases += len(batch)
        print(f"scan: {outcome.cases}/{len(cases)} cases, {len(outcome.failures)} failures", file=sys.stderr,
              flush=True)
    outcome.seconds = time.time() - started
    return outcome


def _files_counted(folder: str) -> int:
    """Regular `*.py`/`*.pyi` files in the folder within the default --max-file-size (larger ones are skipped
    with a notice): what `summary.files` must say."""
    from llmdoctor.scan.settings import DEFAULT_MAX_FILE_SIZE

    count = 0
    for entry in os.scandir(folder):
        if entry.name.endswith((".py", ".pyi")):
            try:
                if entry.is_file() and not entry.is_symlink() and entry.stat().st_size <= DEFAULT_MAX_FILE_SIZE:
                    count += 1
            except OSError:
                pass
    return count


def _culprits(batch, timeout: float) -> list[tuple[bytes, bytes | str, list[str]]]:
    found = []
    for name, content in batch:
        with tempfile.TemporaryDirectory(prefix="llmdoctor-fuzz-one-") as tmp:
            folder = os.path.join(tmp, "cases")
            os.mkdir(folder)
            _write_case(os.fsencode(folder), name, content)
            with open(os.path.join(folder, "sentinel.py"), "w") as handle:
                handle.write(SENTINEL)
            problems = _batch_problems(folder, timeout, _files_counted(folder))
            if problems:
                found.append((name, content, problems))
    return found


def _save(save: Path | None, target: str, name: str, content: bytes) -> None:
    if save is None:
        return
    folder = save / target
    folder.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "case"
    (folder / safe).write_bytes(content)


# ============================================================================ in-process targets


class _Alarm(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Alarm()


def run_main(args: list[str], seconds: int = 30, stdin: bytes = b"") -> tuple[int | str, str, str]:
    """`llmdoctor.cli.main(args)` here: (exit code | 'exception: ...' | 'timeout', stdout, stderr)."""
    from llmdoctor.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    saved_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code: int | str = main(args)
    except _Alarm:
        code = "timeout"
    except BaseException as crash:  # noqa: BLE001 - that is what the fuzzer looks for
        code = f"exception: {type(crash).__name__}: {str(crash)[:200]} at " + \
               " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in traceback.extract_tb(crash.__traceback__)[-3:])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        sys.stdin = saved_stdin
    return code, out.getvalue(), err.getvalue()


def _judge(outcome: Outcome, name: str, args: list[str], save: Path | None, payload: bytes, stdin: bytes = b"",
           seconds: int = 30) -> None:
    began = time.time()
    code, out, err = run_main(args, seconds, stdin)
    outcome.record(name, time.time() - began)
    outcome.cases += 1
    problems = []
    if not isinstance(code, int):
        problems.append(str(code))
    else:
        outcome.exit_codes[code] = outcome.exit_codes.get(code, 0) + 1
        if code not in (0, 1, 2):
            problems.append(f"exit {code}")
        if "Traceback" in err:
            problems.append("a traceback on stderr")
        if "--format" in args and args[args.index("--format") + 1] == "json":
            try:
                json.loads(out.encode("utf-8").decode("utf-8"))
            except (ValueError, UnicodeEncodeError) as parse_error:
                problems.append(f"invalid JSON on stdout ({str(parse_error)[:80]})")
        elif CONTROL.search(out):
            problems.append(f"a control character in text output: {CONTROL.search(out).group()!r}")
        if len(err) > 5000:
            problems.append(f"a {len(err):,}-character error message")
    if problems:
        outcome.failures.append({"case": name, "args": args, "problems": problems})
        _save(save, outcome.target, name, payload)
    else:
        outcome.clean += 1


# ---------------------------------------------------------------------------- nginx

_DIRECTIVES = [
    ("proxy_pass", ["http://127.0.0.1:8000", "http://up", "$scheme://x", "", "http://[::1]:1/"]),
    ("proxy_buffering", ["on", "off", "maybe", ""]),
    ("proxy_http_version", ["1.0", "1.1", "2", "x"]),
    ("proxy_read_timeout", ["60", "60s", "1h", "0", "-1", "9" * 400, "1d2h", "abc", "3600s"]),
    ("proxy_cache", ["zone", "off"]),
    ("proxy_ignore_headers", ["X-Accel-Buffering", "Expires X-Accel-Buffering"]),
    ("gzip", ["on", "off"]),
    ("gzip_types", ["text/event-stream", "*", "text/plain"]),
    ("add_header", ["X-Accel-Buffering no", "X \x1b[2J", "A b always"]),
    ("proxy_set_header", ["Host $host", "Connection ''", "X-Accel-Buffering no"]),
    ("fastcgi_pass", ["unix:/run/php.sock"]),
    ("uwsgi_pass", ["127.0.0.1:9"]),
    ("listen", ["80", "443 ssl"]),
    ("server_name", ["example.com", "\x1b]0;PWN\x07"]),
    ("chunked_transfer_encoding", ["off"]),
    ("proxy_max_temp_file_size", ["0"]),
]
_BLOCKS = ["http", "server", "location /v1/", "location ~ ^/api", "location @named", "if ($x)", "upstream up",
           "events", "location = /", "map $a $b", "types"]


def _nginx_block(rng: random.Random, depth: int, files: list[str]) -> str:
    lines = []
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.55:
            name, values = rng.choice(_DIRECTIVES)
            lines.append(f"{name} {rng.choice(values)};")
        elif roll < 0.8 and depth < 6:
            lines.append(f"{rng.choice(_BLOCKS)} {{\n{_nginx_block(rng, depth + 1, files)}\n}}")
        elif roll < 0.9 and files:
            lines.append(f"include {rng.choice(files + ['missing.conf', '*.conf', 'sub/*.conf', '/dev/zero'])};")
        else:
            lines.append(rng.choice(["# comment {", "'quoted ; arg' x;", '"unterminated', "}", "{", ";", "\\", "a\x00b;",
                                     "x '\\'' y;", "return 200 '\x1b[2J';"]))
    return "\n".join(lines)


def nginx_case(rng: random.Random, folder: Path, fixtures: list[bytes]) -> list[str]:
    """Files for one case in `folder`; returns the argument(s) to pass."""
    names = [f"f{i}.conf" for i in range(rng.randint(1, 4))]
    kind = rng.random()
    for index, name in enumerate(names):
        if kind < 0.3:
            text = _mutate(rng.choice(fixtures), rng)
        else:
            text = _nginx_block(rng, 0, names).encode("utf-8")
        (folder / name).write_bytes(text)
    if rng.random() < 0.1:  # a long include chain or a deep block nest
        if rng.random() < 0.5:
            depth = rng.choice([50, 150, 400])
            for i in range(depth):
                (folder / f"chain{i}.conf").write_text(f"include chain{i + 1}.conf;\n")
            (folder / f"chain{depth}.conf").write_text("http { server { location / { proxy_pass http://u; } } }\n")
            names[0] = "chain0.conf"
        else:
            depth = rng.choice([100, 1000, 5000])
            (folder / names[0]).write_text("location / {\n" * depth + "}\n" * depth)
    if rng.random() < 0.05:
        os.mkfifo(folder / "pipe.conf")
        with (folder / names[0]).open("a") as handle:
            handle.write("\ninclude pipe.conf;\n")
    if rng.random() < 0.03:
        return [str(folder / "pipe.conf")]
    if rng.random() < 0.2:
        return [str(folder)]
    return [str(folder / names[0])]


def fuzz_nginx(count: int, seed: int, save: Path | None) -> Outcome:
    outcome = Outcome("nginx")
    started = time.time()
    rng = random.Random(seed)
    fixtures = [p.read_bytes() for p in sorted((FIXTURES / "nginx").rglob("*.conf"))]
    for index in range(count):
        with tempfile.TemporaryDirectory(prefix="llmdoctor-fuzz-nginx-") as tmp:
            targets = nginx_case(rng, Path(tmp), fixtures)
            fmt = rng.choice(["json", "text"])
            args = ["nginx", *targets, "--format", fmt]
            first = Path(targets[0])
            payload = first.read_bytes() if first.is_file() and not first.is_symlink() else b""
            _judge(outcome, f"nginx-{index}", args, save, payload)
    outcome.seconds = time.time() - started
    return outcome


# ---------------------------------------------------------------------------- kv

_KV_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "intermediate_size", "vocab_size", "max_position_embeddings", "sliding_window", "layer_types",
            "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank", "n_routed_experts",
            "num_local_experts", "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace", "model_type",
            "torch_dtype", "tie_word_embeddings", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
            "text_config", "quantization_config", "_name_or_path", "architectures", "num_experts_per_tok"]


def _kv_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if roll < 0.45:
        return rng.choice([1, 2, 8, 32, 64, 128, 4096, 32000, 0, -1, 2**31, 2**40, 2**64, 10**30, 100_000_000,
                           7, 3, 14336, 151936])
    if roll < 0.55:
        return rng.choice([1.5, 0.0, -2.0, 1e308, 3.0])
    if roll < 0.7:
        return rng.choice(["llama", "qwen2", "gemma3", "deepseek_v3", "mistral", "bfloat16", "float16", "",
                           "\x1b]0;PWN\x07", "sliding_attention", "x" * 10_000])
    if roll < 0.78:
        return rng.choice([True, False, None])
    if roll < 0.84 and depth < 3:
        return [_kv_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 32]))]
    if roll < 0.9:
        return [rng.choice(["sliding_attention", "full_attention", 1, None])] * rng.choice([31, 32, 5000])
    if depth < 3:
        return {rng.choice(_KV_KEYS): _kv_value(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return None


def fuzz_kv(count: int, seed: int, save: Path | None) -> Outcome:
    outcome = Outcome("kv")
    started = time.time()
    rng = random.Random(seed)
    real = [json.loads(p.read_text()) for p in sorted((FIXTURES / "models").rglob("config.json"))]
    for index in range(count):
        config = dict(rng.choice(real)) if rng.random() < 0.7 else {}
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 6])):
            config[rng.choice(_KV_KEYS)] = _kv_value(rng)
        with tempfile.TemporaryDirectory(prefix="llmdoctor-fuzz-kv-") as tmp:
            path = Path(tmp) / "config.json"
            if rng.random() < 0.05:
                text = "[" * rng.choice([1000, 100_000]) + "]"
            elif rng.random() < 0.05:
                text = '{"num_hidden_layers": ' + "9" * rng.choice([30, 400, 5000]) + "}"
            else:
                text = json.dumps(config)
            path.write_text(text)
            args = ["kv-budget", "--model-config", str(path), "--format", rng.choice(["json", "text"])]
            for option, values in (("--bs", ["1", "64", "100000000"]), ("--max-model-len", ["4096", "1", "auto",
                                   "99999999999999"]), ("--tp", ["1", "2", "3", "8", "1024"]),
                                   ("--kv-mem", ["40GiB", "1" + "0" * 400, "1e5", "0.5KiB", "-1", "inf"]),
                                   ("--gpu-mem", ["80GB", "1PB", "nan"]), ("--block-size", ["16", "1", "99999999"])):
                if rng.random() < 0.25:
                    args += [option, rng.choice(values)]
            _judge(outcome, f"kv-{index}", args, save, text.encode())
    outcome.seconds = time.time() - started
    return outcome


# ---------------------------------------------------------------------------- tokens


def _text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.3:
        return "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 3000)))
    if roll < 0.45:
        return rng.choice("ab\u00e9\u4e2d\U0001f600 ") * rng.randint(1, 50_000)
    if roll < 0.55:
        return "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(10_000, 400_000)))
    if roll < 0.65:
        return "\x1b]0;PWNED\x07\x1b[2J" * rng.randint(1, 100)
    if roll < 0.75:
        points = (rng.randint(1, 0x2FFFF) for _ in range(rng.randint(1, 2000)))
        return "".join(chr(p) for p in points if not 0xD800 <= p <= 0xDFFF)
    return "x\n" * rng.randint(1, 5000)


def _request(rng: random.Random):
    message = {"role": rng.choice(["user", "system", "assistant", "tool", 3, None]),
               "content": rng.choice([_text(rng)[:500], None, [{"type": "text", "text": "hi"}, {"type": "image_url"}],
                                      {"x": [1, 2]}, 5, [["nested"]]])}
    if rng.random() < 0.2:
        message["name"] = rng.choice(["bob", 7, "\x1b[2J"])
    body = {"model": rng.choice(["gpt-4o", "gpt-3.5-turbo-0301", "gpt-4", "unknown-model", 12, None, "\x1b]0;x\x07"]),
            "messages": rng.choice([[message] * rng.randint(0, 50), "notalist", [1, 2], []])}
    if rng.random() < 0.3:
        body["tools"] = rng.choice([[{"type": "function", "function": {"name": "f", "parameters": {"properties": {
            "a": {"type": "string", "enum": ["x", 1, None]}}}}}], "x", [None], [{"function": {"name": 5}}]])
    if rng.random() < 0.3:
        body["max_tokens"] = rng.choice([16, -1, 2**64, 1.5, "100", None, 10**50])
    return body


def fuzz_tokens(count: int, seed: int, save: Path | None) -> Outcome:
    outcome = Outcome("tokens")
    started = time.time()
    rng = random.Random(seed)
    for index in range(count):
        with tempfile.TemporaryDirectory(prefix="llmdoctor-fuzz-tokens-") as tmp:
            folder = Path(tmp)
            paths = []
            for number in range(rng.randint(1, 3)):
                roll = rng.random()
                if roll < 0.45:
                    path = folder / f"r{number}.json"
                    if rng.random() < 0.1:
                        payload = ("[" * rng.choice([1000, 100_000])).encode()
                    elif rng.random() < 0.05:
                        payload = ('{"messages": [], "max_tokens": ' + "9" * 5000 + "}").encode()
                    else:
                        payload = json.dumps(_request(rng)).encode()
                elif roll < 0.9:
                    path = folder / rng.choice([f"t{number}.txt", f"esc\x1b[2J{number}.txt"])
                    payload = _text(rng).encode("utf-8", "surrogatepass")
                elif roll < 0.95:
                    path = folder / f"p{number}.txt"
                    os.mkfifo(path)
                    paths.append(str(path))
                    continue
                else:
                    path = folder / f"b{number}.bin"
                    payload = bytes(rng.randrange(256) for _ in range(200))
                path.write_bytes(payload)
                paths.append(str(path))
            args = ["tokens", *paths, "--format", rng.choice(["json", "text"])]
            if rng.random() < 0.3:
                args += ["--context", rng.choice(["100", "1", "128000", "9" * 30])]
            if rng.random() < 0.2:
                args += ["--model", rng.choice(["gpt-4o", "gpt-4", "nope", "\x1b]0;x"])]
            first = Path(paths[0])
            payload = first.read_bytes() if first.is_file() else b""
            _judge(outcome, f"tokens-{index}", args, save, payload)
    outcome.seconds = time.time() - started
    return outcome


# ---------------------------------------------------------------------------- probe


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fuzz_probe(count: int, seed: int, save: Path | None) -> Outcome:
    outcome = Outcome("probe")
    started = time.time()
    rng = random.Random(seed)
    port = _closed_port()
    for index in range(count):
        with tempfile.TemporaryDirectory(prefix="llmdoctor-fuzz-probe-") as tmp:
            body = Path(tmp) / "body.json"
            roll = rng.random()
            if roll < 0.2:
                payload = ("[" * rng.choice([1000, 100_000])).encode()
            elif roll < 0.3:
                payload = ('{"n": ' + "9" * 5000 + "}").encode()
            elif roll < 0.4:
                payload = b'{"a": NaN}'
            else:
                payload = json.dumps(_request(rng)).encode()
            body.write_bytes(payload)
            args = ["probe", f"http://127.0.0.1:{port}/v1", "--json", f"@{body}",
                    "--timeout", rng.choice(["0.5", "inf", "1e400", "nan", "-1", "0", "1e-9", "2"]),
                    "--format", rng.choice(["json", "text"])]
            if rng.random() < 0.3:
                args += ["-H", rng.choice(["X: \x1b[2J", "Authorization: Bearer sk-x", "bad header", "A:" + "b" * 10000])]
            _judge(outcome, f"probe-{index}", args, save, payload, seconds=20)
    outcome.seconds = time.time() - started
    return outcome


# ============================================================================ the command line

TARGETS = {"scan": fuzz_scan, "nginx": fuzz_nginx, "kv": fuzz_kv, "tokens": fuzz_tokens, "probe": fuzz_probe}


def run(targets: list[str], cases: int | None, seed: int, save: Path | None) -> list[Outcome]:
    outcomes = []
    for target in targets:
        count = cases if cases is not None else DEFAULT_CASES[target]
        outcomes.append(TARGETS[target](count, seed, save))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", metavar="TARGET", help=f"some of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--cases", type=int, help="cases per target (default: " +
                        ", ".join(f"{k} {v}" for k, v in DEFAULT_CASES.items()) + ")")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--save", type=Path, help="write each failing input here")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    outcomes = run(args.targets or list(TARGETS), args.cases, args.seed, args.save)
    if args.json:
        print(json.dumps([o.__dict__ for o in outcomes], indent=2, default=str))
    for outcome in outcomes:
        print(outcome.line())
        for failure in outcome.failures[:20]:
            print(f"  FAIL {failure['case']}: {'; '.join(failure['problems'])[:400]}")
    return 1 if any(o.failures for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
