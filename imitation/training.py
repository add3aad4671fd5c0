"""The training loop every learner shares: seeded batches, AdamW with warm-up and cosine decay, optional EMA weights,
and checkpoints to resume from.

Learners differ only in their network and their loss; sharing the loop means two learners trained on one dataset
differ in nothing else, and one config field changes the budget of all of them. A long judge job can be killed and
run again: its training continues from the last checkpoint and ends with the weights an uninterrupted run gets.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm import tqdm

from common import interrupts
from common.files import CheckpointError, atomic_save, load_file
from datasets_io.readers import Demonstration
from imitation.normalizer import RangeNormalizer
from imitation.windows import dataset_windows

CHECKPOINT_FORMAT = "pusht_sac.learner_training/1"
CHECKPOINT_EVERY = 1000  # steps between checkpoints: a few seconds of writing against minutes of training

LossFn = Callable[[nn.Module, torch.Tensor, torch.Generator], torch.Tensor]
# (model, raw observations, scaled target chunks, generator) → loss
SampleLoss = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]
# Told every step `train` takes, a resumed run's earlier ones first (None: nobody asks): a judge running many jobs
# counts them all in one bar (imitation/judge.py) without every learner's fit passing a counter down.
step_counter: ContextVar[Callable[[int], None] | None] = ContextVar("step_counter", default=None)


@dataclass(frozen=True)
class LearnerConfig:
    """What every chunked learner shares: its input/output shape and its training budget."""

    n_obs: int = 2  # observation frames in (Diffusion Policy's n_obs_steps)
    horizon: int = 16  # actions predicted; the controller executes the first `exec_horizon`
    steps: int = 20_000  # gradient steps, whatever the dataset's size: datasets are compared at equal effort
    batch_size: int = 256
    lr: float = 1e-3  # AdamW peak, after a linear warm-up, cosine-decayed to 0
    warmup_steps: int = 500
    weight_decay: float = 1e-6
    ema_decay: float = 0.0  # > 0: evaluate an exponential moving average of the weights
    seed: int = 0
    device: str = "cpu"
    # The budget `dataset_report.py --imitation` trains for, where one beyond `steps` is measured: the one whose
    # figure is the best measured. None: both it and `--quick` use `steps`.
    # A class constant, not a field, so that stored judge jobs keep their keys.
    full_steps: ClassVar[int | None] = None

    @property
    def training_steps(self) -> int:
        """Every gradient step a fit takes, all its stages: what a judge's progress counts."""
        return self.steps


