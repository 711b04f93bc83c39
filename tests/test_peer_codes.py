"""A `# noqa` naming another linter's code for the same check (a rule's `peer_codes`: ruff's `S113` for LLM006,
its flake8-async `ASYNC2xx` codes for LLM004) silences the rule on that line, directly and through calls; a code
of another check does not. A malformed `peer_codes` in a rule file is named."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from llmdoctor.catalog import load_checks
from llmdoctor.errors import UserError
from llmdoctor.scan.catalog import load_catalog, shipped_rules_dir

APP = """
    import time
    import requests
    from fastapi import FastAPI
    app = FastAPI()

    def fetch():
        return requests.get("http://users")  # noqa: S113

    @app.get("/users")
    async def users():
        time.sleep(1)  # noqa: ASYNC251
        requests.get("http://users", timeout=5)  # noqa: S113
        open("users.json")  # noqa: E501
        return fetch()
    """


def test_a_peer_linters_noqa_silences_the_same_check_on_its_line(cli, tmp_path):
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    result = cli("scan", "app.py", "--no-cache", "--format", "json", "--select", "LLM004,LLM006", cwd=tmp_path)
    found = [(f["line"], f["rule"]) for f in json.loads(result.stdout)["findings"]]
    # S113 is not LLM004's check: the blocking call on line 13 stays, as does the helper's chain (line 15), and
    # E501 silences nothing of ours; LLM006 on line 8 and LLM004 on line 12 are silenced by their peers' codes
    assert found == [(13, "LLM004"), (14, "LLM004"), (15, "LLM004")]
    assert result.returncode == 1


def test_the_peer_codes_are_the_rules_own_and_shown_in_explain(cli):
    checks = load_checks()
    assert checks.check("LLM006").peer_codes == {"S113"}
    assert {"ASYNC210", "ASYNC230", "ASYNC251"} <= checks.check("LLM004").peer_codes
    assert not checks.check("LLM005").peer_codes
    assert load_catalog().rules["LLM006"].peer_codes == {"S113"}
    result = cli("explain", "LLM006")
    assert "## Suppressing" in result.stdout and "`S113`" in result.stdout


@pytest.mark.parametrize("value", ["S113", "[s113]", "[S113, 12]", "['ASYNC 230']"])
def test_a_malformed_peer_codes_names_the_file_and_key(tmp_path, value):
    rules = tmp_path / "rules"
    shutil.copytree(shipped_rules_dir(), rules)
    spec = rules / "llm006.yaml"
    spec.write_text(spec.read_text().replace("peer_codes: [S113]", f"peer_codes: {value}"))
    for load in (lambda: load_catalog(shipped_dir=rules), lambda: load_checks(shipped_dir=rules)):
        with pytest.raises(UserError, match=r"llm006\.yaml.*peer_codes.*upper-case linter codes"):
            load()
