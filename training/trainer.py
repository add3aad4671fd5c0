"""The training loop: env, agent and buffer from the config, episodes of experience and gradient updates,
periodic evaluation and checkpoints, and how a run ends (done, interrupted, a numerical fault, a failed write)."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from common import interrupts
from common.cli import EXIT_INTERRUPTED, EXIT_WRITE_FAILED, counted, first_line
from common.files import WriteError, atomic_save, guarded_write
from env.decisions import steps_per_decision
from env.pusht_wrapper import make_env
from env.starts import episode_seed
from protocol.checkpoints import checkpoint_name, prune_checkpoints
from protocol.pusht_eval import EVAL_START_SEED, EpisodeTracker, eval_env_options, run_episode, summarize
from sac import ReplayBuffer, SACAgent
from sac.n_step import NStepAggregator, Transition
from sac.utils import seed_everything
from training.checks import check_device, check_env, check_memory, slow_bf16_warning
from training.config import ConfigError, TrainConfig
from training.logger import TrainingLogger
from training.run_folders import claimed, discard_previous_run, discard_unsaved_run
from training.run_state import Counters, changed_settings, check_compatible, checkpoint_state, latest_state, restore
from training.threads import ThreadTuner

EXIT_NUMERICAL_FAULT = 1


class NumericalFault(RuntimeError):
    pass


BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"  # the ETA is in the postfix


def eta_text(done: float, total: float, learning_from: tuple[float, float] | None, now: float) -> str:
    """Time left at the learning phase's own pace: `learning_from` is (progress, time) where it began, None during
    the warm-up. The random warm-up steps run about ten times faster than learning ones, so an estimate from them
    (tqdm's) is an order of magnitude short."""
    if learning_from is None:
        return "after warm-up"
    if done <= learning_from[0] or now <= learning_from[1]:
        return "?"  # nothing learned at yet to measure
    rate = (done - learning_from[0]) / (now - learning_from[1])
    return tqdm.format_interval(max(total - done, 0) / rate)


def decayed_lr(lr: float, step: int, decay_from: int, decay_until: int, final_fraction: float) -> float:
    """lr until `decay_from` env steps, then linearly down to lr × final_fraction at `decay_until`: the late updates
    take smaller steps, so the policy settles instead of swinging between evaluations."""
    progress = min(max(step - decay_from, 0) / (decay_until - decay_from), 1.0)
    return lr * (1.0 - progress * (1.0 - final_fraction))


class Trainer:
    """One training run: env, agent, buffer and counters; `train` runs it to its end."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        if config.threads:
            torch.set_num_threads(config.threads)
        # threads 0: the count measured fastest as the run goes (training/threads.py)
        self.threads = (ThreadTuner((torch.get_num_threads(), 1)) if not config.threads
                        and torch.get_num_threads() > 1 else None)
        config.env.shaping_gamma = config.sac.gamma  # the potential shaping stays exact with the agent's γ
        check_device(config.device)
        check_env(config.env_id)
        if warning := slow_bf16_warning(config.sac.bf16, config.device):
            tqdm.write(f"warning: {warning}", file=sys.stderr)
        seed_everything(config.seed)
        self.env = make_env(config.env_id, config.env, decisions=True)
        self.eval_env = make_env(config.env_id, eval_env_options(config.env))
        obs_dim = int(np.prod(self.env.observation_space.shape))
        act_dim = int(np.prod(self.env.action_space.shape))
        # A decision spans k env steps (the env says how many): the next one is bootstrapped with γ^k.
        hp = replace(config.sac, gamma=config.sac.gamma ** steps_per_decision(self.env))
        check_memory(hp, config.buffer_size, config.device, obs_dim, act_dim)
        try:
            self.agent = SACAgent(obs_dim, act_dim, hp, config.device)
            self.buffer = ReplayBuffer(obs_dim, act_dim, config.buffer_size, config.device, seed=config.seed,
                                       discount=hp.gamma)
        except (MemoryError, RuntimeError) as err:  # the estimate fit, the allocation still failed
            if not isinstance(err, (MemoryError, torch.cuda.OutOfMemoryError)) and "allocate" not in str(err):
                raise
            raise ConfigError(f"could not allocate the networks (hidden_dim={hp.hidden_dim}) and replay buffer "
                              f"(buffer_size={config.buffer_size}) on {config.device} ({first_line(err)}); lower "
                              f"hidden_dim or buffer_size") from None
        # Agent steps wait here until their n-step transition is complete; empty between episodes (checkpoints).
        self.n_step = NStepAggregator(config.n_step, hp.gamma)
        self.counters = Counters()
        self.last_checkpoint_step = 0
        self.last_checkpoint_time = 0.0  # time.monotonic() of the last checkpoint, or of the run's start
        self.logger: TrainingLogger | None = None

    # ---- checkpoints -------------------------------------------------------------------------
    def resume(self) -> Path | None:
        """Continue from the newest readable checkpoint, if any (ConfigError for one that does not fit)."""
        found = latest_state(self.config)
        if found is None:
            return None
        path, state = found
        check_compatible(self.config, state, self.agent, path)
        if changed := changed_settings(self.config, state):
            tqdm.write(f"note: resuming {path} with settings that differ from its run's: {'; '.join(changed)} (a new "
                       f"run needs its own checkpoint_dir and log_dir, or --no-resume --overwrite)", file=sys.stderr)
        self.counters = restore(state, self.agent, self.buffer)
        self.last_checkpoint_step = self.counters.global_step
        return path

    def save_checkpoint(self) -> Path:
        """Refuses to save non-finite weights, so the newest checkpoint is always a good one.

        A failed write (full disk, I/O error) raises `WriteError`; the previous checkpoints are untouched.
        """
        self.check_finite_parameters()
        directory, step = self.config.checkpoint_dir, self.counters.global_step
        path = Path(directory) / checkpoint_name(step)
        started = time.perf_counter()
        with guarded_write(path, f"the previous checkpoints in {directory!r} are intact: set checkpoint_dir to a "
                                 f"disk with space, or free space, and run the same command to resume"):
            atomic_save(checkpoint_state(self.config, self.agent, self.buffer, self.counters), path)
        prune_checkpoints(directory, self.config.keep_checkpoints)
        self.last_checkpoint_step, self.last_checkpoint_time = step, time.monotonic()
        tqdm.write(f"checkpoint {path} at env step {step}: {path.stat().st_size / 1e6:.1f} MB in "
                   f"{time.perf_counter() - started:.1f} s")
        return path

    def checkpoint_due(self) -> bool:
        """After every `checkpoint_every` episodes, or `checkpoint_every_steps` env steps when that is set, and
        after `checkpoint_every_minutes` of wall-clock time since the last one: a killed run loses at most that."""
        cfg = self.config
        minutes = (time.monotonic() - self.last_checkpoint_time) / 60
        if cfg.checkpoint_every_minutes and minutes >= cfg.checkpoint_every_minutes:
            return True
        if cfg.checkpoint_every_steps:
            return self.counters.global_step - self.last_checkpoint_step >= cfg.checkpoint_every_steps
        return self.counters.episode % cfg.checkpoint_every == 0

    def check_finite_parameters(self) -> None:
        tensors = [*self.agent.actor.parameters(), *self.agent.critic.parameters(), self.agent.log_alpha]
        if not all(bool(torch.isfinite(t).all()) for t in tensors):
            raise NumericalFault(f"non-finite network weights at env step {self.counters.global_step}")

    # ---- training ----------------------------------------------------------------------------
    def counts_env_steps(self) -> bool:
        """True when the env-step cap, not the episode count, will end the run: the progress bar's unit."""
        cfg = self.config
        longest = self.eval_env.spec.max_episode_steps if self.eval_env.spec else None
        return cfg.max_env_steps > 0 and (longest is None or cfg.episodes * longest > cfg.max_env_steps)

    def finished(self) -> bool:
        cap = self.config.max_env_steps
        return self.counters.episode >= self.config.episodes or (cap > 0 and self.counters.global_step >= cap)

    def evaluate(self) -> dict:
        records = [run_episode(self.eval_env, lambda o: self.agent.act(o, deterministic=True), EVAL_START_SEED + i)
                   for i in range(self.config.eval_episodes)]
        return summarize(records)

    def run_episode(self) -> bool:
        """One training episode; returns False if a stop signal or the step cap cut it short."""
        cfg, counters = self.config, self.counters
        obs, info = self.env.reset(seed=episode_seed(cfg.seed, counters.episode))
        tracker = EpisodeTracker(counters.episode, info)  # the raw reward's totals, as the protocol counts them
        train_return, done = 0.0, False
        while not done:
            if interrupts.requested() or (cfg.max_env_steps and counters.global_step >= cfg.max_env_steps):
                self.store(self.n_step.flush())  # bootstrapped: the episode was cut short, not ended
                return False
            started = time.perf_counter()
            if counters.global_step < cfg.start_steps:
                action = np.random.uniform(-1.0, 1.0, self.agent.act_dim).astype(np.float32)
            else:
                action = self.agent.act(obs)
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            self.store(self.n_step.push(obs, action, reward * cfg.reward_scale, next_obs, terminated, truncated))
            obs = next_obs
            steps = int(info.get("env_steps", 1))
            counters.global_step += steps
            counters.decisions += 1
            tracker.step(reward, info)
            train_return += float(reward)
            done = terminated or truncated
            self.train_step()
            if self.threads is not None and counters.global_step >= cfg.update_after:
                if (count := self.threads.observe(time.perf_counter() - started)) is not None:
                    torch.set_num_threads(count)
            if cfg.eval_every and (counters.global_step // cfg.eval_every
                                   > (counters.global_step - steps) // cfg.eval_every):
                self.logger.evaluation(self.evaluate(), counters.global_step)
        record = tracker.record()
        counters.episode += 1
        counters.recent_returns.append(tracker.total)
        counters.recent_successes.append(record.success)
        self.logger.episode(tracker.total, float(np.mean(counters.recent_returns)), train_return, tracker.env_steps,
                            record.success, tracker.max_coverage, counters.global_step)
        return True

    def store(self, transitions: list[Transition]) -> None:
        for t in transitions:
            self.buffer.add(t.obs, t.action, t.reward, t.next_obs, t.terminated, t.discount)

    def train_step(self) -> None:
        cfg, counters = self.config, self.counters
        if counters.global_step < cfg.update_after or counters.decisions % cfg.update_every:
            return
        if cfg.lr_decay_from:  # a pure function of the step, so a resumed run continues the same schedule
            self.agent.set_lr(decayed_lr(cfg.sac.lr, counters.global_step, cfg.lr_decay_from, cfg.max_env_steps,
                                         cfg.lr_decay_to))
        for _ in range(cfg.num_updates):
            metrics = self.agent.update(self.buffer.sample(cfg.batch_size))
            counters.updates += 1
            if counters.updates % cfg.log_every == 0:
                values = {k: float(v) for k, v in metrics.items()}
                bad = [k for k, v in values.items() if not math.isfinite(v)]
                if bad:
                    raise NumericalFault(f"non-finite {', '.join(bad)} at env step {counters.global_step}")
                self.logger.updates(values, counters.global_step)

    def train(self, resume: bool, overwrite: bool = False, banner: str | None = None) -> int:
        """Run to the end, holding the run's folders (ConfigError for a busy folder or any bad input, with
        nothing on disk changed). `banner`: the run's first line, once its folders are its own."""
        resumed_from: list[Path | None] = [None]

        def prepare() -> None:
            if not resume:
                discard_previous_run(self.config, overwrite)
            resumed_from[0] = self.resume() if resume else None
            if resume and resumed_from[0] is None and (stale := discard_unsaved_run(self.config)):
                tqdm.write(f"removed {counted(len(stale), 'TensorBoard file')} of a run killed before its first "
                           f"checkpoint: this one starts again from step 0")

        with claimed(self.config, prepare), interrupts.handled():
            if banner:
                tqdm.write(banner, file=sys.stderr)
            return self._train(resumed_from[0])

    def _train(self, resumed_from: Path | None) -> int:
        cfg, counters = self.config, self.counters
        if resumed_from is not None:
            tqdm.write(f"resumed from {resumed_from} at env step {counters.global_step}, episode {counters.episode}")
        self.logger = TrainingLogger(cfg.log_dir, counters.global_step if resumed_from else None)
        by_steps = self.counts_env_steps()
        progress = (tqdm(total=cfg.max_env_steps, initial=counters.global_step, unit="step", unit_scale=True,
                         dynamic_ncols=True, bar_format=BAR_FORMAT) if by_steps
                    else tqdm(total=cfg.episodes, initial=counters.episode, unit="ep", dynamic_ncols=True,
                              bar_format=BAR_FORMAT))
        clock_step, clock_time = counters.global_step, time.perf_counter()
        self.last_checkpoint_time = time.monotonic()  # the wall-clock interval counts from here, not from set-up
        warm_up = max(cfg.start_steps, cfg.update_after)  # env steps of random actions and no updates
        learning_from = (progress.n, clock_time) if counters.global_step >= warm_up else None
        progress.set_postfix({"ETA": eta_text(progress.n, progress.total, learning_from, clock_time)})
        try:
            while not self.finished():
                complete = self.run_episode()  # one cut short counts its steps on the bar, not as an episode
                progress.update(min(counters.global_step, cfg.max_env_steps) - progress.n if by_steps
                                else int(complete))
                if not complete:
                    break
                now = time.perf_counter()
                progress.set_postfix({"ETA": eta_text(progress.n, progress.total, learning_from, now),
                                      "ep" if by_steps else "step":
                                      counters.episode if by_steps else counters.global_step,
                                      "mean100": f"{np.mean(counters.recent_returns):.1f}",
                                      "success100": f"{np.mean(counters.recent_successes):.2f}"})
                if learning_from is None and counters.global_step >= warm_up:
                    learning_from = (progress.n, now)
                self.logger.speed((counters.global_step - clock_step) / (now - clock_time), counters.global_step,
                                  torch.get_num_threads())
                clock_step, clock_time = counters.global_step, now
                if self.checkpoint_due():
                    self.save_checkpoint()
            saved = self.last_checkpoint_step == counters.global_step > 0  # the last episode's periodic one
            path = (Path(cfg.checkpoint_dir) / checkpoint_name(counters.global_step) if saved
                    else self.save_checkpoint())
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
            self.logger.close()
            progress.close()
        if interrupts.requested():
            print(f"interrupted at env step {counters.global_step}; saved {path}. Run the same command to resume.",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        tqdm.write(f"done: {counted(counters.global_step, 'env step')}, {counted(counters.episode, 'episode')}; "
                   f"checkpoint {path}")
        return 0
