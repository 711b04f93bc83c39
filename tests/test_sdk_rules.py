"""SDK knowledge tables (rules/sdk-*.yaml), their fixtures, and rule LLM001.

The fixture files themselves are compared with the scan by tests/test_scan_fixtures.py (`# hit:` markers);
here: the tables are well-formed and resolve the calls people write,
the fixtures cover every SDK and rule, LLM001's exemptions, and a user's in-house table.
"""

from __future__ import annotations

import copy
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from llmdoctor.errors import UserError
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge, validate
from llmdoctor.scan.settings import ScanConfig

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "rules"
SDK_FIXTURES = ROOT / "fixtures" / "python" / "sdk"
MARK = re.compile(r"#\s*hit(?:-with-rules-dir)?:\s*([A-Z0-9, ]+)")
CATALOG = load_catalog()
KNOWLEDGE = sdk_knowledge(CATALOG)


def scan(source: str, catalog=CATALOG) -> list[tuple[int, str]]:
    """Findings in every execution context: these tests check what the rules decide about a call itself
    (where each is reported is tests/test_project_model.py's)."""
    result = analyze_source("t.py", textwrap.dedent(source).encode(), catalog, ScanConfig(every_context=True))
    assert result.errors == []
    return sorted((f.line, f.rule) for f in result.findings)


def llm001_lines(source: str, catalog=CATALOG) -> list[int]:
    return [line for line, rule in scan(source, catalog) if rule == "LLM001"]


# ---------------------------------------------------------------- the tables


def test_every_sdk_file_is_a_valid_knowledge_table():
    files = sorted(RULES.glob("sdk-*.yaml"))
    assert len(files) >= 13
    names = set()
    for path in files:
        doc = yaml.safe_load(path.read_text())
        assert doc["kind"] == "tables" and "id" not in doc, path
        assert doc["name"] not in names
        names.add(doc["name"])
        assert doc["verified"].strip(), f"{path.name}: say where the names were verified"
        validate(path.stem, doc)


@pytest.mark.parametrize("qualified, path, sdk", [
    ("openai.OpenAI.chat.completions.create", "chat.completions.create", "sdk-openai"),
    ("openai.Client.responses.create", "responses.create", "sdk-openai"),
    ("openai.AzureOpenAI.chat.completions.create", "chat.completions.create", "sdk-openai"),
    ("openai.chat.completions.create", "chat.completions.create", "sdk-openai"),
    ("openai.ChatCompletion.create", "ChatCompletion.create", "sdk-openai"),
    ("openai.OpenAI.with_options.chat.completions.create", "chat.completions.create", "sdk-openai"),
    ("openai.OpenAI.chat.completions.with_raw_response.create", "chat.completions.create", "sdk-openai"),
    ("anthropic.AnthropicBedrock.messages.create", "messages.create", "sdk-anthropic"),
    ("anthropic.AsyncAnthropicVertex.messages.create", "messages.create", "sdk-anthropic"),
    ("litellm.completion", "completion", "sdk-litellm"),
    ("litellm.Router.acompletion", "acompletion", "sdk-litellm"),
    ("google.genai.Client.models.generate_content", "models.generate_content", "sdk-google-genai"),
    ("google.genai.Client.chats.create.send_message", "send_message", "sdk-google-genai"),
    ("mistralai.client.Mistral.chat.complete", "chat.complete", "sdk-mistralai"),
    ("cohere.ClientV2.chat", "chat", "sdk-cohere"),
    ("ollama.chat", "chat", "sdk-ollama"),
    ("groq.Groq.chat.completions.create", "chat.completions.create", "sdk-groq"),
    ("together.Together.completions.create", "completions.create", "sdk-together"),
    ("huggingface_hub.InferenceClient.text_generation", "text_generation", "sdk-huggingface"),
])
def test_generation_calls_resolve(qualified, path, sdk):
    method = KNOWLEDGE.lookup(qualified)
    assert method is not None and method.kind == "generation"
    assert method.path == path and method.receiver.table == sdk


