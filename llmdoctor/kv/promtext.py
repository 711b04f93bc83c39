"""The Prometheus text exposition format (0.0.4), as `prometheus_client` (vLLM, SGLang) and the Rust
`metrics-exporter-prometheus` (TGI) write it; OpenMetrics' `# EOF` and `_created` samples are accepted too.

A line is `name{label="value",...} value [timestamp]`; label values escape `\\`, `"` and newlines as `\\\\`,
`\\"` and `\\n`; values are floats, `NaN`, `+Inf`, `-Inf`. Comments (`# HELP`, `# TYPE`) are skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


class MetricsFormatError(ValueError):
    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line


_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _labels(text: str, start: int, line_no: int) -> tuple[dict[str, str], int]:
    """Parse `{a="x",b="y"}` from text[start] == '{'; returns (labels, index after '}')."""
    labels: dict[str, str] = {}
    i = start + 1
    while True:
        while i < len(text) and text[i] in " ,":
            i += 1
        if i >= len(text):
            raise MetricsFormatError(line_no, "unterminated label set")
        if text[i] == "}":
            return labels, i + 1
        eq = text.find("=", i)
        if eq < 0:
            raise MetricsFormatError(line_no, "label without '='")
        key = text[i:eq].strip()
        i = eq + 1
        if i >= len(text) or text[i] != '"':
            raise MetricsFormatError(line_no, f"label {key!r}: value is not quoted")
        i += 1
        value = []
        while True:
            if i >= len(text):
                raise MetricsFormatError(line_no, f"label {key!r}: unterminated value")
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                value.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            value.append(ch)
            i += 1
        labels[key] = "".join(value)


def _number(text: str, line_no: int) -> float:
    word = text.strip()
    special = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}
    if word.lower() in special:
        return special[word.lower()]
    try:
        return float(word)
    except ValueError:
        raise MetricsFormatError(line_no, f"value {word!r} is not a number") from None


def parse(text: str) -> list[Sample]:
    samples = []
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        space = line.find(" ")
        if brace >= 0 and (space < 0 or brace < space):
            name = line[:brace]
            labels, end = _labels(line, brace, line_no)
            rest = line[end:].split()
        else:
            parts = line.split()
            name, labels, rest = parts[0], {}, parts[1:]
        if not rest:
            raise MetricsFormatError(line_no, f"{name}: no value")
        samples.append(Sample(name, labels, _number(rest[0], line_no)))
    return samples


def select(samples: list[Sample], *names: str) -> tuple[str, list[Sample]] | None:
    """The samples of the first of `names` that is present (newer names first, then their old spellings)."""
    for name in names:
        found = [s for s in samples if s.name == name]
        if found:
            return name, found
    return None
