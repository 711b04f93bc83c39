"""On-disk cache of per-file scan results, so an unchanged tree re-scans without parsing anything.

Layout: `<project root>/.llmdoctor_cache/` (or `--cache-dir` / `LLMDOCTOR_CACHE_DIR`) holding a
`CACHEDIR.TAG`, a `.gitignore` of `*`, and one JSON file per *run key* (with its journal, below):

    run key = sha256(llmdoctor version, engine source, rule catalog fingerprint (shipped and --rules-dir
              YAML bytes), effective config fingerprint)

so a change of version, rules, rule tables or settings starts a fresh file instead of reusing stale
results. Inside, each scanned file has an entry `path -> [mtime_ns, ctime_ns, size, inode, sha256,
stat_trusted, result]`. A file is a hit when its stat matches a *trusted* stat (one recorded more than RACY_NS after the
file's mtime, so an edit in the same timestamp tick cannot go unnoticed), or else when the sha256 of its
bytes matches (a fresh checkout in CI changes every mtime but no content). The result holds the findings,
errors and counters of `analyze_source`, which depends on nothing but the bytes and the run key.

A run that changed a few entries (pre-commit) does not rewrite the run file: it appends them to the run file's
*journal* `scan-<key>.jsonl`, one self-describing JSON line per entry (`{"magic", "format", "key", "path",
"entry"}`), which later lines override when the entries are read. When the journal would outgrow a quarter of
the run file (or the run file is missing or unusable), the run writes the run file whole instead and removes
the journal. The lines a run appends go in one `write` (concurrent runs' lines do not interleave); a line that
does not parse or validate (cut by a killed run, edited) is a miss, recomputed and appended again; a journal
that is not a regular file starting with this cache's header is neither read nor written.

Beside them: `link-<key>.json` (a project state's final reports), `program-<key>-<root>.json` (the project's
links, for incremental linking) and `catalog-<key>.json`, the shipped rule files' parsed YAML under a key of
their bytes (`read_catalog_documents`), which the next run reads instead of parsing the YAML.

Safety: JSON, never pickle (a cache restored from a CI artifact cannot run code); writes go to a temporary
file in the same folder and `os.replace` it (two concurrent runs each write a complete file: the last one
wins, nothing is ever half-written); a missing, corrupt, foreign or unreadable cache file is ignored and
rebuilt; a cache folder that cannot be written disables caching for the run with a notice, never a crash.

Trust (docs/reliability.md): an entry is believed when it matches the file's stat or sha256, so whoever can
write the cache folder decides what the scan reports for unchanged files (ruff's cache is the same). The
cache therefore reads only what it can vouch for: every entry is validated field by field (a malformed one
is a miss); the run file is read only when it is a regular file of at most MAX_CACHE_BYTES; a cache folder
that is a symbolic link is not used at all (notice); with `CI` set, the default folder inside the checked-out
tree is not read (it may have come with the code under review: a workflow that restores its own cache names
it with --cache-dir / LLMDOCTOR_CACHE_DIR); and only files that start with this cache's own header are ever
deleted from the folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

from llmdoctor import __version__
from llmdoctor.limits import InputProblem, read_bounded
from llmdoctor.report.model import SEVERITIES, Finding, InputError

CACHE_DIR_NAME = ".llmdoctor_cache"
ENV_VAR = "LLMDOCTOR_CACHE_DIR"
FORMAT = 2  # 2: entries hold the module's project-model index and whether its rules ran
MAGIC = "llmdoctor-scan-cache"
RACY_NS = 2_000_000_000  # a stat recorded within 2 s of the file's mtime is confirmed by content hash
KEEP_RUN_FILES = 16  # older run-key files (other configs, versions) are pruned beyond this many
KEEP_LINKED_STATES = 4  # project states whose final reports are kept (a branch switch and back stays warm)
MAX_CACHE_BYTES = 512 * 2**20  # a run file of 100,000 entries is ~30 MB
JOURNAL_SHARE = 4  # the journal is folded into the run file once it would exceed 1/JOURNAL_SHARE of it
HEADER = f'{{"magic":"{MAGIC}"'.encode()  # how every file this cache writes starts (see `save`)
TMP_PREFIX = ".tmp-"
GITIGNORE = "# created by llmdoctor\n*\n"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by llmdoctor.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)

Stamp = tuple[int, int, int, int, str]  # mtime_ns, ctime_ns, size, inode, sha256 of the bytes analysed


def default_cache_dir(root: str) -> str:
    """`LLMDOCTOR_CACHE_DIR`, else `.llmdoctor_cache` in the project root (the config file's folder)."""
    return os.environ.get(ENV_VAR) or os.path.join(root, CACHE_DIR_NAME)


def running_in_ci() -> bool:
    """`CI` set to true/1/yes, as GitHub Actions, GitLab CI, CircleCI, Travis CI and Buildkite set it."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def engine_fingerprint() -> str:
    """sha256 of the scan engine's own source: an edited rule in a development checkout invalidates too."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*package.glob("*.py"), *package.glob("rules/*.py"), *package.glob("project/*.py")]):
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


def result_to_json(result) -> dict:
    return {
        "findings": [[f.rule, f.severity, f.line, f.column, f.end_line, f.end_column, f.message, f.fix,
                      f.extra] for f in result.findings],
        "errors": [[e.reason, e.line] for e in result.errors],
        "parsed": result.parsed, "prefiltered": result.prefiltered, "suppressed": result.suppressed,
        "checked": result.checked, "index": result.index.to_json() if result.index is not None else None,
    }


def result_from_json(path: str, data: dict):
    """The FileResult of a cache entry; ValueError when the entry is not exactly what `result_to_json` writes
    (a corrupt or edited cache must never crash the scan, nor put a non-number in a line)."""
    from llmdoctor.scan.engine import FileResult

    if not isinstance(data, dict):
        raise TypeError("result: not a mapping")
    findings, errors = data.get("findings"), data.get("errors")
    if not isinstance(findings, list) or not isinstance(errors, list):
        raise TypeError("findings/errors: not lists")
    out = []
    for item in findings:
        if not (isinstance(item, list) and len(item) == 9):
            raise ValueError("finding: not a 9-item list")
        rule, severity, line, col, end_line, end_col, message, fix, extra = item
        if not (isinstance(rule, str) and severity in SEVERITIES and _position(line) and _position(col)
                and (end_line is None or _position(end_line)) and (end_col is None or _position(end_col))
                and isinstance(message, str) and (fix is None or isinstance(fix, str))
                and isinstance(extra, dict)):
            raise ValueError("finding: a field of the wrong type")
        out.append(Finding(rule=rule, severity=severity, path=path, line=line, column=col, end_line=end_line,
                           end_column=end_col, message=message, fix=fix, extra=dict(extra)))
    problems = []
    for item in errors:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and (item[1] is None or _position(item[1]))):
            raise ValueError("error: not [reason, line]")
        problems.append(InputError(path, item[0], item[1]))
    parsed, prefiltered, suppressed = data.get("parsed"), data.get("prefiltered"), data.get("suppressed")
    checked = data.get("checked")
    if not (isinstance(parsed, bool) and isinstance(prefiltered, bool) and _count(suppressed)
            and isinstance(checked, bool)):
        raise ValueError("counters: of the wrong type")
    index = None
    if data.get("index") is not None:
        from llmdoctor.scan.project.index import ModuleIndex

        index = ModuleIndex.from_json(data["index"])  # ValueError on anything it did not write
    return FileResult(path, findings=out, errors=problems, parsed=parsed, prefiltered=prefiltered,
                      suppressed=suppressed, checked=checked, index=index)


