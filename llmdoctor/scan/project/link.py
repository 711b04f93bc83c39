"""From per-file results to what is reported: link every module's index into the project model, then decide
each rule's candidates by the execution context of the function holding them (the rule's YAML `contexts:`),
and run the rules that ask the model directly (LLM004). A finding keeps its context, the entry point and
the chain of calls (`via`) that explain it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from llmdoctor.report.model import Finding
from llmdoctor.scan.project.knowledge import entry_knowledge
from llmdoctor.scan.project.layout import Layout
from llmdoctor.scan.project.model import CONTROL_PLANE, OFFLINE, RUN_ONCE, SCHEDULED, ProjectModel, Step
from llmdoctor.scan.rules.logging_knowledge import LEVELS, logging_knowledge

FUNCTION_KEY = "_function"
ONLY_IN = "_only_in"  # a candidate's extra: the contexts it may be reported in at all
EVERYWHERE = "everywhere"  # a candidate's extra: a bug in any context (anthropic's long non-streaming call)
FORWARDED_KEYWORD = "_forwarded_keyword"  # a candidate's extra: reported only if no caller passes this keyword
PER_CALL = "_per_call"  # a candidate's extra: a cost paid per call, so none where the call's result is memoised
# a candidate's extra: it stands only in a program that calls a model (LLM005's payload-like names in a module that
# imports no SDK itself: the program's `question` is the model's prompt)
IN_MODEL_PROGRAM = "_in_model_program"
# a candidate's extra: the argument (position or keyword) of its call that hands a function of the program a
# payload; it stands only where that function logs the parameter it lands in (LLM005's logging helpers)
LOGGED_THROUGH = "_logged_through"
ERROR_PATH = "_error_path"  # a candidate's extra: in a branch or an except handler (a log there at WARNING or above
# reports what went wrong)
LEVEL_NAMES = {number: level for level, number in LEVELS.items()}
DEFAULT_POLICY = {"serving": "report", "worker": "report", "unknown": "report", RUN_ONCE: "report",
                  OFFLINE: "off", CONTROL_PLANE: "report", SCHEDULED: "report"}


def link_results(results: list, catalog, config, root: str | None,
                 show: Callable[[str], str] | None = None, program=None) -> list:
    """The results of the checked files, their findings decided by the project model of all `results`.

    `root`: the project root (None: a program of these files alone, e.g. one file in a test); `show` turns a
    path into the one reports print (the via chain's paths); `program` (cache.ProgramCache): the links of the
    last run, replayed for the modules whose links cannot have changed (incremental.py), and stored again."""
    from llmdoctor.scan.engine import collector_paused

    with collector_paused(keep=True):  # (the model, linked once, is read until the reports are made)
        return _link_program(results, catalog, config, root, show, program)


def _link_program(results: list, catalog, config, root: str | None, show, program) -> list:
    from llmdoctor.scan.project.incremental import ReplayError, replay_for, stored_program

    replay = stored = None
    if program is not None:
        stored = program.load()
        if stored is not None:
            indexes = {os.path.abspath(r.path): r.index for r in results if r.index is not None}
            replay = replay_for(stored, indexes, program.digests)
    if replay is not None:
        try:
            out, model = _link(results, catalog, config, root, show, replay)
            if program is not None:
                model._blocking()  # every sync function's own blocking call: stored for the next run
            if model.cuts:  # a resolution met a cycle: its value may depend on the order of the whole link
                replay = None
        except ReplayError:
            replay = None
    if replay is None:
        out, model = _link(results, catalog, config, root, show, None)
        if program is not None:
            model._blocking()
    if program is not None and replay is not None:
        program.cache.stats.replayed += len(replay.products)
    if program is not None and (replay is None or len(replay.products) < len(model.by_path)):
        program.save(None if model.cuts else stored_program(model, replay, program.digests, stored))
    return out


def _link(results: list, catalog, config, root: str | None, show, replay) -> tuple[list, ProjectModel]:
    by_path = {os.path.abspath(r.path): r for r in results}
    indexes = {path: r.index for path, r in by_path.items() if r.index is not None}
    if root is None:
        folders = [os.path.dirname(path) for path in by_path] or [os.getcwd()]
        layout_root = os.path.commonpath(folders)
        scripts = False
    else:
        layout_root, scripts = os.path.abspath(root), True
    layout = Layout(layout_root, indexes, _library_roots(catalog))
    model = ProjectModel(layout, indexes, catalog, entry_knowledge(catalog), console_scripts=scripts, display=show,
                         replay=replay, control_plane=config.declared_control_plane if config.control_plane else None)
    shown = show or (lambda path: path)
    display: dict[str, str] = {}  # filled as reports name paths (most modules are never named)

    def name(path: str) -> str:
        found = display.get(path)
        if found is None:
            result = by_path.get(path)
            found = display[path] = shown(result.path if result is not None else path)
        return found

    from llmdoctor.scan.project.rules import project_rules

    rules = [cls(catalog.rules[code], catalog, model, name) for code, cls in sorted(project_rules().items())
             if code in catalog.rules]
    out = []
    for path, result in by_path.items():
        if not result.checked:
            continue
        findings: list[Finding] = []
        suppressed = result.suppressed
        for candidate in result.findings:
            decided = _decide(model, catalog, path, candidate, name, config.every_context)
            if decided is not None:
                findings.append(decided)
        if path in indexes:
            for rule in rules:
                if not config.rule_enabled(rule.code, result.path):
                    continue
                for finding, lines in rule.check(path, result.path):
                    if model.suppressed(path, rule.code, lines):
                        suppressed += 1
                        continue
                    finding = dataclasses.replace(finding, severity=config.severity_for(rule.code, finding.severity))
                    decided = _decide(model, catalog, path, finding, name, config.every_context)
                    if decided is not None:
                        findings.append(decided)
        findings.sort(key=Finding.sort_key)
        out.append(dataclasses.replace(result, findings=findings, suppressed=suppressed))
    return out, model


def _library_roots(catalog) -> frozenset[str]:
    """The top-level names of the libraries the knowledge describes: the SDK and HTTP tables' (`openai`,
    `requests`...) and those the entry points and tables name (`telegram`, `fastapi`...), read once per catalog."""
    found = catalog.memo.get(("library-roots",))
    if found is None:
        from llmdoctor.scan.project.knowledge import index_interest
        from llmdoctor.scan.rules.sdk_knowledge import client_knowledge, sdk_knowledge

        knowledge = client_knowledge(catalog)
        names = [*sdk_knowledge(catalog).imports, *knowledge.module_functions, *knowledge.receivers]
        roots = {name.split(".", 1)[0] for name in names} | index_interest(catalog).roots
        found = catalog.memo[("library-roots",)] = frozenset(root for root in roots if root.isidentifier())
    return found


def _decide(model: ProjectModel, catalog, path: str, candidate: Finding, name,
            every_context: bool = False) -> Finding | None:
    """The candidate as reported in its context, or None where its rule does not report there."""
    if model.unreachable(path, candidate.line):
        return None  # `if sys.platform == "win32":` on a Linux server: never runs
    extra = dict(candidate.extra)
    key = extra.pop(FUNCTION_KEY, "")
    everywhere = extra.pop(EVERYWHERE, False)
    only_in = extra.pop(ONLY_IN, None)
    if extra.pop(IN_MODEL_PROGRAM, False) and not model.calls_a_model:
        return None
    error_path = extra.pop(ERROR_PATH, False)
    if LOGGED_THROUGH in extra:
        helper = model.logging_helper(path, key, candidate.line, candidate.column, extra.pop(LOGGED_THROUGH))
        if helper is None or (error_path and helper.level >= logging_knowledge(catalog).error_path_level):
            return None
        candidate = dataclasses.replace(candidate, message=f"{candidate.message} (`{helper.function}` logs its "
                                        f"`{helper.parameter}` at {LEVEL_NAMES.get(helper.level, helper.level)})")
        extra.update(level=LEVEL_NAMES.get(helper.level, str(helper.level)),
                     helper={"path": name(helper.path), "line": helper.line, "function": helper.function,
                             "parameter": helper.parameter})
    if extra.pop(PER_CALL, False) and model.memoised(path, key, candidate.line, candidate.column):
        return None  # `if self._x is not None: return self._x` before it: built once per key, not per call
    if model.switched_off_by_callers(path, key, candidate.line):
        return None  # `if async_client: return AsyncAnthropic()` and every caller passes async_client=True
    forwarded = extra.pop(FORWARDED_KEYWORD, None)
    if forwarded is not None:
        callers = model.callers_omitting(path, key, forwarded)
        if not callers:
            return None
        extra["callers"] = callers
    spec = catalog.rules.get(candidate.rule)
    policy = getattr(spec, "contexts", None) or DEFAULT_POLICY
    context = model.context_of(path, key, streams="streams" in _flags(policy), at=(candidate.line, candidate.column))
    if only_in is not None and context.kind not in only_in and not every_context:
        return None
    verdict = "report" if everywhere or every_context else policy.get(context.kind,
                                                                      DEFAULT_POLICY.get(context.kind, "report"))
    severity = candidate.severity
    if verdict == "off":
        return None
    if verdict.startswith("if "):  # "if repeats or coroutine": one of the candidate's (or context's) flags
        if not any(extra.get(flag) or context.has(flag) for flag in _verdict_flags(verdict)):
            return None
    elif verdict in ("error", "warning", "info"):
        severity = verdict
    for flag in _flags(policy):  # evidence the verdict was read from, not part of the report
        extra.pop(flag, None)
    extra["context"] = context.kind
    if context.entry is not None:
        entry = model.nodes[context.entry.node]
        extra["entry"] = {"path": name(entry.path), "line": entry.function.line, "function": entry.label,
                          "framework": context.entry.framework, **({"route": context.entry.route}
                                                                   if context.entry.route else {})}
    if "via" not in extra and len(context.chain) > 1:
        extra["via"] = [_step(s, name) for s in model.steps(context.chain, candidate.line)]
    return dataclasses.replace(candidate, severity=severity, extra=extra)


def _verdict_flags(verdict: str) -> list[str]:
    return [flag.strip() for flag in verdict[3:].split(" or ")]


def _flags(policy: dict[str, str]) -> list[str]:
    return [flag for verdict in policy.values() if verdict.startswith("if ") for flag in _verdict_flags(verdict)]


def _step(step: Step, name) -> dict:
    return {"path": name(step.path), "line": step.line, "function": step.function}
