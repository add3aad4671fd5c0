"""PushT for SAC: normalised observations, actions in [-1, 1], optional training reward terms.

Observation (`features="seed"`, 6 dims), every entry in [-1, 1]:
    agent x, y and block x, y as p / 256 − 1 (the board spans [0, 512]);
    sin θ, cos θ of the block angle θ (continuous where the raw angle wraps at 2π).
`features="rich"` appends (24 dims in all):
    agent velocity v / 2000 clipped to [-1, 1] (the PD controller's momentum, hidden in the state);
    the block's 8 keypoints minus the goal pose's 8 keypoints, / 512, in (x, y) pairs.
Action (`action_mode="absolute"`, the default): a ∈ [-1, 1]² → PD target 256·(a + 1) ∈ [0, 512]².
Action (`action_mode="waypoint"`, the demonstrator): every `decision_steps` env steps the policy picks a
waypoint, 256·(a + 1) on the board, or the current target + `waypoint_reach`·a when that is set; between
decisions the action is ignored. Each env step the PD target moves toward the
waypoint by at most `target_speed` px and stays within `max_lead` px of the agent, so the target moves
smoothly and predictably (a PD agent cruising at v px/step trails its target by k_v·v·hz/k_p = 2v px).
The observation then appends the current target (p / 256 − 1): it is state once targets move gradually.

Training reward = raw − step_cost + success_bonus·[success] + potential shaping
    F = γ Φ(s') − Φ(s),  Φ = −(w_kp · mean keypoint distance to goal + w_ab · agent-to-block distance) / 512.
`info` always carries the untouched `raw_reward`, `coverage` and `is_success`; the defaults add
nothing, so the seed configuration trains on the raw reward.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from env.decisions import DecisionWrapper
from env.scaling import scale_to_range, scale_to_unit

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

PUSHT_ENV_ID = "gym_pusht/PushT-v0"
BOARD_SIZE = 512.0
VELOCITY_SCALE = 2000.0
MAX_EPISODE_STEPS = 300
CONTROL_HZ = 10  # gym-pusht steps the policy at 10 Hz: the fps of videos and datasets
SEED_LIMIT = 2**31  # start seeds stay below it: far more than any collection uses, and no format's seed field wraps
IMAGE_SIZE = 96  # the side of the observation render datasets store and controllers see (gym-pusht's own default)
FEATURE_SETS = ("seed", "rich")
ACTION_MODES = ("absolute", "waypoint")


@dataclass
class PushTOptions:
    """Wrapper options (config section `env`); none of them changes what evaluation measures."""

    features: str = "seed"
    step_cost: float = 0.0
    success_bonus: float = 0.0
    shaping_keypoints: float = 0.0
    shaping_agent_block: float = 0.0
    shaping_gamma: float = 0.99  # γ of the potential-based term; train.py sets it to the agent's γ
    goal_start_prob: float = 0.0  # training curriculum: chance to start with the block near the goal
    goal_start_position_noise: float = 40.0  # px
    goal_start_angle_noise: float = 0.6  # rad
    action_mode: str = "absolute"  # "waypoint": rate-limited targets, a decision every decision_steps
    decision_steps: int = 1  # waypoint mode: env steps per policy decision
    target_speed: float = 15.0  # waypoint mode: max PD-target motion per env step, px
    max_lead: float = 40.0  # waypoint mode: max distance of the PD target from the agent, px (0 = no limit)
    waypoint_reach: float = 0.0  # waypoint mode: 0 = waypoints anywhere on the board; D > 0: current target + D·a

    def validate(self) -> None:
        if self.features not in FEATURE_SETS:
            raise ValueError(f"env.features must be one of {FEATURE_SETS}, got {self.features!r}")
        if self.action_mode not in ACTION_MODES:
            raise ValueError(f"env.action_mode must be one of {ACTION_MODES}, got {self.action_mode!r}")
        if self.decision_steps < 1:
            raise ValueError(f"env.decision_steps must be >= 1, got {self.decision_steps}")
        if self.action_mode == "absolute" and self.decision_steps != 1:
            raise ValueError("env.decision_steps > 1 needs env.action_mode=waypoint")
        if not self.target_speed > 0:
            raise ValueError(f"env.target_speed must be > 0 px, got {self.target_speed}")
        if self.max_lead < 0:
            raise ValueError(f"env.max_lead must be >= 0 px (0 = no limit), got {self.max_lead}")
        if self.waypoint_reach < 0:
            raise ValueError(f"env.waypoint_reach must be >= 0 px (0 = anywhere on the board), got "
                             f"{self.waypoint_reach}")
        if not 0.0 <= self.goal_start_prob <= 1.0:
            raise ValueError(f"env.goal_start_prob must be in [0, 1], got {self.goal_start_prob}")
        if not 0.0 <= self.shaping_gamma <= 1.0:
            raise ValueError(f"env.shaping_gamma must be in [0, 1], got {self.shaping_gamma}")


def image_size_problem(size: int) -> str | None:
    """Why a render side is refused (None: fine): video encoders need an even side, and past 1024 px a frame is
    megabytes for nothing the board shows."""
    return None if 64 <= size <= 1024 and size % 2 == 0 else f"must be even and in [64, 1024], got {size}"


# gym-pusht's T in the block's body frame, in the vertex order of `block_keypoints` (the two rectangles' corners).
BLOCK_CORNERS = np.array([(-60, 0), (60, 0), (60, 30), (-60, 30), (-15, 30), (15, 30), (15, 120), (-15, 120)],
                         dtype=np.float64)


def keypoints_from_pose(pose: np.ndarray) -> np.ndarray:
    """(…, 3) block poses x, y, θ → (…, 8, 2) corner keypoints, as gym-pusht computes them."""
    pose = np.asarray(pose, dtype=np.float64)
    cos, sin = np.cos(pose[..., 2])[..., None], np.sin(pose[..., 2])[..., None]
    x = cos * BLOCK_CORNERS[:, 0] - sin * BLOCK_CORNERS[:, 1] + pose[..., 0:1]
    y = sin * BLOCK_CORNERS[:, 0] + cos * BLOCK_CORNERS[:, 1] + pose[..., 1:2]
    return np.stack([x, y], axis=-1)


def block_keypoints(pusht: gym.Env) -> np.ndarray:
    """The block's 8 corner keypoints in env units, shape (8, 2)."""
    return pusht.get_keypoints(pusht._block_shapes)


