"""Plugins of every test session (unit and integration)."""

pytest_plugins = ["tests.skips"]
