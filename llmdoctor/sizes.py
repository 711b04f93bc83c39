"""Memory sizes on the command line and in reports: `80GB` is decimal, `80GiB` binary, a bare number bytes."""

from __future__ import annotations

import re

from llmdoctor.errors import UserError

KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4
GB = 1000**3

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": KIB, "mib": MIB, "gib": GIB, "tib": TIB,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
MAX_BYTES = 2**60  # 1 EiB: larger than any GPU, disk or file; `1` and 400 zeros must not overflow a float


def parse_size(text: str, option: str) -> int:
    """Bytes for `text` (`80GiB`, `33.5GiB`, `80GB`, `512MiB`, `1073741824`); UserError naming `option`."""
    from llmdoctor.limits import brief

    match = _SIZE.match(text or "")
    if not match:
        raise UserError(f"{option}: cannot read {brief(text)} as a size; write e.g. 80GiB, 33.5GiB, 80GB, 512MiB "
                        "or a number of bytes")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise UserError(f"{option}: unknown unit {brief(unit, 20)} in {brief(text)}; use B, KB, MB, GB, TB "
                        "(decimal) or KiB, MiB, GiB, TiB (binary)")
    if len(number.split(".")[0].lstrip("0")) > 19 or float(number) * factor > MAX_BYTES:
        raise UserError(f"{option}: {brief(text)} is more than 1 EiB: not a memory size")
    value = int(float(number) * factor)
    if value <= 0:
        less = " (less than one byte)" if float(number) > 0 else ""
        raise UserError(f"{option}: the size must be positive, got {brief(text)}{less}")
    return value


def gib(n: float) -> float:
    return n / GIB


def gb(n: float) -> float:
    return n / GB


def format_size(n: float) -> str:
    """`12.50 GiB (13.42 GB)` for large sizes, `512.0 KiB` / `640 B` for small ones."""
    if abs(n) >= GIB / 10:
        return f"{n / GIB:,.2f} GiB ({n / GB:,.2f} GB)"
    if abs(n) >= MIB:
        return f"{n / MIB:,.1f} MiB"
    if abs(n) >= KIB:
        return f"{n / KIB:,.1f} KiB"
    return f"{int(n)} B"