def clip_norm(vector: np.ndarray, limit: float) -> np.ndarray:
    """`vector` shortened to length `limit` if it is longer."""
    norm = float(np.linalg.norm(vector))
    return vector * (limit / norm) if norm > limit else vector


def _rotation(angle: float) -> np.ndarray:
    return np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


def goal_keypoints(pusht: gym.Env) -> np.ndarray:
    """The 8 keypoints of the block at the goal pose (the pose the coverage is measured against)."""
    local = np.array([tuple(v) for shape in pusht._block_shapes for v in shape.get_vertices()])
    goal = pusht.goal_pose
    return local @ _rotation(goal[2]).T + goal[:2]


def reset_state_for_pose(pusht: gym.Env, agent: np.ndarray, block_xy: np.ndarray, angle: float) -> np.ndarray:
    """The `reset_to_state` vector that leaves the block's origin at `block_xy` with `angle`.

    The env sets the position first and then the angle, which turns the block about its centre of
    gravity c and moves its origin; pre-compensating by R(angle)·c − c undoes that.
    """
    cog = np.asarray(pusht.block.center_of_gravity, dtype=np.float64)
    position = np.asarray(block_xy, dtype=np.float64) - cog + _rotation(angle) @ cog
    return np.array([agent[0], agent[1], position[0], position[1], angle], dtype=np.float64)


def curriculum_start(pusht: gym.Env, options: PushTOptions) -> np.ndarray:
    """A start with the block perturbed around the goal pose and the agent anywhere free, drawn from the env's own
    generator."""
    rng = pusht.np_random
    goal = pusht.goal_pose
    block = goal[:2] + rng.uniform(-1.0, 1.0, 2) * options.goal_start_position_noise
    angle = goal[2] + rng.uniform(-1.0, 1.0) * options.goal_start_angle_noise
    while True:  # keep the agent off the block so the start is physically valid
        agent = rng.integers(50, 450, 2)
        if np.linalg.norm(agent - block) > 120:
            return reset_state_for_pose(pusht, agent, block, angle)