@pytest.mark.parametrize("qualified, kind", [
    ("openai.OpenAI.chat.completions.stream", "streaming"),
    ("openai.OpenAI.chat.completions.parse", "structured"),
    ("openai.OpenAI.embeddings.create", "not_generation"),
    ("openai.OpenAI.beta.threads.messages.create", "not_generation"),
    ("anthropic.Anthropic.messages.count_tokens", "not_generation"),
    ("anthropic.Anthropic.messages.batches.create", "not_generation"),
    ("google.genai.Client.models.generate_content_stream", "streaming"),
    ("cohere.Client.chat_stream", "streaming"),
    ("ollama.pull", "not_generation"),
    ("litellm.embedding", "not_generation"),
])
def test_non_reportable_methods_are_classified(qualified, kind):
    assert KNOWLEDGE.lookup(qualified).kind == kind


def test_async_flags_follow_the_method_not_only_the_client():
    assert KNOWLEDGE.lookup("litellm.acompletion").is_async
    assert not KNOWLEDGE.lookup("litellm.completion").is_async
    assert KNOWLEDGE.lookup("google.genai.Client.aio.models.generate_content").is_async
    assert KNOWLEDGE.lookup("google.genai.Client.aio.models.generate_content_stream").is_async
    assert KNOWLEDGE.lookup("mistralai.client.Mistral.chat.complete_async").is_async
    assert not KNOWLEDGE.lookup("mistralai.client.Mistral.chat.complete").is_async


def test_unknown_receivers_match_only_specific_chains():
    assert KNOWLEDGE.lookup_unknown("self.llm.chat.completions.create") is not None
    assert KNOWLEDGE.lookup_unknown("client.models.generate_content") is not None
    for generic in ("repo.messages.create", "agent.create", "chain.invoke", "x.complete", "model.generate"):
        assert KNOWLEDGE.lookup_unknown(generic) is None


@pytest.mark.parametrize("mutation, key", [
    (lambda d: d["clients"][0].pop("async"), "clients[0].async"),
    (lambda d: d["clients"][0].update(methods=["nope"]), "clients[0].methods"),
    (lambda d: d["clients"][0].update(colour="red"), "clients[0].colour"),
    (lambda d: d["clients"].insert(0, "openai.OpenAI"), "clients[0]"),
    (lambda d: d["method_sets"]["openai"].update(shape="x"), "method_sets.openai.shape"),
    (lambda d: d["method_sets"].update(extra=["chat.create"]), "method_sets.extra"),
    (lambda d: d["method_sets"]["openai"]["generation"]["chat.completions.create"].update(strem_twin="x"),
     "method_sets.openai.generation.chat.completions.create.strem_twin"),
])
def test_malformed_table_names_file_and_key(mutation, key):
    doc = yaml.safe_load((RULES / "sdk-openai.yaml").read_text())
    mutation(doc)
    with pytest.raises(UserError) as error:
        validate("sdk-openai", doc)
    assert "sdk-openai.yaml" in str(error.value) and f"'{key}'" in str(error.value)


# ---------------------------------------------------------------- fixtures


SDK_FILES = {
    "openai": ["openai_fastapi_service.py", "openai_module_and_legacy.py"],
    "anthropic": ["anthropic_support_bot.py"],
    "litellm": ["litellm_gateway.py"],
    "google-genai": ["genai_streamlit_app.py", "genai_async_worker.py", "genai_fastapi_service.py"],
    "mistralai": ["mistral_cli.py", "mistral_review_service.py"],
    "cohere": ["cohere_rag_service.py"],
    "ollama": ["ollama_gradio_app.py"],
    "groq": ["groq_discord_bot.py"],
    "together": ["together_batch_script.py", "together_chat_api.py"],
    "huggingface_hub": ["hf_inference_api.py"],
}
# LLM006 cannot fire where `timeout=None` means the library default (litellm, cohere, google-genai)
NO_LLM006_HIT = {"litellm", "cohere", "google-genai"}


def _marked(path: Path) -> set[str]:
    rules: set[str] = set()
    for line in path.read_text().splitlines():
        match = MARK.search(line)
        if match:
            rules |= {code.strip() for code in match.group(1).split(",")}
    return rules


@pytest.mark.parametrize("sdk", sorted(SDK_FILES))
def test_every_sdk_has_hits_for_each_applicable_rule(sdk):
    marked = set().union(*(_marked(SDK_FIXTURES / name) for name in SDK_FILES[sdk]))
    expected = {"LLM001", "LLM003", "LLM004", "LLM005", "LLM006"} - ({"LLM006"} if sdk in NO_LLM006_HIT else set())
    assert expected <= marked


