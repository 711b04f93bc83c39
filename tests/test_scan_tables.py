"""A catalog table's lookup: exact names first, then the first wildcard pattern in the table's order, whether
the pattern's first component is literal (`os.spawn*`) or a wildcard itself (`*.on_event`, `mypy_boto3_*.*`)."""

from __future__ import annotations

import fnmatch

import pytest

from llmdoctor.scan.catalog import Table, TableEntry, load_catalog


def table(*names: str) -> Table:
    out = Table("t")
    for name in names:
        out.add(TableEntry(name))
    return out


def test_exact_names_come_before_patterns():
    found = table("os.spawn*", "os.spawnv").match("os.spawnv")
    assert found is not None and found.name == "os.spawnv"


@pytest.mark.parametrize("names, query, expected", [
    (("*.command", "click.*"), "click.command", "*.command"),      # a wildcard root first in the table
    (("click.*", "*.command"), "click.command", "click.*"),        # a literal root first
    (("a.b*", "*.bx", "a.*"), "a.bx", "a.b*"),
    (("mypy_boto3_*.*Client.put_object", "boto3.*"), "mypy_boto3_s3.S3Client.put_object",
     "mypy_boto3_*.*Client.put_object"),
    (("abc.*",), "abc", None),                                     # the same root, no dot: no match
    (("abc.*",), "abcd.x", None),
    (("*config*",), "load_config_file", "*config*"),
])
def test_the_first_matching_pattern_in_table_order(names, query, expected):
    found = table(*names).match(query)
    assert (found.name if found else None) == expected


def test_every_shipped_table_answers_as_a_plain_scan_of_its_patterns():
    """The rooted lookup gives what trying every pattern in order gives, for every shipped pattern and for
    names built from them."""
    catalog = load_catalog()
    for shipped in catalog.tables.values():
        patterns = [entry for entry in shipped.entries if "*" in entry.name]
        queries = {entry.name.replace("*", "x") for entry in patterns} | {entry.name.replace("*", "") for entry in patterns}
        queries |= {"os.spawnv", "sqlalchemy.orm.Session.query.filter.all", "app.on_event", "nothing.here", "x"}
        for query in queries:
            if query in shipped._exact:
                continue
            plain = next((entry for entry in patterns if fnmatch.fnmatchcase(query, entry.name)), None)
            assert shipped.match(query) is plain, (shipped.name, query)
