"""How a PushT board looks: one episode's appearance, how it is drawn from the episode's seed, and the renderer.

Appearance is rendering only: the physics, states, actions and rewards of an episode are the same at every level.
`none` is gym-pusht's own render, untouched. The graded levels draw, from the seed alone (so the same seed and level
give the same frames on any machine and worker count):

- `colors`: the board, block, agent, goal region and walls in other colours, and the image's brightness and contrast;
- `full`: also a small camera change (shift, rotation and zoom of the top-down view) and up to three distractor shapes
  that take no part in the physics (drawn under everything else, so they never hide the block, agent or goal).

The space of each parameter is split in two: the part collection draws from (`colors`, `full`) and a held-out part it
never draws from (`heldout`: hues on the other side of the colour circle, harsher lighting, a larger camera change,
distractors of other shapes), so that a learner's figure under `heldout` measures robustness to what it never saw.
"""

from __future__ import annotations

import colorsys
import json
import math
from dataclasses import asdict, dataclass, field

import cv2
import gymnasium as gym
import numpy as np
import pygame
import pymunk
import pymunk.pygame_util
from gym_pusht.envs.pymunk_override import DrawOptions

LEVELS = ("none", "colors", "full")  # what collection draws from (graded)
EVAL_LEVELS = (*LEVELS, "heldout")  # what an evaluation may render with
MIXED = "mixed"  # a merged dataset's level when its episodes' levels differ (each episode then names its own)
BOARD = 512  # gym-pusht draws on a 512 px board, then resizes to the observation size
# gym-pusht's own colours (its named pygame colours), the centre of each drawn range
DEFAULT_COLORS = {"board": (255, 255, 255), "block": (119, 136, 153), "agent": (65, 105, 225),
                  "goal": (144, 238, 144), "walls": (211, 211, 211)}
HUE_SPREAD = 1 / 6  # training hues lie within ±60° of the default's; held-out ones more than 90° away
SHAPES = ("circle", "square")  # distractors collection draws
HELDOUT_SHAPES = ("triangle", "cross")  # distractors it never draws
LEVEL_STREAM = {"colors": 1, "full": 2, "heldout": 3}  # each level's own random stream of a seed
MAX_LOOKS = 64  # looks of one trajectory (--looks-per-trajectory): far more than a perception needs
MAX_DISTRACTORS = 4  # the most any level draws (held-out: 2 to 4)
# the camera change `full` draws: shift (board px, each axis), rotation (degrees) up to, zoom between
CAMERA_SHIFT, CAMERA_ROTATION, CAMERA_ZOOM = 12.0, 4.0, (0.96, 1.04)
# A replay zarr's per-episode row (meta/episode_appearance): the level's index in EVAL_LEVELS, the colours in
# DEFAULT_COLORS' order (R, G, B each), brightness, contrast, shift x and y, rotation, zoom, then MAX_DISTRACTORS
# slots of (shape's index in SHAPES + HELDOUT_SHAPES, -1 for an empty slot; x, y, size, angle, R, G, B).
DISTRACTOR_FIELDS = 8
VECTOR_SIZE = 1 + 3 * len(DEFAULT_COLORS) + 6 + MAX_DISTRACTORS * DISTRACTOR_FIELDS


@dataclass(frozen=True)
class Distractor:
    """A shape drawn on the board that nothing collides with: its kind, centre and size in board pixels, angle
    and colour."""

    shape: str
    x: float
    y: float
    size: float
    angle: float
    color: tuple[int, int, int]


