"""LLM004: a blocking call made by an `async def`, directly or through the sync project functions it calls.

The model answers (model.py): which library calls block (rules/llm004.yaml `blocking_calls`, sync SDK
generation calls from rules/sdk-*.yaml), which project function a call reaches (any module), and whether a
sync function blocks through further sync calls. The rule decides: an `async def` that calls (not awaits,
not hands to a thread, not inside a lambda or nested def: the innermost function decides) a blocking library
function, or a sync project function that blocks, is reported at that call, with the chain down to the
blocking line. Where it runs is decided by the YAML's `contexts:` (a script's `asyncio.run(main())` that
starts no concurrent work blocks no one else).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from llmdoctor.report.model import Finding
from llmdoctor.scan.project.index import ENTER_EXIT
from llmdoctor.scan.project.model import Blocking
from llmdoctor.scan.project.rules import ProjectRule

FUNCTION_KEY = "_function"
WAITS = "waits"  # a flag for the `contexts:` verdicts: it waits on more than a local file (a peer, a sleep, a process)
ENTERED = ENTER_EXIT[False]  # what a sync `with` runs of its manager (`__enter__`, `__exit__`)
ONLY_IN = "_only_in"  # the contexts a finding is reported in, whatever the rule's policy says


class BlockingCallInAsync(ProjectRule):
    code = "LLM004"

    def check(self, path: str, shown_path: str) -> Iterator[tuple[Finding, tuple[int, ...]]]:
        model = self.model
        for node in model.nodes_of(path):
            function = node.function
            if not function.is_async:
                continue
            # nothing else waits on its loop, or only a stdio server's one client: only with --every-context
            alone = model.on_private_loop(node.id) or model.serves_one_client(node.id)
            for call in function.calls:
                lines = (call.line, call.stmt_line)
                read = self._read_blocking(node, call) if not call.lazy else None
                if read is not None:  # `await run(text, session.history)`: the getter runs here, awaited or not
                    yield self._where(self._through(shown_path, node, call, read, read=True), alone), lines
                    continue
                if call.kind != 0 or call.lazy or model.is_offload(node.id, call):
                    continue
                blocking = model.blocking_call(node.id, call)
                if blocking is not None:
                    yield self._where(self._direct(shown_path, function, blocking), alone), lines
                    continue
                for callee in model.callee_nodes(node.id, call, run=True):
                    target = model.nodes[callee]
                    if target.function.is_async:
                        continue
                    chain = model.blocking_chain_for(call, callee)
                    if chain:
                        yield self._where(self._through(shown_path, node, call, chain), alone), lines
                        break

    def _read_blocking(self, node, call):
        """The blocking chain of the first property getter the call reads that blocks, else None."""
        for getter in self.model.getters_read(node.id, call):
            chain = self.model.blocking_chain_for(call, getter)
            if chain:
                return chain
        return None

    @staticmethod
    def _where(finding: Finding, alone: bool) -> Finding:
        return dataclasses.replace(finding, extra={**finding.extra, ONLY_IN: []}) if alone else finding

    def _finding(self, path: str, site, message: str, fix: str | None, function_key: str, blocking: Blocking, *,
                 serving_only: bool = False, autofix: str | None = None, **extra) -> Finding:
        """`autofix`: the automatic fix at the call site (llmdoctor/scan/fix/ finds the call by its span)."""
        extra[WAITS] = not blocking.file_io
        if serving_only:
            extra[ONLY_IN] = ["serving", "worker"]
        if autofix is not None:
            extra["autofix"] = {"kind": autofix}
        return Finding(rule=self.code, severity=self.spec.severity, path=path, line=site.line, column=site.col,
                       end_line=site.end_line, end_column=site.end_col, message=message, fix=fix,
                       extra={**extra, FUNCTION_KEY: function_key})

    def _direct(self, path: str, function, blocking: Blocking) -> Finding:
        call = blocking.call
        if blocking.sdk is None:
            shown = blocking.callee.removeprefix("builtins.")
            return self._finding(
                path, call, f"`{shown}()` blocks the event loop inside `async def {function.name}`",
                blocking.fix or "await an async equivalent or asyncio.to_thread(...)", function.key, blocking,
                serving_only=blocking.serving_only, autofix=blocking.autofix, call=blocking.callee)
        method = blocking.sdk
        receiver = method.receiver
        chain = call.text
        shown = chain or method.path
        if chain.endswith("." + method.path):
            receiver_text = chain[: -len(method.path) - 1]
        else:  # `from litellm import completion; completion(...)`, or a transparent segment in between
            receiver_text = receiver.name if receiver.is_module else "<client>"
        kind = "module" if receiver.is_module else "client"
        fix = method.async_fix(receiver_text)
        if method.async_twin or receiver.async_twin:
            fix = f"use {fix}, or `await asyncio.to_thread(...)`"
        return self._finding(
            path, call,
            f"`{shown}()` is a call on the sync `{receiver.name}` {kind}: it blocks the event loop inside "
            f"`async def {function.name}` for the whole {'model' if method.generates else 'API'} request, stalling "
            f"every other coroutine",
            fix, function.key, blocking, autofix=blocking.autofix, call=f"{receiver.name}.{method.path}",
            sdk=receiver.table)

    def _through(self, path: str, node, call, chain, read: bool = False) -> Finding:
        """`read`: the chain starts at a property's getter the call reads (`session.history`), not at its callee."""
        model = self.model
        last_node, last_call, blocking = chain[-1]
        blocked = blocking.callee.removeprefix("builtins.")
        if blocking.sdk is not None:
            blocked = f"{blocking.call.text or blocking.sdk.path}` on the sync `{blocking.sdk.receiver.name}"
        callee = model.nodes[chain[0][0]]
        where = self.show(model.nodes[last_node].path)
        hops = len(chain) - 1
        through = f" (through {hops} more call{'s' if hops > 1 else ''})" if hops else ""
        shown = call.text or callee.label
        instead = blocking.fix.removeprefix("use ") if blocking.fix else (
            blocking.sdk.async_fix("client") if blocking.sdk is not None else "an async equivalent")
        via = [{"path": self.show(node.path), "line": call.line, "function": node.function.name}]
        via += [{"path": self.show(model.nodes[step_node].path), "line": step_call.line,
                 "function": model.nodes[step_node].label} for step_node, step_call, _ in chain]
        inside = f"blocks the event loop inside `async def {node.function.name}`"
        reached = f"calls `{blocked}()` at {where}:{last_call.line}{through}"
        if call.iterated and callee.function.generator:  # each step of the `for` runs the generator's body here
            message = (f"iterating `{shown}()` {inside}: the generator `{callee.label}` {reached} on every step, and "
                       f"every coroutine waits for it")
            fix = (f"collect it off the loop: `for item in await asyncio.to_thread(list, {shown}(...))`; or make it "
                   f"an async generator down to the blocking call ({instead})")
            autofix = None
        elif callee.function.name in ENTERED:  # `with Store() as s:` runs `Store.__enter__` here
            manager = shown.rsplit(".", 1)[0]
            message = (f"`with {manager}` {inside}: its `{callee.label}` {reached}, and every coroutine waits for "
                       f"it")
            fix = (f"move the `with` block into a sync function and `await asyncio.to_thread(...)` it; or give the "
                   f"manager an async `__aenter__`/`__aexit__` down to the blocking call ({instead})")
            autofix = None
        elif read:
            message = (f"reading the property `{callee.function.name}` {inside}: its getter `{callee.label}` {reached}, "
                       f"and every coroutine waits for it")
            fix = (f"read it off the loop: `await asyncio.to_thread(lambda: obj.{callee.function.name})`; or make it an "
                   f"async method down to the blocking call ({instead})")
            autofix = None
        else:
            message = f"`{shown}()` {inside}: `{callee.label}` {reached}, and every coroutine waits for it"
            fix = (f"await it off the loop: `await asyncio.to_thread({shown}, ...)`; or make the chain async down to "
                   f"the blocking call ({instead})")
            autofix = "to_thread"  # the helper, off the loop
        return self._finding(path, call, message, fix, node.function.key, blocking, autofix=autofix,
                             call=blocking.callee, via=via)
