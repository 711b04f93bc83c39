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

import os
import sys
from collections.abc import Iterable, Iterator

from llmdoctor.errors import UserError
from llmdoctor.machine import available_cpus
from llmdoctor.report.model import InputError
from llmdoctor.scan.catalog import Catalog
from llmdoctor.scan.engine import FileResult, analyze_source
from llmdoctor.scan.settings import ScanConfig

MIN_FILES_PER_WORKER = 8  # below jobs * this many files to analyse, a pool costs more than it saves
MAX_CHUNK = 32  # files per batch sent to a worker (more: less IPC; fewer: better balance at the end)


# ----------------------------------------------------------------------------- one file, with its stamp

_worker_state: tuple[Catalog, ScanConfig] | None = None


def analyze_with_stamp(path: str, catalog: Catalog, config: ScanConfig):
    """`analyze_file` that also returns the stamp (stat + sha256) of the exact bytes it analysed."""
    from llmdoctor.scan.cache import stamp_of

    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
    except OSError as err:
        return FileResult(path, errors=[InputError(path, f"cannot read: {err.strerror or err}")]), None
    return analyze_source(path, data, catalog, config), stamp_of(stat, data)


def _init_worker(catalog: Catalog, config: ScanConfig) -> None:
    global _worker_state
    _worker_state = (catalog, config)


def _worker_analyze(path: str):
    assert _worker_state is not None
    return analyze_with_stamp(path, *_worker_state)


def _chunksize(count: int, jobs: int) -> int:
    return max(1, min(MAX_CHUNK, count // (jobs * 16)))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def analyze_many(files: list[str], catalog: Catalog, config: ScanConfig, jobs: int) -> Iterator[tuple]:
    """(FileResult, stamp) for each of `files`, in order; a process pool when it pays off."""
    if jobs <= 1 or len(files) < jobs * MIN_FILES_PER_WORKER:
        for path in files:
            yield analyze_with_stamp(path, catalog, config)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = None
    if sys.platform.startswith("linux"):
        # fork: workers inherit the imported engine (libcst, the rule modules) instead of re-importing it
        import libcst  # noqa: F401

        from llmdoctor.scan.rules import rule_classes

        rule_classes()
        context = multiprocessing.get_context("fork")
    jobs = min(jobs, len(files))
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_init_worker,
                               initargs=(catalog, config))
    # largest files first, so that no worker is left alone with a big file at the end; results still
    # come out in input order
    order = sorted(range(len(files)), key=lambda index: -_size(files[index]))
    done: dict[int, tuple] = {}
    following = 0
    try:
        results = pool.map(_worker_analyze, [files[index] for index in order],
                           chunksize=_chunksize(len(files), jobs))
        for index, result in zip(order, results):
            done[index] = result
            while following in done:
                yield done.pop(following)
                following += 1
    except BrokenProcessPool:
        raise UserError("a scan worker process died (out of memory?); rerun with --jobs 1") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ----------------------------------------------------------------------------- the analyze step


class ScanExecutor:
    """Cache lookups, then the misses (serial or pooled), then one atomic cache write."""

    def __init__(self, jobs: int | None = None, cache_dir: str | None = None, use_cache: bool = True) -> None:
        self.jobs = jobs or available_cpus()
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self.cache = None  # the ScanCache of the last run, for its stats and notice
        self.notices: list[str] = []

    def __call__(self, files: list[str], catalog: Catalog, config: ScanConfig) -> Iterable[FileResult]:
        if not self.use_cache:
            for result, _ in analyze_many(files, catalog, config, self.jobs):
                yield result
            return
        from llmdoctor.scan.cache import ScanCache, default_cache_dir, run_key

        directory = self.cache_dir or default_cache_dir(config.root or os.getcwd())
        cache = self.cache = ScanCache(directory, run_key(catalog.fingerprint, config.fingerprint()))
        misses = []
        for path in files:
            hit = cache.lookup(path)
            if hit is None:
                misses.append(path)
            else:
                yield hit
        for result, stamp in analyze_many(misses, catalog, config, self.jobs):
            cache.store(result.path, stamp, result)
            yield result
        cache.save()
        if cache.notice:
            self.notices.append(cache.notice)