def _position(value) -> bool:
    return type(value) is int and 0 < value < 2**31


def _count(value) -> bool:
    return type(value) is int and 0 <= value < 2**31


def _valid_entry(entry) -> bool:
    """[mtime_ns, ctime_ns, size, inode, sha256, stat_trusted, result] with the types `_record` writes."""
    return (isinstance(entry, list) and len(entry) == 7 and all(type(v) is int and v >= 0 for v in entry[:4])
            and isinstance(entry[4], str) and len(entry[4]) == 64 and isinstance(entry[5], bool)
            and isinstance(entry[6], dict))


def encode_result(result) -> dict | None:
    """The JSON form of a FileResult, or None when it must not be cached (a read error is not content)."""
    if any(e.reason.startswith(("cannot read", "the process analysing")) for e in result.errors):
        return None  # not what the bytes say: what happened to this run (a crash may be out of memory)
    encoded = result_to_json(result)
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
    linked: int = 0  # projects answered whole by their last reports (nothing changed)
    replayed: int = 0  # modules whose links were taken from the last run (incremental linking)


def project_state(files: list[str], checked: set[str], root: str | None) -> str | None:
    """A digest of every file of a project as it is now (path and trusted stat), with which of them are
    checked: equal digests, equal reports. None when a file was changed too recently for its stat to tell an
    edit in the same timestamp tick (see RACY_NS), or cannot be read."""
    digest = hashlib.sha256(os.fsencode(f"{root}\0"))
    now = time.time_ns()
    for path in sorted(files):
        try:
            stat = stat_key(os.stat(path))
        except OSError:
            return None
        if now - max(stat[0], stat[1]) <= RACY_NS:
            return None
        digest.update(os.fsencode(f"{path}\0{stat}\0{path in checked}\0"))  # (a file name need not be UTF-8)
    return digest.hexdigest()


