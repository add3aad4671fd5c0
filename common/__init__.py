"""Shared infrastructure under every package: crash-safe files, locks, the command-line contract.

Every command imports this package first, so a Python without the project's packages (the environment not active)
is one line and exit 2 here, not a ModuleNotFoundError traceback from the first heavy import."""

import importlib.util
import sys

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("gym_pusht") is None:
    print("error: this Python lacks the project's packages (torch, gym-pusht); activate its environment "
          "(. .venv/bin/activate) or create it: python3 -m venv .venv && .venv/bin/pip install -r requirements.txt",
          file=sys.stderr)
    raise SystemExit(2)
