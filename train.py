"""Train SAC on PushT (or any gymnasium Box env): resumable, checkpointed, logged to TensorBoard.

    python train.py [--config FILE] [--set KEY=VALUE ...] [--no-resume [--overwrite]]

Exit codes: 0 done, 1 numerical fault, 2 bad input (nothing on disk changed; also a checkpoint_dir or log_dir
that another train.py run is using: each run holds a lock file, .train_lock, in both), 74 a checkpoint could not
be written (e.g. full disk; the previous checkpoint is intact), 130 interrupted after saving.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from collections import deque
from dataclasses import asdict, replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from cli_common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_WRITE_FAILED
from common.locks import FileLock, LockHeld
from config import ConfigError, TrainConfig, load_config
from env.pusht_wrapper import PUSHT_ENV_ID, make_env
from eval_protocol import EVAL_START_SEED, eval_env_options, run_episode, summarize
from policy_io import TRAIN_FORMAT, policy_payload
from sac import ReplayBuffer, SACAgent, SACHyperParams
from sac.checkpoint import (
    CheckpointError,
    NotACheckpointError,
    WriteError,
    atomic_save,
    checkpoint_name,
    ensure_writable_dir,
    guarded_write,
    list_checkpoints,
    load_latest,
    prune_checkpoints,
    remove_created_dirs,
    remove_stale_temp_files,
)
from sac.utils import rng_state, seed_everything, set_rng_state

EXIT_NUMERICAL_FAULT = 1
# Keys that fix the shape of what a checkpoint holds; resuming with other values is refused.
STRUCTURAL_KEYS = ("env_id", "hidden_dim", "buffer_size", "layer_norm", "crossq")
# One train.py run per folder: the lock file it holds in checkpoint_dir and log_dir (see common/locks.py).
LOCK_NAME = ".train_lock"


class NumericalFault(RuntimeError):
    pass


def episode_seed(run_seed: int, episode: int) -> int:
    """A fixed, well-mixed start seed for every training episode, so resumed runs replay them."""
    return int(np.random.SeedSequence([run_seed, episode]).generate_state(1)[0])


class Trainer:
    """The state of one training run: env, agent, buffer, counters and logging."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        if config.threads:
            torch.set_num_threads(config.threads)
        config.env.shaping_gamma = config.sac.gamma
        check_device(config.device)
        check_env(config.env_id)
        seed_everything(config.seed)
        self.env = make_env(config.env_id, config.env, decisions=True)
        self.eval_env = make_env(config.env_id, eval_env_options(config.env))
        obs_dim = int(np.prod(self.env.observation_space.shape))
        act_dim = int(np.prod(self.env.action_space.shape))
        # A decision spans decision_steps env steps: the next one is bootstrapped with γ^decision_steps.
        hp = replace(config.sac, gamma=config.sac.gamma ** decision_steps(config))
        check_memory(config, obs_dim, act_dim, hp)
        try:
            self.agent = SACAgent(obs_dim, act_dim, hp, config.device)
            self.buffer = ReplayBuffer(obs_dim, act_dim, config.buffer_size, config.device, seed=config.seed)
        except (MemoryError, RuntimeError) as err:  # the estimate fit, the allocation still failed
            if not isinstance(err, (MemoryError, torch.cuda.OutOfMemoryError)) and "allocate" not in str(err):
                raise
            raise ConfigError(f"could not allocate the networks (hidden_dim={hp.hidden_dim}) and replay buffer "
                              f"(buffer_size={config.buffer_size}) on {config.device} ({first_line(err)}); lower "
                              f"hidden_dim or buffer_size") from None
        self.global_step = 0  # env steps
        self.decisions = 0  # agent transitions (= env steps unless a decision spans several)
        self.episode = 0
        self.updates = 0
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.recent_successes: deque[bool] = deque(maxlen=100)
        self.last_checkpoint_step = 0
        self.stop_signal: int | None = None

    # ---- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "format": TRAIN_FORMAT,
            "config": self.config.to_dict(),
            "obs_dim": self.agent.obs_dim,
            "act_dim": self.agent.act_dim,
            "agent": self.agent.state_dict(),
            "buffer": self.buffer.state_dict(),
            "global_step": self.global_step,
            "decisions": self.decisions,
            "episode": self.episode,
            "updates": self.updates,
            "recent_returns": list(self.recent_returns),
            "recent_successes": list(self.recent_successes),
            "rng": rng_state(),
            "policy": policy_payload(self.agent.actor, self.config.env_id, asdict(self.config.env), self.global_step),
        }

    def load_state_dict(self, state: dict, path: Path) -> None:
        saved = state["config"]
        for key in STRUCTURAL_KEYS:
            if saved.get(key) != self.config.setting(key):
                raise ConfigError(
                    f"checkpoint {str(path)!r} was trained with {key}={saved.get(key)!r}, the config says "
                    f"{self.config.setting(key)!r}; use another checkpoint_dir "
                    f"(or --no-resume --overwrite to discard it)")
        if (state["obs_dim"], state["act_dim"]) != (self.agent.obs_dim, self.agent.act_dim):
            raise ConfigError(
                f"checkpoint {str(path)!r} has obs/action sizes {state['obs_dim']}/{state['act_dim']}, the env has "
                f"{self.agent.obs_dim}/{self.agent.act_dim}; use another checkpoint_dir (or --no-resume --overwrite to "
                f"discard it)")
        self.agent.load_state_dict(state["agent"])
        self.buffer.load_state_dict(state["buffer"])
        self.global_step, self.episode, self.updates = state["global_step"], state["episode"], state["updates"]
        self.decisions = state.get("decisions", self.global_step)
        self.recent_returns.extend(state["recent_returns"])
        self.recent_successes.extend(state.get("recent_successes", []))
        self.last_checkpoint_step = self.global_step
        set_rng_state(state["rng"])

    def save_checkpoint(self) -> Path:
        """Refuses to save non-finite weights, so the newest checkpoint is always a good one.

        A failed write (full disk, I/O error) raises `WriteError`; the previous checkpoints are untouched.
        """
        self.check_finite_parameters()
        directory = self.config.checkpoint_dir
        path = Path(directory) / checkpoint_name(self.global_step)
        started = time.perf_counter()
        with guarded_write(path, f"the previous checkpoints in {directory!r} are intact: set checkpoint_dir to a "
                                 f"disk with space, or free space, and run the same command to resume"):
            atomic_save(self.state_dict(), path)
        prune_checkpoints(directory, self.config.keep_checkpoints)
        self.last_checkpoint_step = self.global_step
        tqdm.write(f"checkpoint {path} at env step {self.global_step}: {path.stat().st_size / 1e6:.1f} MB in "
                   f"{time.perf_counter() - started:.1f} s")
        return path

    def checkpoint_due(self) -> bool:
        """After every `checkpoint_every` episodes, or `checkpoint_every_steps` env steps when that is set."""
        cfg = self.config
        if cfg.checkpoint_every_steps:
            return self.global_step - self.last_checkpoint_step >= cfg.checkpoint_every_steps
        return self.episode % cfg.checkpoint_every == 0

    def counts_env_steps(self) -> bool:
        """True when the env-step cap, not the episode count, will end the run: the progress bar's unit."""
        cfg = self.config
        longest = self.eval_env.spec.max_episode_steps if self.eval_env.spec else None
        return cfg.max_env_steps > 0 and (longest is None or cfg.episodes * longest > cfg.max_env_steps)

    def check_finite_parameters(self) -> None:
        tensors = [*self.agent.actor.parameters(), *self.agent.critic.parameters(), self.agent.log_alpha]
        if not all(bool(torch.isfinite(t).all()) for t in tensors):
            raise NumericalFault(f"non-finite network weights at env step {self.global_step}")

    def try_resume(self) -> Path | None:
        """Load the newest checkpoint that loads (warning about unreadable newer ones); None if there is none.

        Checkpoints none of which loads, or a file that is not a training checkpoint, are refused (ConfigError):
        starting afresh would later overwrite or prune them.
        """
        directory = self.config.checkpoint_dir
        elsewhere = f"move it out of {directory!r} or set checkpoint_dir to another folder"
        skipped: list[str] = []  # printed once the run goes ahead, so that a refusal stays one line
        try:
            found = load_latest(directory, self.config.device, strict=True, warn=skipped.append)
        except NotACheckpointError as err:
            raise ConfigError(f"{err}; {elsewhere}") from None
        except CheckpointError as err:
            raise ConfigError(f"{err}; nothing was changed: to start afresh {elsewhere}, or add --no-resume "
                              f"--overwrite to delete the earlier run's files") from None
        if found is None:
            return None
        path, state = found
        if state.get("format") != TRAIN_FORMAT:
            raise ConfigError(f"{str(path)!r} is a {state.get('format')!r} file, not a training checkpoint; "
                              f"{elsewhere}")
        self.load_state_dict(state, path)
        for message in skipped:
            tqdm.write(f"warning: {message}", file=sys.stderr)
        return path

    # ---- training ----------------------------------------------------------------------------
    def finished(self) -> bool:
        cap = self.config.max_env_steps
        return self.episode >= self.config.episodes or (cap > 0 and self.global_step >= cap)

    def evaluate(self) -> dict:
        records = [run_episode(self.eval_env, lambda o: self.agent.act(o, deterministic=True), EVAL_START_SEED + i)
                   for i in range(self.config.eval_episodes)]
        return summarize(records)

    def log_updates(self, writer: SummaryWriter, metrics: dict[str, torch.Tensor]) -> None:
        values = {k: float(v) for k, v in metrics.items()}
        bad = [k for k, v in values.items() if not math.isfinite(v)]
        if bad:
            raise NumericalFault(f"non-finite {', '.join(bad)} at env step {self.global_step}")
        step = self.global_step
        writer.add_scalar("Loss/critic1", values["loss_critic1"], step)
        writer.add_scalar("Loss/critic2", values["loss_critic2"], step)
        writer.add_scalar("Alpha", values["alpha"], step)
        writer.add_scalar("Q/mean_q1", values["mean_q1"], step)
        writer.add_scalar("Q/mean_q2", values["mean_q2"], step)
        if "loss_actor" in values:  # the last policy update's (policy_delay > 1 skips it on some updates)
            writer.add_scalar("Loss/actor", values["loss_actor"], step)
            writer.add_scalar("Loss/alpha", values["loss_alpha"], step)
            writer.add_scalar("Policy/log_prob", values["log_prob"], step)
            writer.add_scalar("Policy/entropy", -values["log_prob"], step)

    def run_episode(self, writer: SummaryWriter) -> bool:
        """One training episode; returns False if a stop signal or the step cap cut it short."""
        cfg = self.config
        obs, _ = self.env.reset(seed=episode_seed(cfg.seed, self.episode))
        raw_return, train_return, length, success, max_coverage = 0.0, 0.0, 0, False, 0.0
        done = False
        while not done:
            if self.stop_signal is not None or (cfg.max_env_steps and self.global_step >= cfg.max_env_steps):
                return False
            if self.global_step < cfg.start_steps:
                action = np.random.uniform(-1.0, 1.0, self.agent.act_dim).astype(np.float32)
            else:
                action = self.agent.act(obs)
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            self.buffer.add(obs, action, reward * cfg.reward_scale, next_obs, terminated)
            obs = next_obs
            steps = int(info.get("env_steps", 1))
            self.global_step += steps
            self.decisions += 1
            length += steps
            raw_return += float(info.get("raw_reward", reward))
            train_return += float(reward)
            success = success or bool(info.get("is_success", False))
            max_coverage = max(max_coverage, float(info.get("coverage", 0.0)))
            done = terminated or truncated
            self.train_step(writer)
            if cfg.eval_every and self.global_step // cfg.eval_every > (self.global_step - steps) // cfg.eval_every:
                summary = self.evaluate()
                writer.add_scalar("Eval/success_rate", summary["success_rate"], self.global_step)
                writer.add_scalar("Eval/mean_max_reward", summary["mean_max_reward"], self.global_step)
                writer.add_scalar("Eval/mean_max_coverage", summary["mean_max_coverage"], self.global_step)
                writer.add_scalar("Eval/mean_return", summary["mean_return"], self.global_step)
        self.episode += 1
        self.recent_returns.append(raw_return)
        self.recent_successes.append(success)
        writer.add_scalar("Reward/episode", raw_return, self.global_step)
        writer.add_scalar("Reward/mean_100", float(np.mean(self.recent_returns)), self.global_step)
        writer.add_scalar("Reward/episode_train", train_return, self.global_step)
        writer.add_scalar("Episode/length", length, self.global_step)
        writer.add_scalar("Episode/success", float(success), self.global_step)
        writer.add_scalar("Episode/max_coverage", max_coverage, self.global_step)
        return True

    def train_step(self, writer: SummaryWriter) -> None:
        cfg = self.config
        if self.global_step < cfg.update_after or self.decisions % cfg.update_every:
            return
        for _ in range(cfg.num_updates):
            metrics = self.agent.update(self.buffer.sample(cfg.batch_size))
            self.updates += 1
            if self.updates % cfg.log_every == 0:
                self.log_updates(writer, metrics)

    def discard_previous_run(self, overwrite: bool) -> None:
        """A fresh start never mixes with an earlier run's files: refuse, or delete them on --overwrite."""
        cfg = self.config
        old = list_checkpoints(cfg.checkpoint_dir) + sorted(Path(cfg.log_dir).glob("events.out.tfevents.*"))
        if old and not overwrite:
            raise ConfigError(f"{cfg.checkpoint_dir!r} or {cfg.log_dir!r} holds an earlier run; run without "
                              f"--no-resume to continue it, add --overwrite to delete it, or choose other folders")
        for path in old:
            path.unlink()

    def prepare_folders(self) -> list[Path]:
        """Create checkpoint_dir and log_dir and prove both writable; returns the folders created. On a
        failure, removes what it created first (a refused run leaves nothing behind)."""
        created: list[Path] = []
        for option in ("checkpoint_dir", "log_dir"):
            try:
                created += ensure_writable_dir(getattr(self.config, option))
            except OSError as err:
                remove_created_dirs(created)
                raise ConfigError(f"{option}: {err}; set {option} to a writable folder") from None
        return created

    def lock_folders(self) -> list[FileLock]:
        """Lock checkpoint_dir and log_dir (one lock when they are one folder) against a second train.py run."""
        cfg = self.config
        folders: dict[Path, list[str]] = {}
        for option in ("checkpoint_dir", "log_dir"):
            folders.setdefault(Path(getattr(cfg, option)).resolve(), []).append(option)
        locks: list[FileLock] = []
        for folder, options in folders.items():
            try:
                locks.append(FileLock(folder / LOCK_NAME).acquire())
                continue
            except LockHeld as held:
                holder = f"PID {held.pid}" if held.pid is not None else "PID unknown"
                problem = (f"another train.py run ({holder}) is using {' and '.join(options)} "
                           f"{getattr(cfg, options[0])!r}; wait for it to finish or set checkpoint_dir/log_dir to "
                           f"other folders")
            except OSError as err:
                problem = (f"cannot lock {str(folder / LOCK_NAME)!r} ({err.strerror or err}); set "
                           f"{'/'.join(options)} to another folder")
            for lock in locks:
                lock.release(undo=True)
            raise ConfigError(problem)
        return locks

    def train(self, resume: bool, overwrite: bool = False) -> int:
        """Run to the end; one train.py run per folder (ConfigError for a busy folder or any bad input, with
        nothing on disk changed)."""
        created = self.prepare_folders()
        try:
            locks = self.lock_folders()
        except ConfigError:
            remove_created_dirs(created)
            raise
        try:
            try:
                if not resume:
                    self.discard_previous_run(overwrite)
                resumed_from = self.try_resume() if resume else None
            except ConfigError:
                for lock in locks:
                    lock.release(undo=True)
                remove_created_dirs(created)
                raise
            # Holding the lock, no other process can be writing here: a temp file is a killed run's leftover.
            for stale in remove_stale_temp_files(self.config.checkpoint_dir):
                tqdm.write(f"removed {stale}, the unfinished checkpoint of a killed run")
            return self._train(resumed_from)
        finally:
            for lock in locks:
                lock.release()

    def _train(self, resumed_from: Path | None) -> int:
        cfg = self.config
        if resumed_from is not None:
            tqdm.write(f"resumed from {resumed_from} at env step {self.global_step}, episode {self.episode}")
        writer = SummaryWriter(cfg.log_dir, purge_step=self.global_step + 1 if resumed_from else None)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        by_steps = self.counts_env_steps()
        progress = (tqdm(total=cfg.max_env_steps, initial=self.global_step, unit="step", unit_scale=True,
                         dynamic_ncols=True) if by_steps
                    else tqdm(total=cfg.episodes, initial=self.episode, unit="ep", dynamic_ncols=True))
        clock_step, clock_time = self.global_step, time.perf_counter()
        try:
            while not self.finished():
                if not self.run_episode(writer):
                    break
                progress.update(min(self.global_step, cfg.max_env_steps) - progress.n if by_steps else 1)
                progress.set_postfix({"ep" if by_steps else "step": self.episode if by_steps else self.global_step,
                                      "mean100": f"{np.mean(self.recent_returns):.1f}",
                                      "success100": f"{np.mean(self.recent_successes):.2f}"})
                now = time.perf_counter()
                writer.add_scalar("Perf/env_steps_per_sec", (self.global_step - clock_step) / (now - clock_time),
                                  self.global_step)
                clock_step, clock_time = self.global_step, now
                if self.checkpoint_due():
                    self.save_checkpoint()
            saved = self.last_checkpoint_step == self.global_step > 0  # the last episode's periodic checkpoint
            path = Path(cfg.checkpoint_dir) / checkpoint_name(self.global_step) if saved else self.save_checkpoint()
        except WriteError as err:
            progress.close()
            print(f"error: {err}", file=sys.stderr)
            return EXIT_WRITE_FAILED
        except NumericalFault as fault:
            progress.close()
            print(f"error: {fault}; training stopped, the newest checkpoint in {cfg.checkpoint_dir} is the last "
                  f"good one (lower lr or enable grad_clip, then resume)", file=sys.stderr)
            return EXIT_NUMERICAL_FAULT
        finally:
            writer.close()
            progress.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.stop_signal is not None:
            print(f"interrupted at env step {self.global_step}; saved {path}. Run the same command to resume.",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        tqdm.write(f"done: {self.global_step} env steps, {self.episode} episodes; checkpoint {path}")
        return 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stop_signal = signum


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def check_device(device: str) -> None:
    """One line, before anything is built, for a CUDA device this machine does not have."""
    if device == "cpu":
        return
    if not torch.cuda.is_available():
        why = ("this torch build has no CUDA support" if torch.version.cuda is None else
               "no CUDA GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)")
        raise ConfigError(f"device {device!r} is not available: {why} (torch {torch.__version__}); set device=cpu")
    count = torch.cuda.device_count()
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise ConfigError(f"device {device!r} is not available: this machine has {count} CUDA GPU"
                          f"{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1}); set device to one of them")


def check_env(env_id: str) -> None:
    """One line, not a gymnasium traceback, for an env id that is not registered or that SAC cannot drive."""
    if env_id == PUSHT_ENV_ID:
        return
    if env_id.startswith("gym_pusht/"):
        import gym_pusht  # noqa: F401  (registers the namespace, so gymnasium can list its versions)
    hint = f"set env_id to {PUSHT_ENV_ID!r} or another continuous-control env such as 'Pendulum-v1'"
    try:
        probe = gym.make(env_id)
    except gym.error.UnregisteredEnv as err:
        raise ConfigError(f"env_id {env_id!r} is not a registered gymnasium environment ({first_line(err)}); "
                          f"{hint}") from None
    except (gym.error.Error, ImportError) as err:  # a missing dependency, an unimportable "module:Env" id
        raise ConfigError(f"env_id {env_id!r} could not be made ({type(err).__name__}: {first_line(err)}); "
                          f"install what it needs, or {hint}") from None
    try:
        wrong = [f"a {type(space).__name__} {part} space"
                 for part, space in (("observation", probe.observation_space), ("action", probe.action_space))
                 if not isinstance(space, gym.spaces.Box)]
    finally:
        probe.close()
    if wrong:
        raise ConfigError(f"env_id {env_id!r} has {' and '.join(wrong)}; SAC needs Box (continuous) observation and "
                          f"action spaces: {hint}")


def check_memory(config: TrainConfig, obs_dim: int, act_dim: int, hp: SACHyperParams) -> None:
    """Refuse networks and a replay buffer larger than the device's whole memory, before allocating them."""
    with torch.device("meta"):  # shapes only: builds the real modules without allocating
        shapes = SACAgent(obs_dim, act_dim, hp, "meta")
    actor = sum(p.numel() for p in shapes.actor.parameters())
    critic = sum(t.numel() for t in (*shapes.critic.parameters(), *shapes.critic.buffers()))
    # weights, gradients and Adam's two moments; the critics' target copy (none with crossq)
    network_bytes = 4 * (4 * actor + (4 if hp.crossq else 5) * critic)
    buffer_bytes = 4 * config.buffer_size * (2 * obs_dim + act_dim + 2)
    if config.device == "cpu":
        total, where = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's RAM"
    else:
        index = int(config.device.partition(":")[2] or 0)
        total, where = torch.cuda.get_device_properties(index).total_memory, f"{config.device}'s memory"
    if network_bytes + buffer_bytes > total:
        raise ConfigError(
            f"hidden_dim={hp.hidden_dim} and buffer_size={config.buffer_size} ask for about "
            f"{gib(network_bytes + buffer_bytes)} ({actor + critic:,} network parameters: {gib(network_bytes)} with "
            f"gradients, Adam state and targets; replay buffer {gib(buffer_bytes)}), more than the {gib(total)} of "
            f"{where}; lower hidden_dim or buffer_size")


def gib(n_bytes: int) -> str:
    """A byte count in binary units from MiB up: '0.2 MiB', '187.9 GiB', '48.0 EiB'."""
    size, unit = n_bytes / 2**20, "MiB"
    for bigger in ("GiB", "TiB", "PiB", "EiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:,.1f} {unit}"


def decision_steps(config: TrainConfig) -> int:
    """Env steps per agent decision: >1 only for PushT's waypoint mode."""
    return config.env.decision_steps if config.env_id == PUSHT_ENV_ID else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config file (default: the embedded default recipe)")
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="override config keys: one flag takes one or more pairs, and may be repeated; "
                             "dotted keys for the env section, e.g. --set lr=1e-4 env.step_cost=0.5")
    parser.add_argument("--no-resume", action="store_true",
                        help="start fresh; refused if checkpoint_dir or log_dir holds an earlier run, "
                             "unless --overwrite")
    parser.add_argument("--overwrite", action="store_true",
                        help="with --no-resume: delete the earlier run's checkpoints and TensorBoard files first")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = load_config(args.config, args.set)
        if args.overwrite and not args.no_resume:
            raise ConfigError("--overwrite only applies with --no-resume (a resumed run keeps its files)")
        return Trainer(config).train(resume=not args.no_resume, overwrite=args.overwrite)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