class ScanCache:
    """One run key's entries. `lookup` before analysing, `store` after, `save` once at the end. Beside them,
    `linked`/`remember`: the final reports of a whole project by its `project_state`, so that a run where nothing
    changed reads one small file and neither loads the entries nor links the project model."""

    def __init__(self, directory: str, key: str, *, read: bool = True) -> None:
        self.directory = directory
        self.key = key
        self.file = os.path.join(directory, f"scan-{key[:32]}.json")
        self.journal = os.path.join(directory, f"scan-{key[:32]}.jsonl")
        self.link_file = os.path.join(directory, f"link-{key[:32]}.json")
        self._read = read
        self.entries: dict[str, list] = {}
        self.stats = CacheStats()
        self._changed: list[str] = []  # the paths whose entries this run recorded, in order
        self._seen: set[str] = set()
        self.digests: dict[str, str] = {}  # sha256 of each file's bytes this run, where its entry holds them
        self.notice: str | None = None
        self.usable = True  # False: neither read nor written (a symlinked folder)
        if os.path.islink(directory):
            self.usable = False
            target = os.path.realpath(directory)
            self.notice = (f"cache not used: {directory} is a symbolic link (to {target}); llmdoctor does not "
                           f"write through links: pass --cache-dir {target} to use that folder")
            return
        self._loaded = False
        self._entries_read = read
        self._loaded_stat: tuple | None = None  # the run file's and journal's stats when their entries were read
        self._base_bytes = 0  # the size of the run file read (0: none, or not usable)

    @property
    def entries(self) -> dict[str, list]:  # read on first use: a run answered by `linked` never loads them
        if not self._loaded:
            self._loaded = True
            self._entries = self._load() if self._entries_read else {}
        return self._entries

    @entries.setter
    def entries(self, value: dict[str, list]) -> None:
        self._loaded, self._entries = True, value

    # ------------------------------------------------------------------ the linked reports of a project

    def linked(self, state: str | None) -> list | None:
        """The FileResults the last run with this project `state` reported, or None."""
        if state is None or not self.usable or not self._read:
            return None
        data = self._load_links().get(state)
        if not isinstance(data, dict):
            return None
        try:
            found = [result_from_json(path, result) for path, result in data.items()]
        except (ValueError, TypeError, KeyError, AttributeError):
            return None  # malformed: link again
        self.stats.linked += 1
        return found

    def remember(self, state: str | None, results: list) -> None:
        if state is None or not self.usable:
            return
        encoded = {}
        for result in results:
            found = encode_result(dataclasses.replace(result, index=None))  # reports only: no graph to keep
            if found is None:
                return  # an unreadable file is not a state to remember
            encoded[result.path] = found
        states = {k: v for k, v in self._load_links().items() if k != state}
        kept = dict(list(states.items())[-(KEEP_LINKED_STATES - 1):]) if KEEP_LINKED_STATES > 1 else {}
        kept[state] = encoded
        payload = json.dumps({"magic": MAGIC, "format": FORMAT, "key": self.key, "version": __version__,
                              "states": kept}, separators=(",", ":"))
        try:
            self._prepare_directory()
            _atomic_write(self.link_file, payload)
        except OSError as err:
            self.notice = f"cache not written to {self.directory}: {err.strerror or err} (use --no-cache or --cache-dir)"

    def _load_links(self) -> dict:
        try:
            raw = read_bounded(self.link_file, MAX_CACHE_BYTES, what="cache file", follow=False)
            data = json.loads(raw)
        except (InputProblem, ValueError, RecursionError, MemoryError):
            return {}
        if (not isinstance(data, dict) or data.get("magic") != MAGIC or data.get("format") != FORMAT
                or data.get("key") != self.key or not isinstance(data.get("states"), dict)):
            return {}
        return data["states"]

    # ------------------------------------------------------------------ reading

    def _load(self) -> dict[str, list]:
        """The run file's entries, then the journal's (a later one wins)."""
        self._loaded_stat = (_file_stat(self.file), _file_stat(self.journal))
        self._base_bytes = 0
        entries: dict[str, list] = {}
        try:
            raw = read_bounded(self.file, MAX_CACHE_BYTES, what="a cache file", follow=False)
            data = json.loads(raw)
        except (InputProblem, ValueError, RecursionError, MemoryError):
            data = None
        if (isinstance(data, dict) and data.get("magic") == MAGIC and data.get("format") == FORMAT
                and data.get("key") == self.key and isinstance(data.get("files"), dict)):
            entries = data["files"]
            self._base_bytes = len(raw)
        # (else foreign, older or corrupt: ignored, rewritten on save)
        try:
            journal = read_bounded(self.journal, MAX_CACHE_BYTES, what="a cache file", follow=False)
        except InputProblem:
            journal = b""
        lines = journal.splitlines() if journal.startswith(HEADER) else []  # (not ours: neither read nor written)
        for line in lines:
            try:
                item = json.loads(line)
            except (ValueError, RecursionError, MemoryError):
                continue  # a line cut short by a killed run
            if (isinstance(item, dict) and item.get("magic") == MAGIC and item.get("format") == FORMAT
                    and item.get("key") == self.key and isinstance(item.get("path"), str)):
                entries[item["path"]] = item.get("entry")  # validated when looked up, as any entry
        return entries

    def lookup(self, path: str, checked: bool = True):
        """The cached FileResult of `path` if its content is unchanged (and, for a `checked` file, it holds the
        rules' candidates, not only the index), else None (a malformed entry too)."""
        self._seen.add(path)
        entry = self.entries.get(path)
        if entry is None or not _valid_entry(entry):
            self.stats.misses += 1
            return None
        try:
            *stat, digest, trusted, result = entry
            if checked and result.get("checked") is not True:
                self.stats.misses += 1
                return None
            found = result_from_json(path, result)
            found.checked = checked
            current = stat_key(os.stat(path))
            if not (trusted and current == tuple(stat)):
                if current[2] != stat[2]:  # another size: another content
                    self.stats.misses += 1
                    return None
                data = read_bounded(path, stat[2], what="a source file")
                if hashlib.sha256(data).hexdigest() != digest:
                    self.stats.misses += 1
                    return None
                self.stats.rehashed += 1
                self._record(path, (*current, digest), result)
        except (OSError, ValueError, TypeError, KeyError, AttributeError, InputProblem):
            self.stats.misses += 1
            return None  # a malformed entry is a miss, never a crash
        self.stats.hits += 1
        self.digests[path] = digest
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
        self.digests[path] = stamp[4]
        self._changed.append(path)

    def save(self) -> None:
        """Append the changed entries to the journal, or write all entries atomically (merged with what a
        concurrent run may have written meanwhile) when the journal would grow too large."""
        if not self._changed or not self.usable:
            return
        entries = self.entries
        changed, self._changed = list(dict.fromkeys(self._changed)), []
        try:
            self._prepare_directory()
            if self._append(changed, entries):
                return
            if self._loaded_stat is not None and (_file_stat(self.file), _file_stat(self.journal)) == self._loaded_stat:
                merged = entries  # nobody wrote the files since they were read: nothing of theirs to keep
            else:
                merged = {p: e for p, e in self._load().items() if p not in self._seen and os.path.exists(p)}
                merged.update(entries)
            payload = json.dumps({"magic": MAGIC, "format": FORMAT, "key": self.key, "version": __version__,
                                  "files": merged}, separators=(",", ":"))
            _atomic_write(self.file, payload)
            if _is_ours(self.journal):
                _remove(self.journal)  # folded into the run file
            self._prune()
        except OSError as err:
            self.notice = f"cache not written to {self.directory}: {err.strerror or err} (use --no-cache or --cache-dir)"

    def _append(self, changed: list[str], entries: dict[str, list]) -> bool:
        """Append the `changed` entries to the journal; False where the run file must be written whole instead
        (none was read, the journal would outgrow its share, or is not a regular file of ours)."""
        if not self._base_bytes:
            return False
        lines = "".join(json.dumps({"magic": MAGIC, "format": FORMAT, "key": self.key, "path": path,
                                    "entry": entries[path]}, separators=(",", ":")) + "\n" for path in changed)
        data = lines.encode()  # (JSON escapes what is not ASCII)
        journal = _file_stat(self.journal)
        if (journal[2] if journal else 0) + len(data) > self._base_bytes // JOURNAL_SHARE:
            return False
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(self.journal, flags, 0o600)
        except OSError:
            return False  # a link, a FIFO...: the run file is written whole
        try:
            status = os.fstat(fd)
            if not S_ISREG(status.st_mode) or (status.st_size and not _is_ours(self.journal)):
                return False
            if status.st_size and os.pread(fd, 1, status.st_size - 1) != b"\n":
                data = b"\n" + data  # after a line cut short by a killed run
            os.write(fd, data)  # one write: concurrent runs' lines do not interleave
        finally:
            os.close(fd)
        return True

    def _prepare_directory(self) -> None:
        _prepare_directory(self.directory)

    def _prune(self) -> None:
        """Keep the most recent KEEP_RUN_FILES run files; drop temporaries a killed run left behind. Only
        regular files that start with what this cache writes are ever deleted."""
        now = time.time()
        runs = []
        for entry in os.scandir(self.directory):
            try:
                if entry.is_symlink() or not entry.is_file():
                    continue
                if entry.name.startswith(("scan-", "link-", "program-", "catalog-")) and entry.name.endswith(".json"):
                    if _is_ours(entry.path):
                        runs.append((entry.stat().st_mtime, entry.path))
                elif entry.name.startswith(TMP_PREFIX) and now - entry.stat().st_mtime > 3600 and any(
                        _is_ours(entry.path, header) for header in (HEADER, CACHEDIR_TAG.encode(), GITIGNORE.encode())):
                    _remove(entry.path)
            except OSError:
                continue
        for _, path in sorted(runs, reverse=True)[KEEP_RUN_FILES:]:
            _remove(path)
            journal = path[:-len(".json")] + ".jsonl"
            if path.startswith(os.path.join(self.directory, "scan-")) and _is_ours(journal):
                _remove(journal)  # a run file's journal goes with it


