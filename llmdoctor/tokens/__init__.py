"""`llmdoctor tokens`: exact, offline token counts (tiktoken) and context budgets. See docs/tokens.md."""
