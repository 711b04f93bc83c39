"""`llmdoctor nginx` command: options and rendering only; the work lives in its own module."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the command to the app. (Not implemented yet: see the issue for `nginx`.)"""