def curriculum_reset(env: gym.Env, options: PushTOptions, seeded: tuple) -> tuple:
    """After a seeded reset of `env` (gym-pusht, or any wrapper of it) that returned `seeded`: with chance
    `goal_start_prob`, drawn from the env's generator, reset again to a curriculum start near the goal. Training's
    starts, which a dataset of its episodes replays (env/starts.py). The (observation, info) of the start kept."""
    pusht = env.unwrapped
    if options.goal_start_prob > 0 and pusht.np_random.random() < options.goal_start_prob:
        return env.reset(options={"reset_to_state": curriculum_start(pusht, options)})
    return seeded


class PushTWrapper(gym.Wrapper):
    """See the module docstring for the observation, action and reward mappings."""

    def __init__(self, env: gym.Env, options: PushTOptions | None = None) -> None:
        super().__init__(env)
        self.options = options or PushTOptions()
        self.options.validate()
        self.waypoint_mode = self.options.action_mode == "waypoint"
        obs_dim = (6 if self.options.features == "seed" else 24) + 2 * self.waypoint_mode
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._env_low = np.zeros(2)
        self._env_high = np.full(2, BOARD_SIZE)
        self._goal_keypoints: np.ndarray | None = None
        self._potential = 0.0
        self._target = np.zeros(2)  # waypoint mode: the PD target sent last, env units
        self._waypoint = np.zeros(2)
        self._steps = 0  # env steps since reset
        self._forced: np.ndarray | None = None  # a target the next step sends as it is (force_target)

    @property
    def pusht(self) -> gym.Env:
        return self.env.unwrapped

    def env_action(self, action: np.ndarray) -> np.ndarray:
        """[-1, 1]² → the absolute PD target in env units [0, 512]², float32."""
        return scale_to_range(np.clip(action, -1.0, 1.0), self._env_low, self._env_high).astype(np.float32)

    def unit_action(self, env_action: np.ndarray) -> np.ndarray:
        """Env units → [-1, 1] (inverse of `env_action`)."""
        return scale_to_unit(env_action, self._env_low, self._env_high).astype(np.float32)

    def observation(self, keypoints: np.ndarray) -> np.ndarray:
        """The normalised observation; `keypoints` are the block's current 8 keypoints (env units)."""
        pusht = self.pusht
        agent = np.asarray(pusht.agent.position, dtype=np.float64)
        block = np.asarray(pusht.block.position, dtype=np.float64)
        angle = float(pusht.block.angle)
        parts = [agent / (BOARD_SIZE / 2) - 1.0, block / (BOARD_SIZE / 2) - 1.0, [np.sin(angle), np.cos(angle)]]
        if self.options.features == "rich":
            velocity = np.clip(np.asarray(pusht.agent.velocity) / VELOCITY_SCALE, -1.0, 1.0)
            offsets = (keypoints - self._goal_keypoints) / BOARD_SIZE
            parts += [velocity, offsets.ravel()]
        if self.waypoint_mode:
            parts.append(self._target / (BOARD_SIZE / 2) - 1.0)
        return np.clip(np.concatenate(parts), -1.0, 1.0).astype(np.float32)

    def _compute_potential(self, keypoints: np.ndarray) -> float:
        opts = self.options
        if opts.shaping_keypoints == 0.0 and opts.shaping_agent_block == 0.0:
            return 0.0
        pusht = self.pusht
        keypoint_distance = np.linalg.norm(keypoints - self._goal_keypoints, axis=1).mean()
        agent_block = np.linalg.norm(np.asarray(pusht.agent.position) - np.asarray(pusht.block.position))
        return -(opts.shaping_keypoints * keypoint_distance + opts.shaping_agent_block * agent_block) / BOARD_SIZE

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        seeded = self.env.reset(seed=seed, options=options)
        _, info = seeded if (options or {}).get("reset_to_state") is not None else curriculum_reset(
            self.env, self.options, seeded)
        self._steps = 0
        self._target = np.asarray(self.pusht.agent.position, dtype=np.float64)
        self._waypoint = self._target.copy()
        self._forced = None
        if self._goal_keypoints is None:
            self._goal_keypoints = goal_keypoints(self.pusht)
        keypoints = block_keypoints(self.pusht)
        self._potential = self._compute_potential(keypoints)
        info = dict(info, raw_reward=0.0, coverage=float(self.pusht._get_coverage()))
        return self.observation(keypoints), info

    @property
    def at_decision(self) -> bool:
        """Whether the next step reads the action (always outside waypoint mode)."""
        return self._steps % self.options.decision_steps == 0

    def next_target(self, action: np.ndarray, waypoint: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(PD target, waypoint) this step would send for `action`, changing nothing: the collector asks it what a
        clean action would have sent while a perturbed one is executed. `waypoint` replaces the current one between
        decisions (the clean rollout's own waypoint). Env units, float64."""
        if not self.waypoint_mode:
            return self.env_action(action).astype(np.float64), self._waypoint
        opts = self.options
        waypoint = self._waypoint if waypoint is None else waypoint
        if self._steps % opts.decision_steps == 0:
            if opts.waypoint_reach > 0:
                offset = opts.waypoint_reach * np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
                waypoint = np.clip(self._target + offset, 0.0, BOARD_SIZE)
            else:
                waypoint = self.env_action(action).astype(np.float64)
        target = self._target + clip_norm(waypoint - self._target, opts.target_speed)
        if opts.max_lead > 0:
            agent = np.asarray(self.pusht.agent.position, dtype=np.float64)
            target = agent + clip_norm(target - agent, opts.max_lead)
        return np.clip(target, 0.0, BOARD_SIZE), waypoint

    def force_target(self, target: np.ndarray) -> None:
        """Make the next step send `target` (env units) whatever its action, and carry on from it: another
        controller (a learner during a relabelling burst) takes one step, the policy's own state follows."""
        self._forced = np.clip(np.asarray(target, dtype=np.float64), 0.0, BOARD_SIZE)

    def target_for(self, action: np.ndarray) -> np.ndarray:
        """The PD target this step sends for `action` (env units, float32); advances the waypoint state."""
        if self._forced is not None:
            self._target = self._waypoint = self._forced
            self._forced = None
            return self._target.astype(np.float32)
        if not self.waypoint_mode:
            return self.env_action(action)
        self._target, self._waypoint = self.next_target(action)
        return self._target.astype(np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        target = self.target_for(action)
        self._steps += 1
        _, raw_reward, terminated, truncated, info = self.env.step(target)
        opts = self.options
        keypoints = block_keypoints(self.pusht)
        potential = self._compute_potential(keypoints)
        reward = (float(raw_reward) - opts.step_cost + opts.success_bonus * float(info["is_success"])
                  + opts.shaping_gamma * potential - self._potential)
        self._potential = potential
        info = dict(info, raw_reward=float(raw_reward), env_action=target)
        return self.observation(keypoints), reward, terminated, truncated, info


def make_env(env_id: str = PUSHT_ENV_ID, options: PushTOptions | None = None,
             render_mode: str = "rgb_array", decisions: bool = False, **pusht_kwargs) -> gym.Env:
    """PushT behind `PushTWrapper`, or any other Box env with actions rescaled to [-1, 1].

    `decisions=True` (training) makes one `step` a whole decision of `options.decision_steps` env steps
    (`DecisionWrapper`); otherwise every `step` is one env step, so rollouts record every frame.
    """
    if env_id == PUSHT_ENV_ID:
        import gym_pusht  # noqa: F401  (registers the environment)

        base = gym.make(env_id, obs_type="state", render_mode=render_mode,
                        max_episode_steps=MAX_EPISODE_STEPS, **pusht_kwargs)
        env = PushTWrapper(base, options)
        if decisions and env.options.decision_steps > 1:
            return DecisionWrapper(env, env.options.decision_steps, env.options.shaping_gamma)
        return env
    env = gym.make(env_id)
    if not isinstance(env.action_space, gym.spaces.Box) or not isinstance(env.observation_space, gym.spaces.Box):
        raise ValueError(f"{env_id} must have Box observation and action spaces")
    env = gym.wrappers.RescaleAction(env, np.float32(-1.0), np.float32(1.0))  # float32 bounds: no dtype warning
    return gym.wrappers.TransformObservation(
        env, lambda o: np.asarray(o, dtype=np.float32),
        gym.spaces.Box(-np.inf, np.inf, env.observation_space.shape, np.float32))