def test_exemption_fixtures_exist():
    names = {p.name for p in SDK_FIXTURES.rglob("*.py")}
    assert {"exempt_client_lifetimes.py", "exempt_generation_calls.py", "logging_payloads.py",
            "logging_no_sdk_module.py", "http_clients.py", "app.py"} <= names
    assert _marked(SDK_FIXTURES / "logging_no_sdk_module.py") == set()


# ---------------------------------------------------------------- LLM001


def test_llm001_resolves_aliases_self_attributes_and_class_attributes():
    source = """
        import openai as oa
        from anthropic import Anthropic as Claude

        class Bot:
            shared = oa.OpenAI()

            def __init__(self):
                self.claude = Claude()

            def one(self, q):
                return self.claude.messages.create(model="m", max_tokens=1024, messages=[])

            def two(self, q):
                return self.shared.chat.completions.create(model="m", messages=[])

        def three(q):
            return oa.chat.completions.create(model="m", messages=[])
        """
    assert llm001_lines(source) == [12, 15, 18]


def test_llm001_literal_stream_false_or_none_is_still_a_finding():
    source = """
        from openai import OpenAI
        client = OpenAI()
        a = client.chat.completions.create(model="m", messages=[], stream=False)
        b = client.chat.completions.create(model="m", messages=[], stream=None)
        c = client.chat.completions.create(model="m", messages=[], stream=True)
        """
    assert llm001_lines(source) == [4, 5]


def test_llm001_structured_output_configs():
    source = """
        from google import genai
        from google.genai import types
        client = genai.Client()
        def f(q, cfg):
            a = client.models.generate_content(model="m", contents=q, config=types.GenerateContentConfig(top_k=2))
            b = client.models.generate_content(model="m", contents=q,
                                               config=types.GenerateContentConfig(response_schema=dict))
            c = client.models.generate_content(model="m", contents=q, config={"response_mime_type": "text/x.enum"})
            d = client.models.generate_content(model="m", contents=q, config=cfg)
        """
    assert llm001_lines(source) == [6]


def test_llm001_generic_method_names_on_unknown_receivers_are_not_guessed():
    source = """
        def f(llm, chain, q):
            a = llm.messages.create(model="m", messages=[])
            b = llm.generate(q)
            c = chain.invoke(q)
            d = llm.chat(q)
            e = llm.chat.completions.create(model="m", messages=[])
        """
    assert llm001_lines(source) == [7]


def test_llm001_module_import_styles():
    source = """
        from litellm import completion as complete
        import ollama
        from ollama import chat
        a = complete("gpt-4o-mini", [])
        b = ollama.chat("llama3.2", [])
        c = chat("llama3.2", [], stream=True)
        d = ollama.generate(model="llama3.2", prompt="hi", format="json")
        """
    assert llm001_lines(source) == [5, 6]


def test_llm001_skips_probes_whose_output_nobody_reads():
    source = """
        import litellm
        from openai import OpenAI
        client = OpenAI()
        async def health():
            await litellm.acompletion(model="m", messages=[], mock_response="ok")
            client.chat.completions.create(model="m", messages=[])
            _ = client.chat.completions.create(model="m", messages=[])
            tiny = client.chat.completions.create(model="m", messages=[], max_tokens=1)
            full = client.chat.completions.create(model="m", messages=[], max_tokens=17)
        """
    assert llm001_lines(source) == [10]


def test_in_house_wrapper_table_works_without_python():
    inhouse = SDK_FIXTURES / "inhouse"
    catalog = copy.deepcopy(CATALOG)
    catalog.knowledge["user:sdk-mycorp"] = yaml.safe_load((inhouse / "rules" / "sdk-mycorp.yaml").read_text())
    catalog.memo.clear()  # the pre-filter and the SDK index are memoized per catalog
    source = (inhouse / "app.py").read_text()
    expected = sorted((n, "LLM001") for n, line in enumerate(source.splitlines(), 1)
                      if "LLM001" in (MARK.search(line).group(1) if MARK.search(line) else ""))
    assert [f for f in scan(source, catalog) if f[1] == "LLM001"] == expected
    assert llm001_lines(source) == []  # without the user's table nothing is known
