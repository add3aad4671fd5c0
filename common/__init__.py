"""Shared infrastructure under every package: crash-safe files, locks, the command-line contract."""
