"""Automatic fixes for scan findings: libcst rewrites that keep every other byte of the file.

- `base.py`: the request a finding makes (its span and the rule's `autofix` descriptor), the per-pass
  context (positions, parents, scopes, imports and helpers to add) and the `Fixer` base class;
- one module per fix kind (`asyncio_sleep.py`, `to_thread.py`, `timeout.py`, `cache_tokenizer.py`),
  registered in `registry.py` under the kind the rule YAMLs list in `fixes`;
- `apply.py`: one file to a fixed point (scan, fix, re-check, rescan);
- `run.py`: a whole scan's files (write, or diff), for the command line;
- `noqa.py`: `--add-noqa`.

`literals.py` is imported by rules (whether a fix is offered); nothing here is imported by a scan that
does not fix.
"""
