import pytest

from llmdoctor.errors import UserError
from llmdoctor.sizes import format_size, parse_size


@pytest.mark.parametrize("text, expected", [
    ("80GiB", 80 * 1024**3),
    ("33.5GiB", int(33.5 * 1024**3)),
    ("80GB", 80 * 10**9),
    ("512MiB", 512 * 1024**2),
    ("1073741824", 1073741824),
    ("1.5 TB", 1_500_000_000_000),
    ("64kib", 65536),
    ("100B", 100),
])
def test_parse_size_units_and_fractions(text, expected):
    assert parse_size(text, "--kv-mem") == expected


@pytest.mark.parametrize("text, needle", [
    ("0", "must be positive"),
    ("0GiB", "must be positive"),
    ("0.5", "must be positive, got '0.5' (less than one byte)"),
    ("1e3GB", "cannot read"),
    ("nan", "cannot read"),
    ("-5GiB", "cannot read"),
    ("eighty", "cannot read"),
    ("80 gigs", "unknown unit"),
    ("80G", "unknown unit"),  # ambiguous: decimal or binary? the user must say
    ("", "cannot read"),
])
def test_parse_size_rejects_with_the_option_named(text, needle):
    with pytest.raises(UserError) as err:
        parse_size(text, "--gpu-mem")
    assert "--gpu-mem" in str(err.value) and needle in str(err.value)


def test_format_size_prints_binary_and_decimal():
    assert format_size(80 * 1024**3) == "80.00 GiB (85.90 GB)"
    assert format_size(131072) == "128.0 KiB"
    assert format_size(512) == "512 B"
