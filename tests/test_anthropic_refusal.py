"""LLM001's anthropic refusal (rules/sdk-anthropic.yaml `nonstreaming_refusal`) against the installed SDK: the
threshold and the per-model limits are the SDK's own, and a call is reported at error exactly when the SDK
would refuse to send it."""

from __future__ import annotations

import pytest

from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.settings import ScanConfig

anthropic = pytest.importorskip("anthropic")
from anthropic import _constants

CATALOG = load_catalog()
REFUSAL = CATALOG.knowledge["sdk-anthropic"]["nonstreaming_refusal"]


def sdk_refuses(max_tokens: int, model: str = "claude-sonnet-4-5") -> bool:
    client = anthropic.Anthropic(api_key="sk-test")  # builds no connection
    limit = _constants.MODEL_NONSTREAMING_TOKENS.get(model)
    try:
        client._calculate_nonstreaming_timeout(max_tokens, limit)
    except ValueError as error:
        assert "Streaming is required" in str(error)
        return True
    return False


def reported_as_refused(max_tokens: int, model: str = "claude-sonnet-4-5", extra: str = "") -> bool:
    source = (
        "import anthropic\n"
        "client = anthropic.Anthropic()\n"
        "def main():\n"
        f"    return client.messages.create(model={model!r}, max_tokens={max_tokens}, messages=[]{extra})\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    result = analyze_source("job.py", source.encode(), CATALOG, ScanConfig())
    return any(f.rule == "LLM001" and f.severity == "error" for f in result.findings)


def test_the_threshold_is_the_sdk_s_own():
    # 3600 s x max_tokens / 128,000 > 600 s  <=>  max_tokens > 21,333
    assert REFUSAL["maximum_seconds"] * 21_333 / REFUSAL["per_tokens"] <= REFUSAL["default_seconds"]
    assert REFUSAL["maximum_seconds"] * 21_334 / REFUSAL["per_tokens"] > REFUSAL["default_seconds"]
    assert (sdk_refuses(21_333), sdk_refuses(21_334)) == (False, True)
    assert REFUSAL["model_limits"] == _constants.MODEL_NONSTREAMING_TOKENS


@pytest.mark.parametrize(("max_tokens", "model"), [
    (21_333, "claude-sonnet-4-5"), (21_334, "claude-sonnet-4-5"), (64_000, "claude-sonnet-4-5"),
    (8_192, "claude-opus-4-0"), (8_193, "claude-opus-4-0"),
])
def test_a_script_is_told_exactly_when_the_sdk_would_refuse(max_tokens, model):
    # in run-once code, where a non-streaming call is otherwise fine, the refusal is still an error
    assert reported_as_refused(max_tokens, model) == sdk_refuses(max_tokens, model)


def test_a_per_call_timeout_skips_the_sdk_s_check():
    import inspect

    from anthropic.resources.messages import messages

    create = inspect.getsource(messages.Messages.create)
    assert "not is_given(timeout)" in create and "_calculate_nonstreaming_timeout" in create
    assert not reported_as_refused(64_000, extra=", timeout=900")