@dataclass(frozen=True)
class Appearance:
    """One episode's look. Colours are RGB; `brightness` is added (in 0-255 levels) and `contrast` scales about
    mid-grey, after the resize; the camera maps the board about its centre (`shift` in board pixels, `rotation` in
    degrees, `zoom` > 1 closer)."""

    level: str = "none"
    colors: dict[str, tuple[int, int, int]] = field(default_factory=lambda: dict(DEFAULT_COLORS))
    brightness: float = 0.0
    contrast: float = 1.0
    shift: tuple[float, float] = (0.0, 0.0)
    rotation: float = 0.0
    zoom: float = 1.0
    distractors: tuple[Distractor, ...] = ()

    def to_json(self) -> dict:
        """The parameters as a dataset records them per episode (plain JSON types)."""
        return asdict(self)

    def dumps(self) -> str:
        """`to_json` as one line of JSON: how LeRobot v3.0 and RLDS store it per episode."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def to_vector(self) -> np.ndarray:
        """The parameters as one float64 row of VECTOR_SIZE (a replay zarr's per-episode array); exact: every
        parameter is a float64 or a small integer."""
        shapes = (*SHAPES, *HELDOUT_SHAPES)
        slots = [[shapes.index(d.shape), d.x, d.y, d.size, d.angle, *d.color] for d in self.distractors]
        slots += [[-1] + [0] * (DISTRACTOR_FIELDS - 1)] * (MAX_DISTRACTORS - len(self.distractors))
        return np.array([EVAL_LEVELS.index(self.level), *(c for name in DEFAULT_COLORS for c in self.colors[name]),
                         self.brightness, self.contrast, *self.shift, self.rotation, self.zoom,
                         *(value for slot in slots for value in slot)], dtype=np.float64)

    @classmethod
    def from_vector(cls, row: np.ndarray) -> Appearance:
        """The inverse of `to_vector`; ValueError for a row that is not one."""
        row = np.asarray(row, dtype=np.float64)
        if row.shape != (VECTOR_SIZE,):
            raise ValueError(f"not an appearance row: {VECTOR_SIZE} numbers expected, got shape {row.shape}")
        if not np.isfinite(row).all():
            bad = int(np.argmin(np.isfinite(row)))
            raise ValueError(f"not an appearance row: number {bad} is {row[bad]}; every one must be finite")
        shapes, n = (*SHAPES, *HELDOUT_SHAPES), 3 * len(DEFAULT_COLORS)
        level, colors, rest = row[0], row[1:1 + n].reshape(-1, 3), row[1 + n:]
        slots = rest[6:].reshape(MAX_DISTRACTORS, DISTRACTOR_FIELDS)
        if level not in range(len(EVAL_LEVELS)) or any(s[0] not in range(-1, len(shapes)) for s in slots):
            raise ValueError("not an appearance row: its level or a distractor's shape is no known index")
        return cls.from_json({
            "level": EVAL_LEVELS[int(level)], "colors": dict(zip(DEFAULT_COLORS, colors.tolist(), strict=True)),
            "brightness": rest[0], "contrast": rest[1], "shift": rest[2:4].tolist(), "rotation": rest[4],
            "zoom": rest[5], "distractors": [{"shape": shapes[int(s[0])], "x": s[1], "y": s[2], "size": s[3],
                                              "angle": s[4], "color": s[5:8].tolist()} for s in slots if s[0] >= 0]})

    @classmethod
    def from_json(cls, data: dict) -> Appearance:
        """The inverse of `to_json`; ValueError for a record that is not one."""
        try:
            if data["level"] not in EVAL_LEVELS or set(data["colors"]) != set(DEFAULT_COLORS):
                raise ValueError(f"level {data['level']!r} or colours {sorted(data['colors'])} are not ours")
            if len(data["distractors"]) > MAX_DISTRACTORS or any(
                    d["shape"] not in (*SHAPES, *HELDOUT_SHAPES) for d in data["distractors"]):
                raise ValueError(f"more than {MAX_DISTRACTORS} distractors, or a shape that is not ours")
            return cls(level=str(data["level"]), colors={k: _rgb(data["colors"][k]) for k in DEFAULT_COLORS},
                       brightness=float(data["brightness"]), contrast=float(data["contrast"]),
                       shift=(float(data["shift"][0]), float(data["shift"][1])), rotation=float(data["rotation"]),
                       zoom=float(data["zoom"]), distractors=tuple(
                           Distractor(str(d["shape"]), float(d["x"]), float(d["y"]), float(d["size"]),
                                      float(d["angle"]), _rgb(d["color"])) for d in data["distractors"]))
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ValueError(f"not an appearance record ({type(err).__name__}: {err})") from None

    @classmethod
    def loads(cls, text: str | bytes) -> Appearance:
        """The inverse of `dumps`; ValueError for text that is not one."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"not an appearance record ({err})") from None
        if not isinstance(data, dict):
            raise ValueError("not an appearance record (not a JSON object)")
        return cls.from_json(data)


def _rgb(value: object) -> tuple[int, int, int]:
    r, g, b = (int(channel) for channel in value)  # type: ignore[union-attr]
    if not all(0 <= c <= 255 for c in (r, g, b)):
        raise ValueError(f"colour {value} is outside 0-255")
    return r, g, b


def _hue_shifted(rgb: tuple[int, int, int], rng: np.random.Generator, heldout: bool) -> tuple[int, int, int]:
    """`rgb` with its hue moved: within ±HUE_SPREAD of its own (training) or across the circle (held-out); its
    saturation and value jittered a little, a grey given some colour."""
    h, s, v = colorsys.rgb_to_hsv(*(c / 255 for c in rgb))
    offset = rng.uniform(-HUE_SPREAD, HUE_SPREAD) + (0.5 if heldout else 0.0)
    s = float(np.clip(max(s, 0.25) * rng.uniform(0.8, 1.2), 0, 1))
    v = float(np.clip(v * rng.uniform(0.85, 1.1), 0, 1))
    return _rgb(round(c * 255) for c in colorsys.hsv_to_rgb((h + offset) % 1.0, s, v))


def _board(rng: np.random.Generator, heldout: bool) -> tuple[int, int, int]:
    """A light tinted board (training) or a darker, saturated one (held-out): the block and agent stay visible."""
    hue = rng.uniform(0, 1)
    s, v = (rng.uniform(0.35, 0.6), rng.uniform(0.45, 0.65)) if heldout else (rng.uniform(0, 0.2), rng.uniform(0.85, 1))
    return _rgb(round(c * 255) for c in colorsys.hsv_to_rgb(hue, s, v))


def _either_side(rng: np.random.Generator, low: float, high: float) -> float:
    """A magnitude in [low, high] with a random sign."""
    return float(rng.uniform(low, high) * rng.choice([-1.0, 1.0]))


def draw(level: str, seed: int, copy: int = 0) -> Appearance:
    """The appearance of the episode started from `seed` at `level` (one of EVAL_LEVELS); `copy` > 0 draws the
    seed's further looks (one trajectory recorded in several looks), each from a stream of its own."""
    if level not in EVAL_LEVELS:
        raise ValueError(f"unknown appearance level {level!r}; use one of {', '.join(EVAL_LEVELS)}")
    if level == "none":
        return Appearance()
    heldout = level == "heldout"
    rng = np.random.default_rng([LEVEL_STREAM[level], seed] + ([copy] if copy else []))
    colors = {name: _board(rng, heldout) if name == "board" else _hue_shifted(rgb, rng, heldout)
              for name, rgb in DEFAULT_COLORS.items()}
    if heldout:
        brightness, contrast = _either_side(rng, 25, 45), float(rng.choice([rng.uniform(0.6, 0.75),
                                                                             rng.uniform(1.3, 1.45)]))
    else:
        brightness, contrast = float(rng.uniform(-20, 20)), float(rng.uniform(0.85, 1.15))
    if level == "colors":
        return Appearance(level, colors, brightness, contrast)
    if heldout:
        shift = (_either_side(rng, 16, 28), _either_side(rng, 16, 28))
        rotation, zoom = _either_side(rng, 6, 10), float(rng.choice([rng.uniform(0.88, 0.93), rng.uniform(1.07, 1.12)]))
        count, shapes = int(rng.integers(2, 5)), HELDOUT_SHAPES
    else:
        shift = (float(rng.uniform(-CAMERA_SHIFT, CAMERA_SHIFT)), float(rng.uniform(-CAMERA_SHIFT, CAMERA_SHIFT)))
        rotation, zoom = float(rng.uniform(-CAMERA_ROTATION, CAMERA_ROTATION)), float(rng.uniform(*CAMERA_ZOOM))
        count, shapes = int(rng.integers(0, 4)), SHAPES
    distractors = tuple(
        Distractor(str(rng.choice(shapes)), float(rng.uniform(40, BOARD - 40)), float(rng.uniform(40, BOARD - 40)),
                   float(rng.uniform(18, 40)), float(rng.uniform(0, 360)),
                   _rgb(rng.integers(0, 256, 3))) for _ in range(count))
    return Appearance(level, colors, brightness, contrast, shift, rotation, zoom, distractors)


def look(level: str, seed: int, copy: int = 0) -> Appearance | None:
    """What the renderer takes for an episode: None for gym-pusht's own look, else `draw(level, seed, copy)`."""
    return None if level == "none" else draw(level, seed, copy)


def copy_of(recorded: Appearance, seed: int, looks: int) -> int | None:
    """Which of the `looks` draws of `seed` at its level `recorded` is (None: none of them, an edited look)."""
    return next((k for k in range(looks) if draw(recorded.level, seed, k) == recorded), None)


def _polygon(d: Distractor) -> list[tuple[float, float]]:
    """A distractor's outline (board pixels) for the polygon shapes."""
    if d.shape == "square":
        corners = [(-1, -1), (1, -1), (1, 1), (-1, 1)]
    elif d.shape == "triangle":
        corners = [(math.cos(a), math.sin(a)) for a in (math.pi / 2, math.pi * 7 / 6, math.pi * 11 / 6)]
    else:  # a cross: two bars
        w = 0.35
        corners = [(-w, -1), (w, -1), (w, -w), (1, -w), (1, w), (w, w), (w, 1), (-w, 1), (-w, w), (-1, w), (-1, -w),
                   (-w, -w)]
    turn = math.radians(d.angle)
    c, s = math.cos(turn), math.sin(turn)
    return [(d.x + d.size * (x * c - y * s), d.y + d.size * (x * s + y * c)) for x, y in corners]


def _camera(appearance: Appearance) -> np.ndarray:
    """The 2x3 affine map of the board image: zoom and rotation about its centre, then the shift."""
    matrix = cv2.getRotationMatrix2D((BOARD / 2, BOARD / 2), appearance.rotation, appearance.zoom)
    matrix[:, 2] += appearance.shift
    return matrix


def place(pusht: gym.Env, state: np.ndarray) -> None:
    """Put the agent and block of the unwrapped PushT env `pusht` where a recorded frame's `state` (agent x, y, block
    x, y, angle) has them, without running the physics: what a frame of an episode without a seed (the human
    reference) is drawn from. The angle goes first: pymunk turns a body about its centre of gravity, which would move
    a position set before it."""
    pusht.agent.position = (float(state[0]), float(state[1]))
    pusht.block.angle = float(state[4])
    pusht.block.position = (float(state[2]), float(state[3]))
    for body in (pusht.agent, pusht.block):
        for shape in body.shapes:
            shape.cache_bb()  # the drawn outline follows the body


def board_pixels(screen: pygame.Surface) -> np.ndarray:
    """The drawn board as (H, W, 3) RGB bytes: the pixels gym-pusht's _get_img copies out of pixels3d's strided
    view, read as one contiguous buffer (4× less time a frame: every recorded, replayed or verified frame pays it)."""
    return np.frombuffer(pygame.image.tobytes(screen, "RGB"), np.uint8).reshape(screen.get_height(),
                                                                                 screen.get_width(), 3)


def render(pusht: gym.Env, appearance: Appearance | None, size: int | None = None) -> np.ndarray:
    """The observation render of the unwrapped PushT env `pusht` as it stands, at `size` px (default: its
    observation size), with `appearance`; None or `none` is gym-pusht's own render, byte for byte."""
    width, height = (size, size) if size is not None else (pusht.observation_width, pusht.observation_height)
    if appearance is None or appearance.level == "none":
        return cv2.resize(board_pixels(pusht._draw()), (width, height))  # gym-pusht's _get_img, without the marker
    colors = appearance.colors
    screen = pygame.Surface((BOARD, BOARD))
    screen.fill(colors["board"])
    for d in appearance.distractors:
        if d.shape == "circle":
            pygame.draw.circle(screen, d.color, (round(d.x), round(d.y)), round(d.size))
        else:
            pygame.draw.polygon(screen, d.color, _polygon(d))
    options = DrawOptions(screen)
    goal = pusht.get_goal_pose_body(pusht.goal_pose)
    for shape in pusht.block.shapes:
        points = [pymunk.pygame_util.to_pygame(goal.local_to_world(v), screen) for v in shape.get_vertices()]
        pygame.draw.polygon(screen, colors["goal"], [*points, points[0]])
    saved = [(shape, shape.color) for shape in pusht.space.shapes]
    try:
        for shape in pusht.space.shapes:
            body = shape.body
            name = "agent" if body is pusht.agent else "block" if body is pusht.block else "walls"
            shape.color = pygame.Color(*colors[name])
        pusht.space.debug_draw(options)
    finally:
        for shape, color in saved:
            shape.color = color
    board = board_pixels(screen)
    if appearance.shift != (0.0, 0.0) or appearance.rotation or appearance.zoom != 1.0:
        board = cv2.warpAffine(board, _camera(appearance), (BOARD, BOARD), flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_CONSTANT, borderValue=colors["walls"])
    image = cv2.resize(board, (width, height)).astype(np.float32)
    image = (image - 127.5) * appearance.contrast + 127.5 + appearance.brightness
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def render_states(env: gym.Env, states: np.ndarray, look: Appearance | None) -> np.ndarray:
    """The renders of recorded states (agent x, y, block x, y, angle per row) with `look`, at the observation size
    of `env` (a PushT env, reset here so that its bodies exist): frames drawn again without replaying anything."""
    env.reset(seed=0)
    pusht = env.unwrapped
    images = []
    for state in states:
        place(pusht, state)
        images.append(render(pusht, look))
    return np.stack(images)
