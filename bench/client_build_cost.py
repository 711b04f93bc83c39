"""How long building an AWS SDK client takes: the figures sdk-http.yaml quotes in LLM003's message for boto3.

    python bench/client_build_cost.py [--repeat 20]

Needs boto3 (not a dependency of llmdoctor: `pip install boto3`); no network and no AWS credentials are used
(a client is built, never called). Each figure is the median of `--repeat` builds in a process that has already
built one client, as a request handler of a running server would.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from types import ModuleType


def median_ms(build, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        build()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def count_of(unit: str):
    """An argparse type: a whole number of `unit`, 1 or more."""
    def positive(text: str) -> int:
        value = int(text) if text.isdigit() else 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of {unit}, 1 or more")
        return value
    return positive


def start(doc: str, unit: str, package: str) -> tuple[int, ModuleType] | None:
    """A cost script's command line (`--repeat` of `unit`, exit 2 on a bad one) and the package it measures;
    None, having said how to get it, when the package is not installed."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--repeat", type=count_of(unit), default=20, help=f"{unit} per figure, 1 or more (default 20)")
    repeat = parser.parse_args().repeat
    try:
        return repeat, importlib.import_module(package)
    except ImportError:
        print(f"{package} is not installed: pip install {package}", file=sys.stderr)
        return None


def main() -> int:
    started = start(__doc__, "builds", "boto3")
    if started is None:
        return 2
    repeat, boto3 = started
    region = {"region_name": "us-east-1"}
    boto3.client("bedrock-runtime", **region)  # imports and the default session's loader caches, once
    print(f"boto3 {boto3.__version__}, median of {repeat}")
    cases = {
        'boto3.client("bedrock-runtime")': lambda: boto3.client("bedrock-runtime", **region),
        'boto3.client("s3")': lambda: boto3.client("s3", **region),
        'boto3.Session().client("bedrock-runtime")': lambda: boto3.Session().client("bedrock-runtime", **region),
    }
    for name, build in cases.items():
        print(f"  {name:45s} {median_ms(build, repeat):7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
