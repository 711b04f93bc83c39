"""On-disk cache of per-file scan results, so an unchanged tree re-scans without parsing anything.

Layout: `<project root>/.llmdoctor_cache/` (or `--cache-dir` / `LLMDOCTOR_CACHE_DIR`) holding a
`CACHEDIR.TAG`, a `.gitignore` of `*`, and one JSON file per *run key*:

    run key = sha256(llmdoctor version, engine source, rule catalog fingerprint (shipped and --rules-dir
              YAML bytes), effective config fingerprint)

so a change of version, rules, rule tables or settings starts a fresh file instead of reusing stale
results. Inside, each scanned file has an entry `path -> [mtime_ns, ctime_ns, size, inode, sha256,
stat_trusted, result]`. A file is a hit when its stat matches a *trusted* stat (one recorded more than RACY_NS after the
file's mtime, so an edit in the same timestamp tick cannot go unnoticed), or else when the sha256 of its
bytes matches (a fresh checkout in CI changes every mtime but no content). The result holds the findings,
errors and counters of `analyze_source`, which depends on nothing but the bytes and the run key.

Safety: JSON, never pickle (a cache restored from a CI artifact cannot run code); writes go to a temporary
file in the same folder and `os.replace` it (two concurrent runs each write a complete file: the last one
wins, nothing is ever half-written); a missing, corrupt, foreign or unreadable cache file is ignored and
rebuilt; a cache folder that cannot be written disables caching for the run with a notice, never a crash.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from llmdoctor import __version__
from llmdoctor.report.model import Finding, InputError

CACHE_DIR_NAME = ".llmdoctor_cache"
ENV_VAR = "LLMDOCTOR_CACHE_DIR"
FORMAT = 1
MAGIC = "llmdoctor-scan-cache"
RACY_NS = 2_000_000_000  # a stat recorded within 2 s of the file's mtime is confirmed by content hash
KEEP_RUN_FILES = 16  # older run-key files (other configs, versions) are pruned beyond this many
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by llmdoctor.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)

Stamp = tuple[int, int, int, int, str]  # mtime_ns, ctime_ns, size, inode, sha256 of the bytes analysed


def default_cache_dir(root: str) -> str:
    """`LLMDOCTOR_CACHE_DIR`, else `.llmdoctor_cache` in the project root (the config file's folder)."""
    return os.environ.get(ENV_VAR) or os.path.join(root, CACHE_DIR_NAME)


def engine_fingerprint() -> str:
    """sha256 of the scan engine's own source: an edited rule in a development checkout invalidates too."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*package.glob("*.py"), *package.glob("rules/*.py")]):
        try:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        except OSError:
            digest.update(path.name.encode() + b"\0?")
    return digest.hexdigest()


def run_key(catalog_fingerprint: str, config_fingerprint: str) -> str:
    material = "\0".join([MAGIC, str(FORMAT), __version__, engine_fingerprint(), catalog_fingerprint,
                          config_fingerprint])
    return hashlib.sha256(material.encode()).hexdigest()


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def stamp_of(handle_stat: os.stat_result, data: bytes) -> Stamp:
    return (*stat_key(handle_stat), hashlib.sha256(data).hexdigest())


# ----------------------------------------------------------------------------- (de)serialising results


def result_to_json(findings: list[Finding], errors: list[InputError], parsed: bool, prefiltered: bool,
                   suppressed: int) -> dict:
    return {
        "findings": [[f.rule, f.severity, f.line, f.column, f.end_line, f.end_column, f.message, f.fix,
                      f.extra] for f in findings],
        "errors": [[e.reason, e.line] for e in errors],
        "parsed": parsed, "prefiltered": prefiltered, "suppressed": suppressed,
    }


def result_from_json(path: str, data: dict):
    from llmdoctor.scan.engine import FileResult

    findings = [Finding(rule=r, severity=s, path=path, line=line, column=col, end_line=el, end_column=ec,
                        message=m, fix=fix, extra=dict(extra))
                for r, s, line, col, el, ec, m, fix, extra in data["findings"]]
    errors = [InputError(path, reason, line) for reason, line in data["errors"]]
    return FileResult(path, findings=findings, errors=errors, parsed=bool(data["parsed"]),
                      prefiltered=bool(data["prefiltered"]), suppressed=int(data["suppressed"]))


def encode_result(result) -> dict | None:
    """The JSON form of a FileResult, or None when it must not be cached (a read error is not content)."""
    if any(e.reason.startswith("cannot read") for e in result.errors):
        return None
    encoded = result_to_json(result.findings, result.errors, result.parsed, result.prefiltered,
                             result.suppressed)
    try:
        # the cache must give back exactly what was computed: skip values JSON would alter (tuples...)
        if json.loads(json.dumps(encoded)) != encoded:
            return None
    except (TypeError, ValueError):
        return None
    return encoded


# ----------------------------------------------------------------------------- the cache


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    rehashed: int = 0  # stat changed (or racy) but the content hash matched


class ScanCache:
    """One run key's entries. `lookup` before analysing, `store` after, `save` once at the end."""

    def __init__(self, directory: str, key: str) -> None:
        self.directory = directory
        self.key = key
        self.file = os.path.join(directory, f"scan-{key[:32]}.json")
        self.entries: dict[str, list] = {}
        self.stats = CacheStats()
        self._dirty = False
        self._seen: set[str] = set()
        self.notice: str | None = None
        self.entries = self._load()

    # ------------------------------------------------------------------ reading

    def _load(self) -> dict[str, list]:
        try:
            with open(self.file, "rb") as handle:
                data = json.loads(handle.read())
        except (OSError, ValueError):
            return {}
        if (not isinstance(data, dict) or data.get("magic") != MAGIC or data.get("format") != FORMAT
                or data.get("key") != self.key or not isinstance(data.get("files"), dict)):
            return {}  # foreign, older or corrupt: ignored, rewritten on save
        return data["files"]

    def lookup(self, path: str):
        """The cached FileResult of `path` if its content is unchanged, else None."""
        self._seen.add(path)
        entry = self.entries.get(path)
        if entry is None:
            self.stats.misses += 1
            return None
        try:
            *stat, digest, trusted, result = entry
            current = stat_key(os.stat(path))
            if not (trusted and current == tuple(stat)):
                if current[2] != stat[2]:  # another size: another content
                    self.stats.misses += 1
                    return None
                with open(path, "rb") as handle:
                    data = handle.read()
                if hashlib.sha256(data).hexdigest() != digest:
                    self.stats.misses += 1
                    return None
                self.stats.rehashed += 1
                self._record(path, (*current, digest), result)
            found = result_from_json(path, result)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self.stats.misses += 1
            return None  # a malformed entry is a miss, never a crash
        self.stats.hits += 1
        return found

    # ------------------------------------------------------------------ writing

    def store(self, path: str, stamp: Stamp | None, result) -> None:
        if stamp is None:
            return
        encoded = encode_result(result)
        if encoded is not None:
            self._record(path, stamp, encoded)

    def _record(self, path: str, stamp: Stamp, encoded: dict) -> None:
        trusted = time.time_ns() - max(stamp[0], stamp[1]) > RACY_NS
        self.entries[path] = [*stamp, trusted, encoded]
        self._dirty = True

    def save(self) -> None:
        """Write the entries atomically (merged with what a concurrent run may have written meanwhile)."""
        if not self._dirty:
            return
        merged = {p: e for p, e in self._load().items() if p not in self._seen and os.path.exists(p)}
        merged.update(self.entries)
        payload = json.dumps({"magic": MAGIC, "format": FORMAT, "key": self.key, "version": __version__,
                              "files": merged}, separators=(",", ":"))
        try:
            self._prepare_directory()
            _atomic_write(self.file, payload)
            self._prune()
        except OSError as err:
            self.notice = f"cache not written to {self.directory}: {err.strerror or err} (use --no-cache or --cache-dir)"
        self._dirty = False

    def _prepare_directory(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# created by llmdoctor\n*\n")):
            target = os.path.join(self.directory, name)
            if not os.path.exists(target):
                _atomic_write(target, text)

    def _prune(self) -> None:
        """Keep the most recent KEEP_RUN_FILES run files; drop temporaries a killed run left behind."""
        now = time.time()
        runs = []
        for entry in os.scandir(self.directory):
            try:
                if entry.name.startswith("scan-") and entry.name.endswith(".json"):
                    runs.append((entry.stat().st_mtime, entry.path))
                elif entry.name.startswith(".tmp-") and now - entry.stat().st_mtime > 3600:
                    _remove(entry.path)
            except OSError:
                continue
        for _, path in sorted(runs, reverse=True)[KEEP_RUN_FILES:]:
            _remove(path)


def _atomic_write(target: str, text: str) -> None:
    """Write a temporary file next to `target` and rename it over `target`: readers see old or new, whole."""
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, target)
    except BaseException:
        _remove(temporary)
        raise


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
