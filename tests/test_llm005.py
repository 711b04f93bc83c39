"""LLM005 unsampled logging of prompts and completions (llmdoctor/scan/rules/llm005.py, payload.py).

Each case is a small module; the lines that must be reported carry `# hit`. The realistic fixtures
(fixtures/python/sdk/*.py) are compared by tests/test_scan_fixtures.py.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from llmdoctor.errors import UserError
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.rules.payload import build_logging_knowledge, printf_excerpts
from llmdoctor.scan.settings import ScanConfig

ROOT = Path(__file__).resolve().parents[1]
CATALOG = load_catalog()

HEAD = """\
import logging
from openai import OpenAI
logger = logging.getLogger(__name__)
client = OpenAI()
"""


def findings(source: str):
    """LLM005 in every execution context: what the rule decides about a log call (contexts are
    tests/test_project_model.py's)."""
    config = ScanConfig(select=("LLM005",), every_context=True)
    result = analyze_source("t.py", textwrap.dedent(source).encode(), CATALOG, config)
    assert result.errors == []
    return [f for f in result.findings if f.rule == "LLM005"]


def check(source: str) -> None:
    """The reported lines are exactly the lines marked `# hit`."""
    source = textwrap.dedent(source)
    marked = [n for n, line in enumerate(source.splitlines(), 1) if line.rstrip().endswith("# hit")]
    assert [f.line for f in findings(source)] == marked


# ------------------------------------------------------------------ what is payload

def test_generation_result_and_what_is_reached_from_it():
    check(HEAD + """
def answer(messages):
    resp = client.chat.completions.create(model="m", messages=messages, stream=False)
    text = resp.choices[0].message.content
    logger.info("reply: %s", resp.choices[0].message.content)  # hit
    logger.info("reply: %s", text)  # hit
    logger.warning(resp)  # hit
    logger.info("id=%s model=%s usage=%s", resp.id, resp.model, resp.usage)
    logger.info("finish=%s", resp.choices[0].finish_reason)
    logger.info("tokens=%d", resp.usage.prompt_tokens)
    logger.info("length=%d", len(text))
    logger.info("headers=%s", resp.headers)
    return text
""")


@pytest.mark.parametrize("line", [
    'logger.info(f"reply: {text}")',
    'logger.info("reply: %s" % text)',
    'logger.info("reply: {}".format(text))',
    'logger.info("reply: " + str(text))',
    'logger.info(json.dumps({"answer": text}))',
    'logger.info("reply: %s", text.strip()[:200])',
    'logger.info("reply: %s", repr(resp.model_dump()))',
])
def test_formatting_keeps_a_payload_a_payload(line):
    check(HEAD + f"""
import json
def answer(messages):
    resp = client.chat.completions.create(model="m", messages=messages, stream=False)
    text = resp.choices[0].message.content
    {line}  # hit
""")


def test_sdk_response_shapes():
    check("""\
import logging
import anthropic
from google import genai
from openai import OpenAI
log = logging.getLogger(__name__)
claude = anthropic.Anthropic()
gemini = genai.Client()
oai = OpenAI()

def run(q):
    msg = claude.messages.create(model="m", max_tokens=512, messages=[{"role": "user", "content": q}])
    log.info("claude: %s", msg.content[0].text)  # hit
    log.info("claude stop=%s tokens=%s", msg.stop_reason, msg.usage.output_tokens)
    out = gemini.models.generate_content(model="m", contents=q)
    log.info("gemini: %s", out.text)  # hit
    log.info("gemini usage: %s", out.usage_metadata)
    r = oai.responses.create(model="m", input=q)
    log.info("responses: %s", r.output_text)  # hit
    log.info("responses id: %s", r.id)
""")


def test_a_stream_object_is_not_the_text_but_its_chunks_are():
    check(HEAD + """
def answer(messages):
    stream = client.chat.completions.create(model="m", messages=messages, stream=True)
    logger.info("stream: %s", stream)
    partial = ""
    for chunk in stream:
        logger.info("finish %s", chunk.choices[0].finish_reason)
        partial += chunk.choices[0].delta.content or ""
    logger.info("streamed: %s", partial)  # hit
    text = "".join(c.choices[0].delta.content or "" for c in stream)
    logger.info("joined: %s", text)  # hit
""")


def test_a_local_or_parameter_hides_a_module_level_payload():
    check(HEAD + """
import requests
response = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
logger.info("startup check: %s", response)  # hit
def fetch(url):
    response = requests.get(url)
    logger.info("fetched: %s", response)
def handle(response):
    logger.info("handled: %s", response)
""")


def test_values_passed_as_the_prompt_are_payload_even_before_the_call():
    check(HEAD + """
def answer(question, history, role):
    msgs = history + [{"role": role, "content": question}]
    logger.info("sending %s", msgs)  # hit
    logger.info("question: %s", question)  # hit
    logger.info("role: %s, history size %d", role, len(history))
    return client.chat.completions.create(model="m", messages=msgs, stream=True)
""")


def test_payload_names_only_in_a_module_that_uses_an_llm_sdk():
    with_sdk = HEAD + """
def render(template, values):
    prompt = template.format(**values)
    logger.info("rendered prompt: %s", prompt)  # hit
    logger.info("chat_history=%s", chat_history)  # hit
"""
    check(with_sdk)
    without_sdk = with_sdk.replace("from openai import OpenAI\n", "").replace("client = OpenAI()\n", "")
    without_sdk = without_sdk.replace("  # hit", "")
    check(without_sdk)


@pytest.mark.parametrize("framework", ["from langchain_core.prompts import PromptTemplate",
                                       "from transformers import AutoModelForCausalLM"])
def test_a_module_running_a_model_through_a_framework_is_an_llm_module(framework):
    """memoryos's HF backend: `from transformers import ...`, then `logger.info(f"HFLLM prompt: {prompt}")` per
    generation."""
    check(f"""
import logging
{framework}
logger = logging.getLogger(__name__)

def generate(prompt):
    logger.info(f"HFLLM prompt: {{prompt}}")  # hit
""")


def test_metadata_and_lookalikes_a_maintainer_would_reject():
    check(HEAD + """
SYSTEM_PROMPT = "You are a helpful assistant."
def run(prompt_name: str, completion: float, messages):
    logger.info("using prompt template %s", prompt_name)
    logger.info("job completion: %.0f%%", completion * 100)
    logger.info("prompt_tokens=%d completion_tokens=%d", usage.prompt_tokens, usage.completion_tokens)
    logger.info("sending %d messages", len(messages))
    logger.info("roles: %s", [m["role"] for m in messages])
    try:
        pass
    except Exception as exc:
        logger.exception("generation failed: %s", exc)
    prompt = "Summarize the following text."
    logger.info("static prompt: %s", prompt)
    logger.info("running %d prompts, max_completion=%s", num_prompts, max_completion)
    logger.info("template: %s", system_prompt_path)

def read_input(prompt: str) -> str:
    logger.info("waiting for input at %s", prompt)
    return input(prompt)
""")


def test_real_code_near_misses():
    """From khoj (processor/conversation/*/utils.py): an error text unpacked into a payload-like name, and a
    message logged only when its content is empty, are not the user's text; a WARNING or ERROR in a branch
    or an except handler reports what went wrong (the last message before a retry), not every call."""
    check(HEAD + """
def generate(messages, handle_error, is_none_or_empty):
    try:
        response_text = client.chat.completions.create(model="m", messages=messages).choices[0].message.content
    except Exception as e:
        response_text, _ = handle_error(e.args)
        logger.warning("prevented: %s", response_text)
        logger.warning("last message: %s", messages[-1].content)
    if not response_text:
        logger.warning("no response; last message: %s", messages[-1].content)
        raise ValueError("empty response: retry")
    for message in messages:
        if is_none_or_empty(message.content):
            logger.error("dropping message with empty content: %s", message)
        if not message.content:
            logger.error("dropping message with empty content: %s", message)
        else:
            logger.info("keeping message: %s", message)  # hit
    logger.warning("messages: %s", messages)  # hit
""")


def test_an_error_logged_after_a_retry_loop_runs_once_every_attempt_failed():
    """From memoryos (enhancement_pipeline.py): a loop whose `try` returns the answer and whose handler retries
    ends only when every attempt failed, so an ERROR after it is an error report; an INFO there is still every
    failed call's, and a loop that can also end by `break`, by its `else:` or without a `try` is no retry loop."""
    check(HEAD + """
import time

def enhance(prompt, retries=3):
    for attempt in range(retries):
        try:
            answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
            return answer.choices[0].message.content
        except Exception as e:
            time.sleep(1)
    logger.error("enhancement failed; prompt: %s", prompt)
    logger.info("enhancement failed; prompt: %s", prompt)  # hit

def enhance_until(prompt):
    while True:
        try: return client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
        except TimeoutError: continue
    logger.error("unreachable: %s", prompt)

def enhance_or_stop(prompt, stop):
    for attempt in range(3):
        try:
            if stop():
                break
            return client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
        except Exception:
            time.sleep(1)
    logger.error("stopped; prompt: %s", prompt)  # hit

def first_short(prompts):
    for prompt in prompts:
        if len(prompt) < 10:
            return prompt
    logger.error("no short prompt among %s", prompts)  # hit
""")


# ------------------------------------------------------------------ sinks

def test_sinks_and_levels():
    check("""\
import logging
import structlog
from loguru import logger as loguru_logger
from openai import OpenAI
from myapp.log import logger as app_logger, audit_logger
client = OpenAI()
slog = structlog.get_logger()

class Bot:
    def __init__(self):
        self.logger = logging.getLogger("bot")
    def reply(self, prompt, level):
        logging.info("p=%s", prompt)  # hit
        self.logger.error("p=%s", prompt)  # hit
        slog.info("asked", prompt=prompt)  # hit
        loguru_logger.success("p={}", prompt)  # hit
        app_logger.warning("p=%s", prompt)  # hit
        audit_logger.info("p=%s", prompt)  # hit
        logging.log(logging.WARNING, "p=%s", prompt)  # hit
        self.logger.log(20, "p=%s", prompt)  # hit
        self.logger.log(logging.DEBUG, "p=%s", prompt)
        self.logger.log(level, "p=%s", prompt)
        self.logger.debug("p=%s", prompt)
        logging.debug("p=%s", prompt)
        self.logger.info("failed", exc_info=prompt)
        history.append(prompt)
""")


def test_print_is_a_log_only_in_a_server_or_app_module():
    server = """\
from fastapi import FastAPI
from openai import OpenAI
client = OpenAI()
app = FastAPI()

@app.post("/chat")
def chat(prompt: str):
    print("prompt:", prompt)  # hit
"""
    check(server)
    cli = server.replace("from fastapi import FastAPI", "import typing").replace("app = FastAPI()", "app = None")
    check(cli.replace("  # hit", ""))
    type_only = server.replace("from fastapi import FastAPI",
                               "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fastapi import FastAPI")
    check(type_only.replace("  # hit", ""))


# ------------------------------------------------------------------ sampling guards

def test_sampling_guards():
    check(HEAD + """
import itertools, random
SAMPLE_RATE = 0.01
calls = itertools.count()

def answer(prompt, should_sample):
    if random.random() < 0.001:
        logger.info("sampled: %s", prompt)
    else:
        logger.info("not sampled: %s", prompt)  # hit
    if next(calls) % 1000 == 0:
        logger.info("every 1000th: %s", prompt)
    if should_sample: logger.info("one-line guard: %s", prompt)
    if logger.isEnabledFor(logging.DEBUG):
        logger.info("debug only: %s", prompt)
    if settings.verbose or DEBUG:
        logger.info("opt-in diagnostics: %s", prompt)
    if "%s" % prompt:
        logger.info("string formatting is no guard: %s", prompt)  # hit

def early_exit(prompt):
    if random.random() > SAMPLE_RATE:
        return
    logger.info("sampled: %s", prompt)

def log_sampled_prompt(prompt):
    logger.info("sampled by the caller: %s", prompt)
""")


def test_a_function_that_calls_the_model_is_no_sampling_helper():
    """`sampling_loop` (open-interpreter computer_use/loop.py) samples tokens from the model: its name is no
    sampling guard for the lines it logs; a `*sampl*` function that only logs still is."""
    check(HEAD + """
def sampling_loop(messages):
    reply = client.chat.completions.create(model="m", messages=messages)
    logger.info("reply: %s", reply.choices[0].message.content)  # hit

def log_sample(messages):
    logger.info("sampled by the caller: %s", messages)
""")


# ------------------------------------------------------------------ round 8: requests, streams, names

def test_a_request_dict_passed_as_double_star_holds_the_prompt():
    check(HEAD + """
def by_dict(request):
    payload = build_payload(request)
    logger.info("request: %s", payload)  # hit
    return client.chat.completions.create(**payload)

def beside_a_prompt(messages, **options):
    logger.info("options: %s", options)
    return client.chat.completions.create(model="m", messages=messages, **options)
""")


@pytest.mark.parametrize(("read", "reported"), [
    ("return resp.choices[0].message.content", True),
    ('return getattr(resp, "usage", None)', True),
    ("return resp", False),  # a caller may iterate it: a stream object
    ("for chunk in resp:\n        yield chunk", False),
    ("return resp.response.headers", False),  # a stream object has `.response` too
])
def test_a_result_that_may_stream_is_a_message_when_read_as_one(read, reported):
    mark = "  # hit" if reported else ""
    check(HEAD + f"""
def send(payload):
    resp = client.chat.completions.create(**payload)
    logger.info("response: %s", resp){mark}
    {read}
""")


def test_the_final_message_of_a_stream_is_the_completion():
    check(HEAD + """
def stream_reply(messages):
    with client.chat.completions.stream(model="m", messages=messages) as stream:
        for event in stream:
            pass
        logger.info("stream: %s", stream)
        final = stream.get_final_completion()
        logger.info("final: %s", final)  # hit
        logger.info("text: %s", final.choices[0].message.content)  # hit
""")


@pytest.mark.parametrize(("expr", "reported"), [
    ("question[:50]", False),
    ("question[:64]", False),
    ("question[-40:]", False),
    ("question[:65]", True),
    ("question[:200]", True),
    ("question[50:]", True),  # everything after the first 50 characters
    ("question[-100:]", True),
    ("question[:limit]", True),  # a length we cannot read
])
def test_a_short_excerpt_is_a_label_not_the_text(expr, reported):
    mark = "  # hit" if reported else ""
    check(HEAD + f"""
def ask(question, limit):
    logger.info("question: %s", {expr}){mark}
""")



@pytest.mark.parametrize(("call", "reported"), [
    ('logger.info("question: %.50s", question)', False),
    ('logger.info("job %s question=%.64r", job_id, question)', False),
    ('logger.info("question: %.65s", question)', True),
    ('logger.info("question (first 200): %.200r", question)', True),
    ('logger.info("%.50s then %s", job_id, question)', True),  # the cut is the first argument's
    ('logger.info("question: %*.*s", 5, 30, question)', True),  # a precision given as an argument
    ('logger.info("question: %(q).30s", {"q": question})', True),  # by key: not read
    ('logger.info("question: %.40s (job %s)" % (question, job_id))', False),
    ('logger.info("question: %.400s (job %s)" % (question, job_id))', True),
    ('logger.info(f"question: {question:.40}")', False),
    ('logger.info(f"question: {question!r:>10.60s}")', False),
    ('logger.info(f"question: {question:.200}")', True),
    ('logger.info(f"question: {question:>100}")', True),  # a width pads, it does not cut
    ('print("question: %.20s", question)', True),  # print does not format its arguments
])
def test_a_conversion_precision_is_an_excerpt_too(call, reported):
    mark = "  # hit" if reported else ""
    check("from fastapi import FastAPI\n" + HEAD + f"""
def ask(question, job_id):
    {call}{mark}
""")


@pytest.mark.parametrize(("template", "cut"), [
    ("%s %.50s %%  %.10r", {1, 2}),
    ("%d %*s %.3s", {3}),  # `*` takes an argument of its own
    ("%.*s %.5a", {2}),
    ("%.s", {0}),  # precision 0: nothing of it
    ("%.65s", set()),
    ("%(name).5s", None),
])
def test_printf_excerpts_reads_each_conversion(template, cut):
    assert printf_excerpts(template, 64) == cut

@pytest.mark.parametrize(("test", "labelled"), [
    ('"yes" in answer', True),
    ('answer.strip().lower() == "relevant"', True),
    ('"no" != answer', True),
    ('answer in ("yes", "no")', True),
    ('answer.lower().startswith("yes")', True),
    ('"{context}" in answer', False),  # a template placeholder, not a one-word label
    ('answer == "I cannot answer that question."', False),  # a sentence
    ('"yes" in other', False),
])
def test_a_name_tested_against_one_word_is_a_classification(test, labelled):
    mark = "" if labelled else "  # hit"
    check(HEAD + f"""
def classify(other):
    answer = ask_model("Answer ONLY yes or no.")
    logger.info("answer: %s", answer){mark}
    return {test}
""")


def test_a_classification_does_not_hide_a_generation_result():
    check(HEAD + """
def classify(messages):
    answer = client.chat.completions.create(model="m", messages=messages).choices[0].message.content
    logger.info("answer: %s", answer)  # hit
    return answer == "yes"
""")


def test_a_field_named_like_a_payload_counts_whatever_the_record():
    """`req.question` of a request model and `result["answer"]` of a RAG chain are payload; a parsed candidate
    record's `best["answer"]` (local-deep-research, judged false) looks the same and stays a known false class:
    dropping field evidence for generic words would silence it, and with it these shapes, common in request
    handlers (round 8: tried, not kept)."""
    check(HEAD + """
def ask(req, chain):
    logger.info("question: %s", req.question)  # hit
    result = chain.invoke({"input": req.question})
    logger.info("answer: %s", result["answer"])  # hit
""")


def test_names_unpacked_from_a_call_handed_the_prompt():
    check(HEAD + """
def ask(prompt, handle_error, e):
    answer, token_info = get_answer_from_llm(prompt)
    logger.info("answer: %s", answer)  # hit
    logger.info("tokens: %s", token_info)
    response_text, _ = handle_error(e)
    logger.info("error: %s", response_text)
""")


def test_a_print_announcing_an_error_sets_the_level_of_its_block():
    check("""\
from fastapi import FastAPI
from openai import OpenAI
app = FastAPI()

def respond(messages, chunks):
    if not chunks:
        print("ERROR. No chunks sent. Trying again.")
        print("Messages:", messages)
    else:
        print("Messages:", messages)  # hit
    print(f"Warning: slow model for {messages}")  # hit
    try:
        pass
    except Exception:
        print("Failed to answer:", messages)
        print("Messages:", messages)
""")


def test_a_route_of_an_openai_compatible_api_makes_an_llm_module():
    source = '''\
import logging
from fastapi import FastAPI
logger = logging.getLogger(__name__)
app = FastAPI()

@app.post("/openai/chat/completions")
async def chat_completion(request):
    last_message = request.messages[-1]
    logger.info("user: %s", last_message.content)  # hit
'''
    check(source)
    check(source.replace("/openai/chat/completions", "/status").replace("  # hit", ""))


# ------------------------------------------------------------------ message, prefilter, knowledge

def test_message_names_the_sink_the_level_and_the_payload():
    found = findings(HEAD + """
def answer(messages):
    reply = client.chat.completions.create(model="m", messages=messages, stream=False)
    logger.warning("reply: %s", reply.choices[0].message.content)
""")
    assert len(found) == 1
    finding = found[0]
    assert finding.message.startswith("`logger.warning()` logs `reply.choices[0].message.content` at WARNING, "
                                      "unsampled: it carries the result of `client.chat.completions.create()`.")
    assert "random.random() < SAMPLE_RATE" in finding.fix
    assert finding.extra["sink"] == "logger.warning" and finding.extra["level"] == "WARNING"
    inner = findings(HEAD + """
def answer(messages):
    logger.warning(f"empty answer from {MODEL}; last message by {messages[-1].role}: {messages[-1].content}")
""")
    assert inner[0].extra["payload"] == "messages[-1].content"  # the part that carries it, not the whole f-string


def test_a_payload_like_name_in_a_program_that_calls_no_model_is_not_a_finding():
    result = analyze_source("t.py", b"import logging\nlogging.info('%s', prompt)\n", CATALOG,
                            ScanConfig(select=("LLM005",)))
    assert result.findings == []
    no_logging = analyze_source("t.py", b"prompt = 'x'\nprint(prompt)\n", CATALOG, ScanConfig(select=("LLM005",)))
    assert no_logging.prefiltered  # no sink at a reported level: never parsed for this rule


BOT = """\
import logging
from app.llm import ask

logger = logging.getLogger(__name__)


def on_message(update):
    question = update.text
    logger.info(f"question: {question}")  # the user's prompt, handed to the project's model helper
    answer = ask(question)
    logger.info(f"answer: {answer}")  # outside the module that calls the model: often an extracted value
    return answer
"""


def test_payload_like_names_count_in_every_module_of_a_program_that_calls_a_model(cli, tmp_path):
    """The bot module imports no SDK; the program does (app/llm.py), so its `question` is a prompt: reported
    (also when pre-commit passes only the bot module), with the reason in the message; its `answer` counts only
    in the module that calls the model (`names_beside_model`). The same module in a program that calls no model
    reports nothing."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'bot'\n")
    app = tmp_path / "app"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "bot.py").write_text(BOT)
    (app / "llm.py").write_text("def ask(text):\n    return text.upper()\n")
    quiet = cli("scan", "--select", "LLM005", "--format", "json", "--no-cache", ".", cwd=tmp_path)
    assert quiet.returncode == 0 and json.loads(quiet.stdout)["findings"] == []
    (app / "llm.py").write_text("from openai import OpenAI\nclient = OpenAI()\n\n\ndef ask(text):\n"
                                "    return client.responses.create(model='m', input=text).output_text\n")
    for paths in (["."], ["app/bot.py"]):
        result = cli("scan", "--select", "LLM005", "--format", "json", "--no-cache", *paths, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        [finding] = json.loads(result.stdout)["findings"]
        assert finding["path"].endswith("bot.py") and finding["line"] == 9
        assert "by its name (`question`, in a program that calls a model)" in finding["message"]


def test_a_bad_level_in_the_knowledge_names_the_key():
    with pytest.raises(UserError, match=r"sdk-logging.yaml: key 'log_sinks.logger_methods.info'"):
        build_logging_knowledge({"log_sinks": {"logger_methods": {"info": "LOUD"}}})
    with pytest.raises(UserError, match=r"sdk-logging.yaml: key 'payload.excerpt_max_chars'"):
        build_logging_knowledge({"payload": {"excerpt_max_chars": "short"}})
    with pytest.raises(UserError, match=r"sdk-logging.yaml: key 'log_sinks.print_levels.oops'"):
        build_logging_knowledge({"log_sinks": {"print_levels": {"oops": "LOUD"}}})


def test_cli_reports_the_fixture_with_json_fields(cli):
    path = ROOT / "fixtures" / "python" / "sdk" / "logging_payloads.py"
    result = cli("scan", "--select", "LLM005", "--format", "json", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    assert [f["line"] for f in data["findings"]] == [22, 25, 26, 45, 46, 53]
    assert {f["level"] for f in data["findings"]} == {"INFO", "WARNING", "ERROR"}


def test_a_class_body_has_its_own_names():
    """Class-level names live in the class namespace: they do not rebind a module-level name, and methods
    do not see them (Python's scoping)."""
    check(HEAD + """
text = client.chat.completions.create(model="m", messages=[], stream=False).choices[0].message.content

class Formatter:
    text = "a constant"
    logger.info(text)

    def show(self):
        logger.info(text)  # hit

def show():
    logger.info(text)  # hit
""")


def test_a_conditional_expression_under_an_opt_in_or_sampling_test_keeps_its_payload_out():
    check(HEAD + """
import random
def image(prompt, settings):
    logger.info(f"image requested{': ' + prompt if settings.log_prompt_data else ''}")
    logger.info(f"image requested{': ' + prompt if random.random() < 0.01 else ''}")
    logger.info(f"image requested{': ' + prompt if prompt else ''}")  # hit
    logger.info(f"image requested{'' if settings.debug else prompt}")  # hit
""")


def test_an_answer_is_payload_by_its_name_only_beside_the_model_call():
    """In a module that calls the model, `answer` is the completion; elsewhere (a program-wide payload name)
    only the names that are not `names_beside_model` count."""
    check(HEAD + """
def reply(answer, final_answer, question):
    logger.info(f"answer: {answer}")  # hit
    logger.info(f"final: {final_answer}")  # hit
""")
    plain = analyze_source("t.py", b"import logging\ndef reply(answer, question):\n    logging.info(answer)\n"
                           b"    logging.info(question)\n", CATALOG, ScanConfig(select=("LLM005",), every_context=True))
    assert plain.findings == []  # a single file calling no model: the program calls none


def test_the_text_of_a_chat_platforms_message_is_the_users_prompt():
    """From gabay (telegram_bot.py:66), telegram-rag-bot (handlers.py:508) and llm-chatbot-kit (discord_bot.py:139):
    the text a bot's handler reads off the platform's own message object (sdk-logging.yaml `chat_message_text`)
    is what the user typed, whatever the local name; its length, or an untyped parameter's `.text`, is not."""
    check("""
        import logging
        import discord
        from openai import AsyncOpenAI
        from telegram import Update
        from telegram.ext import ContextTypes
        logger = logging.getLogger(__name__)

        async def handle_message(update: Update, context: ContextTypes.DEFAULT_TYPE, overridden_text: str = None):
            text = overridden_text or (update.effective_message.text if update.effective_message else None)
            logger.info(f"Received message: {text} from {update.effective_user.id}")  # hit
            logger.info("RAG INPUT | Query: %s", update.message.text[:100])  # hit
            logger.info("chars: %d, chat: %s", len(update.message.text), update.effective_chat.id)
            logger.info("preview: %s", text[:40])

        async def on_message(message: discord.Message):
            content = (message.content or "").strip()
            logger.info("on_message: author=%s content=%r", message.author, content[:120])  # hit

        async def on_untyped(message):
            logger.info("text: %s", message.text)
        """)
    check("""
        import logging
        import chainlit as cl
        from openai import AsyncOpenAI
        from streamlit_chat_prompt import prompt
        logger = logging.getLogger(__name__)

        @cl.on_message
        async def main(message: cl.Message):
            logger.info("user said %s", message.content)  # hit

        def render():
            chat_prompt_return = prompt(name="chat_input", key="main_prompt")
            if chat_prompt_return:
                logger.info(f"Received user text input: {chat_prompt_return.text}")  # hit
                logger.info("images: %d", len(chat_prompt_return.images))
        """)


def test_chat_message_paths_in_the_knowledge_are_checked():
    with pytest.raises(UserError, match=r"sdk-logging.yaml: key 'payload.chat_message_text'.telegram.Update"):
        build_logging_knowledge({"payload": {"chat_message_text": {"telegram.Update": ["message..text"]}}})