class ProgramCache:
    """The links of one project's last run (project/incremental.py), beside the scan cache's entries: a warm run
    with a few changed files re-links only those. `digests` are the content sha256 of the files as analysed
    this run (ScanCache.digests). The file is read under the scan cache's rules (a regular file, bounded, no
    links, our header); what is in it is validated before use, and anything else is a full link."""

    def __init__(self, cache: ScanCache, root: str) -> None:
        self.cache = cache
        self.root = root
        self.digests = cache.digests
        tag = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
        self.file = os.path.join(cache.directory, f"program-{cache.key[:32]}-{tag}.json")

    def load(self) -> dict | None:
        if not self.cache.usable or not self.cache._read:
            return None
        try:
            raw = read_bounded(self.file, MAX_CACHE_BYTES, what="cache file", follow=False)
            data = json.loads(raw)
        except (InputProblem, ValueError, RecursionError, MemoryError):
            return None
        if (not isinstance(data, dict) or data.get("magic") != MAGIC or data.get("format") != FORMAT
                or data.get("key") != self.cache.key or data.get("root") != self.root
                or not isinstance(data.get("modules"), dict)):
            return None
        return data["modules"]

    def save(self, modules: dict | None) -> None:
        """Store the program's links (None: none can be replayed, e.g. its resolution met a cycle)."""
        if not self.cache.usable:
            return
        payload = json.dumps({"magic": MAGIC, "format": FORMAT, "key": self.cache.key, "version": __version__,
                              "root": self.root, "modules": modules}, separators=(",", ":"))
        try:
            self.cache._prepare_directory()
            _atomic_write(self.file, payload)
        except OSError as err:
            self.cache.notice = (f"cache not written to {self.cache.directory}: {err.strerror or err} "
                                 "(use --no-cache or --cache-dir)")


