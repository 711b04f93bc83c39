"""llmdoctor: diagnostics and lint for LLM serving code and infrastructure."""

__version__ = "0.1.0"
