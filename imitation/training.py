"""The training loop every learner shares: seeded batches, AdamW with warm-up and cosine decay, optional EMA weights.

Learners differ only in their network and their loss; sharing the loop means two learners trained on one dataset
differ in nothing else, and one config field changes the budget of all of them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm import tqdm

from datasets_io.readers import Demonstration
from imitation.normalizer import RangeNormalizer
from imitation.windows import dataset_windows

LossFn = Callable[[nn.Module, torch.Tensor, torch.Generator], torch.Tensor]
# (model, raw observations, scaled target chunks, generator) → loss
SampleLoss = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


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


def _warmup_cosine(warmup: int, total: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return factor


def train(model: nn.Module, loss_fn: LossFn, n_samples: int, config: LearnerConfig, desc: str,
          progress: bool = True) -> tuple[nn.Module, dict]:
    """Fit `model` on random batches of sample indices; returns the weights to evaluate and a training record.

    `loss_fn(model, indices, generator)` computes a batch's loss; the generator is the one source of randomness
    (batches and any noise), seeded by `config.seed`, so the same call gives the same weights. It lives on the CPU,
    the model on `config.device`.
    """
    model.to(config.device)
    generator = torch.Generator().manual_seed(config.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, _warmup_cosine(config.warmup_steps, config.steps))
    ema = (AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(config.ema_decay), use_buffers=True)
           if config.ema_decay > 0 else None)
    started, window, window_loss, last_mean = time.perf_counter(), 500, torch.zeros(()), float("nan")
    model.train()
    with tqdm(range(config.steps), desc=desc, unit="step", disable=not progress or None, mininterval=1.0) as bar:
        for step in bar:
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
    trained = ema.module if ema is not None else model
    trained.eval()
    record = {"config": asdict(config), "samples": n_samples, "final_loss": last_mean,
              "seconds": time.perf_counter() - started}
    return trained, record


def fit_state_learner(episodes: Sequence[Demonstration], config: LearnerConfig,
                      build: Callable[[RangeNormalizer, RangeNormalizer], nn.Module], sample_loss: SampleLoss,
                      desc: str, progress: bool) -> tuple[nn.Module, dict]:
    """What the state learners share: every imitable window of `episodes`, the range scalings fitted on them,
    the model `build(obs_norm, act_norm)` makes, and `train` on `sample_loss` of its batches."""
    torch.manual_seed(config.seed)
    obs, actions = dataset_windows(episodes, config.n_obs, config.horizon)
    policy = build(RangeNormalizer.fit(obs, config.n_obs), RangeNormalizer.fit(actions, config.horizon))
    policy.to(config.device)
    obs_t = torch.as_tensor(obs, device=config.device)
    target_t = policy.act_norm(torch.as_tensor(actions, device=config.device))

    def loss(model: nn.Module, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        index = index.to(config.device)
        return sample_loss(model, obs_t[index], target_t[index], generator)

    return train(policy, loss, len(obs), config, desc, progress)