def _warmup_cosine(warmup: int, total: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return factor


def _resume(path: Path | None, config: LearnerConfig, n_samples: int) -> dict | None:
    """The training state stored at `path` if it belongs to this very run (same config and data size), else None."""
    if path is None or not path.is_file():
        return None
    try:
        state = load_file(path)
    except CheckpointError:
        return None  # written atomically, so only a foreign file lands here: start afresh and replace it
    if state["format"] != CHECKPOINT_FORMAT or state["config"] != asdict(config) or state["samples"] != n_samples:
        return None
    return state


def train(model: nn.Module, loss_fn: LossFn, n_samples: int, config: LearnerConfig, desc: str,
          progress: bool = True, checkpoint: Path | None = None,
          checkpoint_every: int = CHECKPOINT_EVERY) -> tuple[nn.Module, dict]:
    """Fit `model` on random batches of sample indices; returns the weights to evaluate and a training record.

    `loss_fn(model, indices, generator)` computes a batch's loss; the generator is the one source of randomness
    (batches and any noise), seeded by `config.seed`, so the same call gives the same weights. It lives on the CPU,
    the model on `config.device`. With `checkpoint`, every `checkpoint_every` steps and at the end the whole training
    state (weights, optimiser, schedule, EMA, RNG states, step) is written there atomically, and a call that finds
    one of the same run continues from it: on the CPU the final weights are bitwise those of an uninterrupted run.
    """
    model.to(config.device)
    generator = torch.Generator().manual_seed(config.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, _warmup_cosine(config.warmup_steps, config.steps))
    ema = (AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(config.ema_decay), use_buffers=True)
           if config.ema_decay > 0 else None)
    start, spent, cpu_spent, window, window_loss, last_mean = 0, 0.0, 0.0, 500, torch.zeros(()), float("nan")
    if (state := _resume(checkpoint, config, n_samples)) is not None:
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        if ema is not None:
            ema.load_state_dict(state["ema"])
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        start, spent, cpu_spent = state["step"], state["seconds"], state["cpu_seconds"]
        window_loss, last_mean = state["window_loss"], state["last_mean"]

    def save(step: int) -> None:
        atomic_save({"format": CHECKPOINT_FORMAT, "config": asdict(config), "samples": n_samples, "step": step,
                     "seconds": spent + time.perf_counter() - started,
                     "cpu_seconds": cpu_spent + time.process_time() - cpu_started, "model": model.state_dict(),
                     "optimiser": optimiser.state_dict(), "schedule": schedule.state_dict(),
                     "ema": ema.state_dict() if ema is not None else None, "generator": generator.get_state(),
                     "torch_rng": torch.get_rng_state(), "window_loss": window_loss, "last_mean": last_mean},
                    checkpoint)

    started, cpu_started = time.perf_counter(), time.process_time()
    count = step_counter.get() or (lambda _steps: None)
    count(start)
    model.train()
    with tqdm(range(start, config.steps), desc=desc, unit="step", initial=start, total=config.steps,
              disable=not progress or None, mininterval=1.0) as bar:
        for step in bar:
            interrupts.check()
            index = torch.randint(n_samples, (config.batch_size,), generator=generator)
            loss = loss_fn(model, index, generator)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            schedule.step()
            if ema is not None:
                ema.update_parameters(model)
            # one running sum, read every `window` steps: no host sync a step, and no list of per-step tensors
            # (each kept 0-d tensor held ~60 KB here)
            window_loss = loss.detach() if step % window == 0 else window_loss + loss.detach()
            if step % window == window - 1 or step == config.steps - 1:
                last_mean = window_loss.item() / (step % window + 1)
                bar.set_postfix(loss=f"{last_mean:.4f}")
            if checkpoint is not None and ((step + 1) % checkpoint_every == 0 or step + 1 == config.steps):
                save(step + 1)
            count(1)
    trained = ema.module if ema is not None else model
    trained.eval()
    seconds, cpu_seconds = spent + time.perf_counter() - started, cpu_spent + time.process_time() - cpu_started
    # wall and CPU time: on a shared machine the CPU time is what one core spent
    record = {"config": asdict(config), "samples": n_samples, "final_loss": last_mean, "seconds": seconds,
              "cpu_seconds": cpu_seconds, "ms_per_step": 1000 * seconds / config.steps,
              "cpu_ms_per_step": 1000 * cpu_seconds / config.steps, "resumed_at": start}
    return trained, record


def fit_state_learner(episodes: Sequence[Demonstration], config: LearnerConfig,
                      build: Callable[[RangeNormalizer, RangeNormalizer], nn.Module], sample_loss: SampleLoss,
                      desc: str, progress: bool, work_dir: Path | None = None) -> tuple[nn.Module, dict]:
    """What the state learners share: every imitable window of `episodes`, the range scalings fitted on them,
    the model `build(obs_norm, act_norm)` makes, and `train` on `sample_loss` of its batches (checkpointed in
    `work_dir` when given)."""
    torch.manual_seed(config.seed)
    obs, actions = dataset_windows(episodes, config.n_obs, config.horizon)
    policy = build(RangeNormalizer.fit(obs, config.n_obs), RangeNormalizer.fit(actions, config.horizon))
    policy.to(config.device)
    obs_t = torch.as_tensor(obs, device=config.device)
    target_t = policy.act_norm(torch.as_tensor(actions, device=config.device))

    def loss(model: nn.Module, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        index = index.to(config.device)
        return sample_loss(model, obs_t[index], target_t[index], generator)

    return train(policy, loss, len(obs), config, desc, progress, work_dir / "train.pt" if work_dir else None)