# ----------------------------------------------------------------------------- the parsed rule files

CATALOG_FORMAT = 1


def catalog_key(files: list[tuple[str, bytes]]) -> str:
    """sha256 of the shipped rule files (names and bytes, in load order), this version and the installed YAML
    library (another PyYAML may read the same bytes differently)."""
    digest = hashlib.sha256("\0".join([MAGIC, "catalog", str(CATALOG_FORMAT), __version__, _yaml_stamp()]).encode())
    for name, raw in files:
        digest.update(name.encode() + b"\0" + raw + b"\0")
    return digest.hexdigest()


def _yaml_stamp() -> str:
    """Where the yaml package is installed and its `__init__.py`'s stat (found without importing it)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("yaml")
        origin = spec.origin if spec is not None else None
        status = os.stat(origin) if origin else None
    except (ImportError, ValueError, OSError):
        return "?"
    return f"{origin}\0{status.st_mtime_ns}\0{status.st_size}" if status else "?"


def _catalog_file(directory: str, key: str) -> str:
    return os.path.join(directory, f"catalog-{key[:32]}.json")


def read_catalog_documents(directory: str, key: str, names: list[str]) -> dict[str, dict] | None:
    """The parsed YAML documents stored under `key` in `directory`, {file name: mapping} for exactly `names`;
    None for anything else (no file, corrupt, cut short, another key or format, not a regular file, the folder
    a link): the caller parses the files again. Read under the scan cache's rules (bounded, no links)."""
    if os.path.islink(directory):
        return None
    try:
        data = json.loads(read_bounded(_catalog_file(directory, key), MAX_CACHE_BYTES, what="a cache file",
                                       follow=False))
    except (InputProblem, ValueError, RecursionError, MemoryError):
        return None
    if (not isinstance(data, dict) or data.get("magic") != MAGIC or data.get("format") != CATALOG_FORMAT
            or data.get("key") != key or not isinstance(data.get("documents"), dict)):
        return None
    documents = data["documents"]
    if sorted(documents) != sorted(names) or not all(isinstance(doc, dict) for doc in documents.values()):
        return None
    return documents


