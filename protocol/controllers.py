"""Policies from outside the project under pusht-eval-v1: any object with the downstream interface.

A controller is built by a user's factory, `MODULE:FACTORY` (a module importable from the repository or the working
directory, or a .py file) called with `--controller-arg KEY=VALUE` keywords, and is an object with

    reset()                       before each episode
    __call__(observation) -> xy   each step; the PD target in env pixels (the board spans [0, 512]), or in [-1, 1]
                                  where the controller sets `unit_actions = True`

and, optionally, `files`: the paths it read (weights, configs), whose SHA-256 the metrics JSON records.

The observation is what our datasets store for the frame: `pixels` (uint8, S×S×3, the env render at the image size),
`agent_pos` (float64, 2: the agent in env pixels) and `environment_state` (float64, 16: the block's 8 keypoints,
x0, y0, x1, …, in env pixels).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from common.cli import BadInput, first_line
from common.files import sha256_file
from env import appearance
from env.appearance import Appearance
from env.pusht_wrapper import IMAGE_SIZE, PUSHT_ENV_ID, block_keypoints, make_env
from protocol.pusht_eval import Policy


class ControllerError(BadInput):
    """A controller broke the contract mid-run; the message names the episode and the step."""


@dataclass(frozen=True)
class ControllerSpec:
    """A controller as --controller and --controller-arg name it: picklable, so every worker builds its own."""

    target: str  # MODULE:FACTORY or path/to/file.py:FACTORY
    args: tuple[tuple[str, str], ...] = ()  # KEY, VALUE as typed
    image_size: int = IMAGE_SIZE

    def keywords(self) -> dict[str, Any]:
        return {key: literal(value) for key, value in self.args}


def literal(value: str) -> Any:
    """A --controller-arg value: a Python literal where it parses (8, 0.5, True, [1, 2]), else the string itself."""
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def parse_args(pairs: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """KEY=VALUE strings → pairs; bad input for one without `=` or with a key that is not a Python name."""
    parsed = []
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.isidentifier():
            raise BadInput(f"--controller-arg {pair!r} is not KEY=VALUE with KEY a keyword of the factory; "
                           f"e.g. --controller-arg path=model.pt")
        parsed.append((key, value))
    return tuple(parsed)


def load_factory(target: str) -> Callable[..., Any]:
    """The factory `target` names, imported; bad input, in one line, for every way that can fail."""
    module_name, colon, attribute = target.rpartition(":")
    if not colon or not module_name or not attribute:
        raise BadInput(f"--controller {target!r} is not MODULE:FACTORY (e.g. my_policy:make or "
                       f"path/to/my_policy.py:make)")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise BadInput(f"--controller: no file {module_name!r}")
            folder = str(path.resolve().parent)
            if folder not in sys.path:
                sys.path.append(folder)  # as when the file runs as a script: its neighbours import
            # registered before it runs, as an import would be (dataclasses look their module up there)
            name = f"_controller_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = sys.modules[name] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.append(str(Path.cwd()))  # `python -m`'s rule: the working directory's modules import
            module = importlib.import_module(module_name)
    except BadInput:
        raise
    except Exception as err:
        raise BadInput(f"--controller: importing {module_name!r} failed ({type(err).__name__}: "
                       f"{first_line(err)})") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise BadInput(f"--controller: {module_name!r} has no callable {attribute!r}")
    return factory


def build(spec: ControllerSpec) -> Any:
    """The controller, checked for the interface; bad input when the factory raises or returns something else."""
    factory = load_factory(spec.target)
    try:
        controller = factory(**spec.keywords())
    except BadInput:
        raise
    except Exception as err:
        raise BadInput(f"--controller: {spec.target}({described_args(spec)}) raised {type(err).__name__}: "
                       f"{first_line(err)}") from None
    missing = [name for name in ("reset", "__call__") if not callable(getattr(controller, name, None))]
    if missing:
        raise BadInput(f"--controller: {spec.target} returned a {type(controller).__name__}, which has no "
                       f"{' or '.join(missing)}; a controller needs reset() and __call__(observation)")
    unit_actions(controller)  # both read here, so that a broken attribute is named before any work
    listed_files(controller)
    return controller


def _calling(what: str, call: Callable[[], Any]) -> Any:
    """`call()`, with whatever the user's code raises, or a sys.exit in it, as one ControllerError naming `what`
    (Ctrl-C passes through)."""
    try:
        return call()
    except (Exception, SystemExit) as err:
        told = "called sys.exit" if isinstance(err, SystemExit) else f"raised {type(err).__name__}: {first_line(err)}"
        raise ControllerError(f"{what}: the controller {told}") from None


def described_args(spec: ControllerSpec) -> str:
    return ", ".join(f"{key}={value}" for key, value in spec.args)


def controller_env(spec: ControllerSpec) -> gym.Env:
    """PushT as the protocol runs it, rendering observations at the controller's image size."""
    return make_env(PUSHT_ENV_ID, None, observation_width=spec.image_size, observation_height=spec.image_size)


