"""Parallel and cached analysis: the `analyze` step of `run_scan` for real repositories.

`ScanExecutor(jobs, cache_dir, use_cache)` is an `Analyze` callable (files, catalog, config) -> FileResults:

1. cache lookups in this process (stat, content hash when in doubt) - a fully cached run imports no
   libcst and parses nothing;
2. the misses go to `analyze_file` serially when there are few of them, else to a process pool whose
   workers receive the catalog and config ONCE (pool initializer) and then get paths in batches
   (`chunksize`), so the per-file cost is a path out and a small FileResult back;
3. each fresh result is stored in the cache; the cache is written once, atomically, at the end.

Results come back in the order of `files` (hits and misses interleaved as found); `run_scan` sorts the
report anyway, so 1 job and N jobs, cached or not, give the same report.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from llmdoctor.machine import available_cpus
from llmdoctor.report.model import InputError
from llmdoctor.scan.catalog import Catalog
from llmdoctor.scan.engine import FileResult, analyze_module, collector_paused
from llmdoctor.scan.settings import ScanConfig

MIN_FILES_PER_WORKER = 8  # below jobs * this many files to analyse, a pool costs more than it saves
MAX_CHUNK = 32  # files per batch sent to a worker (more: less IPC; fewer: better balance at the end)


# ----------------------------------------------------------------------------- one file, with its stamp

_worker_state: tuple[Catalog, ScanConfig] | None = None
_busy = None  # shared array: per worker slot, 1 + the index of the file it is analysing (0: idle)
_slot = -1


def analyze_with_stamp(path: str, catalog: Catalog, config: ScanConfig, *, isolate: bool = False,
                       rules: bool = True):
    """`analyze_module` of the file at `path` (`rules`: the rules' candidates too, not only the index), with
    the stamp (stat + sha256) of the exact bytes it analysed. With `isolate`, a file CPython rejects is
    analysed in a child process (libcst may crash on it)."""
    from llmdoctor.scan.cache import stamp_of

    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
    except OSError as err:
        errors = [InputError(path, f"cannot read: {err.strerror or err}")] if rules else []
        return FileResult(path, errors=errors, checked=rules), None
    elsewhere = (lambda: isolated([(path, data)], catalog, config)[0][0]) if isolate and _can_fork() else None
    return analyze_module(path, data, catalog, config, rules=rules, isolate=elsewhere), stamp_of(stat, data)


def _init_worker(catalog: Catalog, config: ScanConfig, busy, counter) -> None:
    global _worker_state, _busy, _slot
    _worker_state = (catalog, config)
    _busy = busy
    with counter.get_lock():
        _slot = counter.value
        counter.value += 1


def _worker_analyze(item: tuple[int, str, bool]):
    assert _worker_state is not None
    index, path, rules = item
    if _busy is not None and 0 <= _slot < len(_busy):
        _busy[_slot] = index + 1
    try:
        return analyze_with_stamp(path, *_worker_state, rules=rules)
    finally:
        if _busy is not None and 0 <= _slot < len(_busy):
            _busy[_slot] = 0


def _chunksize(count: int, jobs: int) -> int:
    return max(1, min(MAX_CHUNK, count // (jobs * 16)))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _can_fork() -> bool:
    return sys.platform.startswith("linux")


def _context():
    import multiprocessing

    if _can_fork():
        # fork: workers inherit the imported engine (libcst, the rule modules) instead of re-importing it
        import libcst  # noqa: F401

        from llmdoctor.scan.rules import rule_classes

        rule_classes()
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def analyze_many(files: list[str], catalog: Catalog, config: ScanConfig, jobs: int,
                 checked: set[str] | None = None) -> Iterator[tuple]:
    """(FileResult, stamp) for each of `files`, in order; a process pool when it pays off. Files outside
    `checked` (None: all are) are only indexed for the project model.

    A worker that dies (a crash in libcst's native parser, the OOM killer) costs no other file its result:
    the files it and its siblings were analysing are re-run one per process, so the one that kills its
    process is an input error naming the signal, and the rest go to a fresh pool."""
    def rules(path: str) -> bool:
        return checked is None or path in checked

    serial = jobs <= 1 or len(files) < jobs * MIN_FILES_PER_WORKER
    if not serial and _can_fork():
        _warm_up(catalog, config)  # before the heap is frozen: the workers inherit it built, and frozen
    with _heap_frozen():
        if serial:
            for path in files:
                yield analyze_with_stamp(path, catalog, config, isolate=True, rules=rules(path))
            return
        yield from _analyze_pooled(files, catalog, config, jobs, rules)


def _warm_up(catalog: Catalog, config: ScanConfig) -> None:
    """Build here, once, what every worker would otherwise build for itself on its first files: the lazily
    imported engine, the per-catalog indexes the pre-filters and rules keep in `catalog.memo`, the walk's
    per-node-type plans. Analysing one hit example of each rule (from its YAML) builds exactly that, whatever
    a rule keeps; the forked workers inherit it."""
    _context()
    for rule_id, spec in sorted(catalog.rules.items()):
        if spec.hits:
            analyze_module(f"<{rule_id} example>", spec.hits[0].encode(), catalog, config)


@contextmanager
def _heap_frozen():
    """What the process holds before the analysis (the imported engine, the catalog, the caller's state) out
    of the collector's sight until it ends (`gc.freeze`): each full collection during the scan would walk it
    all again, and in a forked worker that walk also copies every page it touches. The results that arrive
    are still collected as usual. Not given back at the end when someone else had frozen the heap already
    (the cache's lookups: runner.fewer_collections gives it all back when the scan ends)."""
    frozen = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not frozen:
            gc.unfreeze()


def _analyze_pooled(files: list[str], catalog: Catalog, config: ScanConfig, jobs: int, rules) -> Iterator[tuple]:
    done: dict[int, tuple] = {}
    following = 0
    # largest files first, so that no worker is left alone with a big file at the end; results still
    # come out in input order
    pending = sorted(range(len(files)), key=lambda index: -_size(files[index]))
    fruitless = 0
    while pending:
        if len(pending) < jobs * MIN_FILES_PER_WORKER or fruitless >= 2:
            # few left, or workers died twice while analysing nothing: one process per file
            for index, result in zip(pending, isolated([(files[i], None, rules(files[i])) for i in pending],
                                                       catalog, config, jobs=jobs)):
                done[index] = result
            pending = []
        else:
            suspects = _run_pool(pending, files, catalog, config, jobs, done, rules)
            remaining = [index for index in pending if index not in done]
            if suspects:
                fruitless = 0
                suspects = [index for index in remaining if index in suspects]
                for index, result in zip(suspects, isolated([(files[i], None, rules(files[i])) for i in suspects],
                                                            catalog, config, jobs=jobs)):
                    done[index] = result
                remaining = [index for index in remaining if index not in done]
            elif remaining:
                fruitless += 1
            pending = remaining
        while following in done:
            yield done.pop(following)
            following += 1
    while following in done:
        yield done.pop(following)
        following += 1


def _run_pool(pending: list[int], files: list[str], catalog: Catalog, config: ScanConfig, jobs: int,
              done: dict[int, tuple], rules) -> set[int]:
    """Analyse `pending` (indices into `files`) in a pool, filling `done`; the indices that were being
    analysed when a worker died (empty when none died)."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = _context()
    jobs = min(jobs, len(pending))
    busy = context.RawArray("q", jobs)
    counter = context.Value("i", 0)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_init_worker,
                               initargs=(catalog, config, busy, counter))
    try:
        results = pool.map(_worker_analyze, [(index, files[index], rules(files[index])) for index in pending],
                           chunksize=_chunksize(len(pending), jobs))
        for index, result in zip(pending, results):
            done[index] = result
    except BrokenProcessPool:
        return {value - 1 for value in busy if value > 0} or set()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return set()


# ----------------------------------------------------------------------------- one process per file


def isolated(items: list[tuple], catalog: Catalog, config: ScanConfig, jobs: int = 1) -> list[tuple]:
    """(FileResult, stamp) of each (path, bytes or None to read them[, rules]) analysed in a child process
    of its own, `jobs` at a time: a file that kills its process is an InputError naming the signal. Without
    fork (not Linux), analysed here."""
    items = [(item[0], item[1], item[2] if len(item) > 2 else True) for item in items]
    if not _can_fork():
        return [_analyze_item(path, data, catalog, config, rules) for path, data, rules in items]
    context = _context()
    out: list[tuple | None] = [None] * len(items)
    running: list[tuple[int, object, object]] = []
    position = 0
    while position < len(items) or running:
        while position < len(items) and len(running) < max(1, jobs):
            path, data, rules = items[position]
            receiver, sender = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(sender, path, data, catalog, config, rules), daemon=True)
            child.start()
            sender.close()
            running.append((position, child, receiver))
            position += 1
        slot, child, receiver = running.pop(0)
        try:
            found = receiver.recv()
        except (EOFError, OSError):
            found = None
        finally:
            receiver.close()
        child.join()
        path = items[slot][0]
        out[slot] = found if found is not None else (_crashed(path, child.exitcode, items[slot][2]), None)
    return out  # type: ignore[return-value]


def _analyze_item(path: str, data: bytes | None, catalog: Catalog, config: ScanConfig, rules: bool = True) -> tuple:
    if data is None:
        return analyze_with_stamp(path, catalog, config, rules=rules)
    return analyze_module(path, data, catalog, config, rules=rules), None


def _child(sender, path: str, data: bytes | None, catalog: Catalog, config: ScanConfig, rules: bool = True) -> None:
    try:
        found = _analyze_item(path, data, catalog, config, rules)
    except BaseException as err:  # noqa: BLE001 - reported as this file's error, never a traceback
        found = (FileResult(path, errors=[InputError(
            path, f"internal error while analysing this file ({type(err).__name__}: {err}); please report it")]),
            None)
    try:
        sender.send(found)
    finally:
        sender.close()


def _crashed(path: str, exitcode: int | None, checked: bool = True) -> FileResult:
    import signal

    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = {"SIGSEGV": ": a crash in libcst's native parser", "SIGKILL": ": out of memory?",
                "SIGABRT": ": a crash in native code"}.get(name, "")
        how = f"{name}{hint}"
    else:
        how = f"exit status {exitcode}"
    return FileResult(path, checked=checked, errors=[InputError(
        path, f"the process analysing this file died ({how}); the file was not checked, the others were")])


# ----------------------------------------------------------------------------- the analyze step


class ScanExecutor:
    """Cache lookups, then the misses (serial or pooled), then one atomic cache write."""

    def __init__(self, jobs: int | None = None, cache_dir: str | None = None, use_cache: bool = True) -> None:
        self.jobs = jobs or available_cpus()
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self.cache = None  # the ScanCache of the last run, for its stats and notice
        self.notices: list[str] = []

    def _open(self, catalog: Catalog, config: ScanConfig):
        """The cache of this run (opened once), or None without one."""
        if not self.use_cache:
            return None
        if self.cache is not None:
            return self.cache
        from llmdoctor.scan.cache import ENV_VAR, ScanCache, run_key

        directory, trusted = self._directory(config)
        cache = self.cache = ScanCache(directory, run_key(catalog.fingerprint, config.fingerprint()), read=trusted)
        if not trusted and cache.usable and any(Path(directory).glob("scan-*.json")):
            self.notices.append(f"cache in {directory} not read: CI is set and the folder is inside the checked-out "
                                "tree, where it may have come with the code under review (to use a cache your "
                                f"workflow restored, name it with --cache-dir or {ENV_VAR})")
        return cache

    def _directory(self, config: ScanConfig) -> tuple[str, bool]:
        """(the cache folder, whether it may be read)."""
        from llmdoctor.scan.cache import ENV_VAR, default_cache_dir, running_in_ci

        chosen = self.cache_dir or os.environ.get(ENV_VAR)
        chosen = os.path.expanduser(chosen) if chosen else None  # `~/.cache/llmdoctor` from a CI env block
        directory = chosen or default_cache_dir(config.root or os.getcwd())
        # in CI the checked-out tree is the code under review: a cache inside it may have come with that code
        trusted = bool(chosen) or not running_in_ci()
        return directory, trusted

    def catalog_dir(self, config: ScanConfig) -> str | None:
        """Where the catalog keeps the shipped rule files' parsed YAML: this run's cache folder, when it may be
        read (catalog.py `ShippedDocuments`)."""
        if not self.use_cache:
            return None
        directory, trusted = self._directory(config)
        return directory if trusted else None

    def linked(self, files: list[str], checked: set[str], root: str | None, catalog: Catalog,
               config: ScanConfig) -> tuple[list[FileResult] | None, str | None]:
        """(the final results of the last run over this very project state, or None; the state)."""
        cache = self._open(catalog, config)
        if cache is None or not cache.usable:
            return None, None
        from llmdoctor.scan.cache import project_state

        state = project_state(files, checked, root)
        return cache.linked(state), state

    def program(self, root: str | None, catalog: Catalog, config: ScanConfig):
        """The stored links of the project at `root` (cache.ProgramCache), or None without a cache."""
        cache = self._open(catalog, config)
        if root is None or cache is None or not cache.usable:
            return None
        from llmdoctor.scan.cache import ProgramCache

        return ProgramCache(cache, root)

    def remember(self, state: str | None, results: list[FileResult], catalog: Catalog, config: ScanConfig) -> None:
        cache = self._open(catalog, config)
        if cache is not None:
            cache.remember(state, results)

    def __call__(self, files: list[str], catalog: Catalog, config: ScanConfig,
                 checked: set[str] | None = None) -> Iterable[FileResult]:
        cache = self._open(catalog, config)
        if cache is None:
            for result, _ in analyze_many(files, catalog, config, self.jobs, checked):
                yield result
            return
        directory = cache.directory
        if not cache.usable:
            self.notices.append(cache.notice or f"cache not used: {directory}")
            for result, _ in analyze_many(files, catalog, config, self.jobs, checked):
                yield result
            return
        misses, hits = [], []
        with collector_paused(keep=True):  # the entries and indexes are kept for the link
            for path in files:
                hit = cache.lookup(path, checked is None or path in checked)
                if hit is None:
                    misses.append(path)
                else:
                    hits.append(hit)
        yield from hits
        for result, stamp in analyze_many(misses, catalog, config, self.jobs, checked):
            cache.store(result.path, stamp, result)
            yield result
        cache.save()
        if cache.notice:
            self.notices.append(cache.notice)