def write_catalog_documents(directory: str, key: str, documents: dict[str, dict]) -> None:
    """Store the parsed documents (plain JSON values) under `key`; nothing when the folder cannot be written
    (the scan cache says so in its own notice)."""
    payload = json.dumps({"magic": MAGIC, "format": CATALOG_FORMAT, "key": key, "version": __version__,
                          "documents": documents}, separators=(",", ":"))
    try:
        _prepare_directory(directory)
        _atomic_write(_catalog_file(directory, key), payload)
    except OSError:
        pass


def _prepare_directory(directory: str) -> None:
    """Create the folder with its CACHEDIR.TAG and `.gitignore`; in an existing folder the markers are added
    only when it is this cache's (its tag) or empty: `--cache-dir .` must not ignore a project."""
    created = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    if os.path.islink(directory):  # replaced by a link meanwhile
        raise OSError(f"{directory} is a symbolic link")
    tag = os.path.join(directory, "CACHEDIR.TAG")
    if not created and not _is_ours(tag, CACHEDIR_TAG.encode()) and any(os.scandir(directory)):
        return
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", GITIGNORE)):
        target = os.path.join(directory, name)
        if not os.path.lexists(target):
            _atomic_write(target, text)


def _file_stat(path: str) -> tuple | None:
    try:
        return stat_key(os.stat(path, follow_symlinks=False))
    except OSError:
        return None


def _is_ours(path: str, header: bytes = HEADER) -> bool:
    """The file at `path` (not a link) starts with `header`: this cache wrote it."""
    try:
        with open(path, "rb", opener=_no_follow) as handle:
            return handle.read(len(header)) == header
    except OSError:
        return False


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))


def _atomic_write(target: str, text: str) -> None:
    """Write a temporary file next to `target` and rename it over `target`: readers see old or new, whole."""
    fd, temporary = tempfile.mkstemp(prefix=TMP_PREFIX, dir=os.path.dirname(target))
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
