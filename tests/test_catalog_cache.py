"""The shipped rule files' parsed YAML, kept next to the scan cache (scan/catalog.py `ShippedDocuments`): the
catalog built from it is the catalog built by parsing the files; a missing, corrupt, cut, foreign, stale or
unreadable cache file is parsed again, silently, and written again where it can be."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from llmdoctor.catalog import shipped_rules_dir
from llmdoctor.scan import cache as cache_module
from llmdoctor.scan import catalog as catalog_module
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.settings import ScanConfig


def state(catalog) -> tuple:
    """What a catalog holds (its per-process memo aside)."""
    return (catalog.rules, {name: table.entries for name, table in catalog.tables.items()}, catalog.sources,
            catalog.knowledge, catalog.fingerprint)


def stored(directory: Path) -> list[Path]:
    return sorted(directory.glob("catalog-*.json"))


@pytest.fixture(scope="module")
def fresh() -> tuple:
    return state(load_catalog())


def test_the_cached_documents_give_the_parsed_catalog(tmp_path: Path, fresh, monkeypatch) -> None:
    assert state(load_catalog(cache_dir=str(tmp_path))) == fresh
    [file] = stored(tmp_path)
    data = json.loads(file.read_bytes())
    assert data["magic"] == cache_module.MAGIC and len(data["documents"]) == len(list(shipped_rules_dir().glob("*.yaml")))
    assert (tmp_path / "CACHEDIR.TAG").is_file()

    def no_parse(*args, **kwargs):
        raise AssertionError("the cached documents are read, not parsed")

    monkeypatch.setattr(catalog_module, "read_yaml", no_parse)
    assert state(load_catalog(cache_dir=str(tmp_path))) == fresh


def _truncated(text: bytes) -> bytes:
    return text[: len(text) // 2]


def _other(field: str, value):
    def edit(text: bytes) -> bytes:
        data = json.loads(text)
        data[field] = value
        return json.dumps(data).encode()
    return edit


def _one_document(change):
    def edit(text: bytes) -> bytes:
        data = json.loads(text)
        name = min(data["documents"])
        change(data["documents"], name)
        return json.dumps(data).encode()
    return edit


@pytest.mark.parametrize("damage", [
    lambda text: b"",
    lambda text: b"\x00\x01garbage",
    _truncated,
    lambda text: text[:-1],
    lambda text: b"[1, 2, 3]",
    _other("magic", "someone-else"),
    _other("format", 999),
    _other("key", "0" * 64),
    _other("documents", []),
    _one_document(lambda documents, name: documents.pop(name)),
    _one_document(lambda documents, name: documents.__setitem__(name, ["not", "a", "mapping"])),
    _one_document(lambda documents, name: documents.__setitem__("extra.yaml", {})),
], ids=["empty", "garbage", "cut-in-half", "cut-by-one", "a-list", "foreign", "other-format", "other-key",
        "documents-a-list", "a-file-missing", "a-document-not-a-mapping", "a-file-too-many"])
def test_a_damaged_cache_file_is_parsed_again_and_rewritten(tmp_path: Path, fresh, damage) -> None:
    load_catalog(cache_dir=str(tmp_path))
    [file] = stored(tmp_path)
    good = file.read_bytes()
    file.write_bytes(damage(good))
    assert state(load_catalog(cache_dir=str(tmp_path))) == fresh
    assert file.read_bytes() == good  # written again, whole


@pytest.mark.parametrize("kind", ["directory", "link"])
def test_an_unreadable_cache_file_is_parsed_again(tmp_path: Path, fresh, kind) -> None:
    load_catalog(cache_dir=str(tmp_path))
    [file] = stored(tmp_path)
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere.json"
    shutil.move(file, elsewhere)
    if kind == "directory":
        file.mkdir()
    else:
        file.symlink_to(elsewhere)  # a link is not followed
        elsewhere.write_text(json.dumps({**json.loads(elsewhere.read_text()), "documents": {}}))
    assert state(load_catalog(cache_dir=str(tmp_path))) == fresh


def test_a_cache_folder_that_is_a_link_is_neither_read_nor_written(tmp_path: Path, fresh) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert state(load_catalog(cache_dir=str(tmp_path / "link"))) == fresh
    assert stored(real) == []


def test_an_unwritable_cache_folder_still_loads(tmp_path: Path, fresh) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("where the cache folder should be")
    assert state(load_catalog(cache_dir=str(blocker / "cache"))) == fresh


def test_an_edited_rule_file_or_another_version_is_a_new_key(tmp_path: Path, monkeypatch) -> None:
    shipped = tmp_path / "rules"
    shutil.copytree(shipped_rules_dir(), shipped)
    cache = tmp_path / "cache"
    before = load_catalog(shipped_dir=shipped, cache_dir=str(cache))
    rule_file = Path(before.rules["LLM001"].source)
    rule_file.write_text(rule_file.read_text().replace(f"summary: {before.rules['LLM001'].summary}",
                                                       "summary: Edited since the last run.", 1))
    after = load_catalog(shipped_dir=shipped, cache_dir=str(cache))
    assert after.rules["LLM001"].summary == "Edited since the last run."
    assert state(after) == state(load_catalog(shipped_dir=shipped))
    assert len(stored(cache)) == 2
    monkeypatch.setattr(cache_module, "__version__", "0.0.0-another")
    assert state(load_catalog(shipped_dir=shipped, cache_dir=str(cache))) == state(after)
    assert len(stored(cache)) == 3


def test_documents_json_would_change_are_not_stored(tmp_path: Path) -> None:
    shipped = tmp_path / "rules"
    shutil.copytree(shipped_rules_dir(), shipped)
    (shipped / "zz-dated.yaml").write_text("kind: tables\nreleased: 2024-01-01\ntables: {}\n")  # a date
    cache = tmp_path / "cache"
    assert state(load_catalog(shipped_dir=shipped, cache_dir=str(cache))) == state(load_catalog(shipped_dir=shipped))
    assert stored(cache) == []


def test_the_scan_keeps_the_catalog_where_it_reads_its_cache(tmp_path: Path, monkeypatch) -> None:
    config = ScanConfig(root=str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(cache_module.ENV_VAR, raising=False)
    assert ScanExecutor(jobs=1).catalog_dir(config) == os.path.join(str(tmp_path), cache_module.CACHE_DIR_NAME)
    assert ScanExecutor(jobs=1, cache_dir=str(tmp_path / "c")).catalog_dir(config) == str(tmp_path / "c")
    assert ScanExecutor(jobs=1, use_cache=False).catalog_dir(config) is None
    monkeypatch.setenv("CI", "true")  # the checked-out tree's own cache folder is not read in CI
    assert ScanExecutor(jobs=1).catalog_dir(config) is None
    assert ScanExecutor(jobs=1, cache_dir=str(tmp_path / "c")).catalog_dir(config) == str(tmp_path / "c")
