"""Helpers the tests share: kernel gates, busy processes, scenarios resolved as the CLI resolves them."""
