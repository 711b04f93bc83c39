"""Helpers shared by test files (importable as `support` because pytest puts tests/ on sys.path)."""