def observation(env: gym.Env, pixels: bool = True, look: Appearance | None = None) -> dict[str, np.ndarray]:
    """What a controller sees of the env's current state (the module docstring), rendered with `look` (None:
    gym-pusht's own); without `pixels`, no render."""
    pusht = env.unwrapped
    seen = {"agent_pos": np.asarray(pusht.agent.position, dtype=np.float64),
            "environment_state": block_keypoints(pusht).ravel().astype(np.float64)}
    return {"pixels": appearance.render(pusht, look), **seen} if pixels else seen


def as_policy(controller: Any, env: gym.Env, seed: int, look: Appearance | None = None) -> Policy:
    """The protocol's policy (observation → action in [-1, 1]) for one episode of `controller`, which it resets,
    its pixels rendered with `look`; an action that is not two finite numbers, or a controller that raises, ends the
    run naming the episode and step."""
    _calling(f"episode seed {seed}, reset()", controller.reset)
    unit = unit_actions(controller)
    steps = itertools.count()

    def act(_obs: np.ndarray) -> np.ndarray:
        step = next(steps)
        where = f"episode seed {seed}, step {step}"
        returned = _calling(where, lambda: controller(observation(env, look=look)))
        try:
            action = np.asarray(returned, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError):  # e.g. a dict, or a tensor still on the GPU
            raise ControllerError(f"{where}: the controller returned a {type(returned).__name__}, not two numbers; "
                                  f"return a NumPy array or list of x, y") from None
        if action.size != 2:
            raise ControllerError(f"{where}: the controller returned shape {action.shape}; it must return one x, y "
                                  f"target (shape (2,))")
        if not np.isfinite(action).all():
            raise ControllerError(f"{where}: the controller returned {action.ravel().tolist()}; targets must be finite")
        action = action.reshape(2)
        return np.clip(action, -1.0, 1.0).astype(np.float32) if unit else env.unit_action(action)

    return act


def describe(spec: ControllerSpec, controller: Any) -> dict:
    """What the metrics JSON records of an evaluated controller: its factory, arguments as typed, image size, action
    convention and the files behind it."""
    return {"target": spec.target, "args": dict(spec.args), "image_size": spec.image_size,
            "unit_actions": unit_actions(controller), "files": file_hashes(spec, controller)}


def unit_actions(controller: Any) -> bool:
    """Whether the controller declared the [-1, 1] action convention (else: env pixels)."""
    return bool(_calling("reading unit_actions", lambda: getattr(controller, "unit_actions", False)))


def listed_files(controller: Any) -> list[Path]:
    """The paths the controller says it read (`files`): a list or tuple of paths, else bad input."""
    files = _calling("reading files", lambda: getattr(controller, "files", ()))
    if not isinstance(files, (list, tuple)) or not all(isinstance(f, (str, Path)) for f in files):
        raise BadInput(f"--controller: the controller's files is a {type(files).__name__}; it must be a list of "
                       f"the paths it read")
    return [Path(f) for f in files]


def file_hashes(spec: ControllerSpec, controller: Any) -> dict[str, str]:
    """SHA-256 of what was evaluated: the factory's .py file, the files the controller says it read (`files`), and
    every file an argument names (all of a folder's)."""
    paths: list[Path] = []
    module_name = spec.target.rpartition(":")[0]
    origin = Path(module_name) if module_name.endswith(".py") else _origin(module_name)
    paths += [origin] if origin is not None else []
    paths += listed_files(controller)
    hashes = {}
    path: Path | None = None  # what is being read: an error that names no file (a read of /proc) is told by it
    try:  # the walk too: a folder that changes while it is read (/proc/self) fails there
        for _, value in spec.args:
            path = Path(value)
            if path.is_file():
                paths.append(path)
            elif path.is_dir():
                paths += sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
        for path in dict.fromkeys(paths):
            if path.is_file():
                hashes[str(path)] = sha256_file(path)
    except OSError as err:
        raise BadInput(f"--controller: cannot read {str(err.filename or path)!r} to record its SHA-256 "
                       f"({err.strerror or err}); pass arguments that name the controller's own files") from None
    return hashes


def _origin(module_name: str) -> Path | None:
    module = sys.modules.get(module_name)
    origin = getattr(module, "__file__", None)
    return Path(origin) if origin else None
