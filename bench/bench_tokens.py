"""Throughput of `llmdoctor tokens` against tiktoken called directly on the same texts.

    .venv/bin/python bench/bench_tokens.py [--files 400] [--kib 16] [--threads N] [--repeat 3]

The corpus is built from this repository's own text (Python sources, README, fixtures with CJK and emoji),
cut into files of about --kib KiB, so it is the same on every machine with this checkout. Three timings,
best of --repeat each, same encoding and same thread count:

  tiktoken    tiktoken.get_encoding(name).encode_ordinary_batch(texts, num_threads=N)   (the reference)
  llmdoctor   llmdoctor.tokens.count.count_texts(encoding, texts, N)                    (the counting core)
  end-to-end  llmdoctor.tokens.count.count_tokens([folder])   (walk, read, decode, count: the CLI's work)

tiktoken's own encoding is loaded through its documented offline cache (TIKTOKEN_CACHE_DIR seeded from
the same verified local copy), so no network is needed. The ratio printed is llmdoctor / tiktoken time.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmdoctor.tokens.count import Options, count_texts, count_tokens, default_threads
from llmdoctor.tokens.encodings import bundled_copy, load_encoding, published_hash


def corpus(files: int, kib: int) -> list[str]:
    sources = sorted(REPO.glob("llmdoctor/**/*.py")) + [REPO / "README.md"]
    sources += sorted((REPO / "fixtures" / "tokens" / "prompts").rglob("*.txt"))
    text = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    size = kib * 1024
    texts = []
    offset = 0
    for index in range(files):
        start = (offset + index * 7919) % max(1, len(text) - size)
        texts.append(text[start:start + size])
        offset += size
    return texts


def tiktoken_reference(name: str, cache: Path):
    """tiktoken.get_encoding through its own cache (key sha1(url)); tiktoken re-checks the sha256."""
    url, _sha = published_hash(name)
    data = gzip.decompress(bundled_copy(f"{name}.tiktoken").read_bytes())
    (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    started = time.perf_counter()
    encoding = tiktoken.get_encoding(name)
    return encoding, time.perf_counter() - started


def best(repeat: int, work) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--kib", type=int, default=16)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--encoding", default="o200k_base")
    args = parser.parse_args()

    texts = corpus(args.files, args.kib)
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(scratch, "cache")
        cache.mkdir()
        reference, tiktoken_load = tiktoken_reference(args.encoding, cache)
        started = time.perf_counter()
        ours = load_encoding(args.encoding).encoding
        our_load = time.perf_counter() - started

        folder = Path(scratch, "corpus")
        folder.mkdir()
        for index, text in enumerate(texts):
            (folder / f"{index:05d}.txt").write_text(text, encoding="utf-8")

        reference.encode_ordinary_batch(texts[:50], num_threads=args.threads)  # warm both: thread-local
        count_texts(ours, texts[:50], args.threads)  # regex caches in tiktoken's core
        direct_s, direct = best(args.repeat, lambda: [len(t) for t in reference.encode_ordinary_batch(
            texts, num_threads=args.threads)])
        core_s, core = best(args.repeat, lambda: count_texts(ours, texts, args.threads))
        options = Options(encoding=args.encoding, threads=args.threads)
        e2e_s, report = best(args.repeat, lambda: count_tokens([str(folder)], options))

    assert core == direct, "llmdoctor's counts differ from tiktoken's"
    assert report.total == sum(direct), "end-to-end total differs from tiktoken's"
    tokens = sum(direct)
    print(f"corpus: {len(texts)} files x {args.kib} KiB = {megabytes:.1f} MB, {tokens:,} tokens "
          f"({args.encoding}), {args.threads} threads, best of {args.repeat}, {os.cpu_count()} CPUs")
    print(f"first load: tiktoken (warm cache) {tiktoken_load:.2f} s, llmdoctor (verified local copy) "
          f"{our_load:.2f} s")
    print(f"{'':<12}{'seconds':>9}{'MB/s':>9}{'Mtok/s':>9}{'ratio':>8}")
    for label, seconds in (("tiktoken", direct_s), ("llmdoctor", core_s), ("end-to-end", e2e_s)):
        print(f"{label:<12}{seconds:>9.3f}{megabytes / seconds:>9.2f}{tokens / seconds / 1e6:>9.2f}"
              f"{seconds / direct_s:>8.2f}")
    within = core_s <= direct_s * 1.10
    print(f"llmdoctor counting is {'within' if within else 'NOT within'} 10% of tiktoken "
          f"(ratio {core_s / direct_s:.3f}); end-to-end ratio {e2e_s / direct_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
