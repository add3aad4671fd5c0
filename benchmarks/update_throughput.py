"""Gradient updates per second: our SACAgent.update vs Stable-Baselines3's SAC.train.

Both get the same network sizes, batch size, thread count and a replay buffer holding the same
random transitions; rounds alternate A B A B and the medians are compared.

    python benchmarks/update_throughput.py [--threads 2] [--rounds 6] [--updates 200] [--bf16]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np
import torch
from sb3_setup import make_sb3_sac

from env.pusht_wrapper import PushTOptions, make_env
from sac import ReplayBuffer, SACAgent
from training.config import TrainConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--updates", type=int, default=200, help="gradient steps per round")
    parser.add_argument("--transitions", type=int, default=20_000)
    parser.add_argument("--layer-norm", action="store_true", help="LayerNorm critics on our side")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast on our side")
    parser.add_argument("--compile", action="store_true", help="torch.compile on our side")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = TrainConfig()
    env = make_env(options=PushTOptions(features="rich"))
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]

    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (args.transitions, obs_dim)).astype(np.float32)
    next_obs = rng.uniform(-1, 1, (args.transitions, obs_dim)).astype(np.float32)
    actions = rng.uniform(-1, 1, (args.transitions, act_dim)).astype(np.float32)
    rewards = rng.normal(size=args.transitions).astype(np.float32)
    dones = rng.random(args.transitions) < 0.01

    ours = SACAgent(obs_dim, act_dim, replace(config.sac, layer_norm=args.layer_norm, bf16=args.bf16,
                                              compile=args.compile))
    buffer = ReplayBuffer(obs_dim, act_dim, config.buffer_size, discount=config.sac.gamma)  # SB3's γ
    peer = make_sb3_sac(env, config, learning_starts=0)
    for i in range(args.transitions):
        buffer.add(obs[i], actions[i], rewards[i], next_obs[i], dones[i])
        peer.replay_buffer.add(obs[i:i + 1], next_obs[i:i + 1], actions[i:i + 1], rewards[i:i + 1],
                               dones[i:i + 1], [{}])

    def run_ours() -> float:
        start = time.perf_counter()
        for _ in range(args.updates):
            metrics = ours.update(buffer.sample(config.batch_size))
        float(metrics["loss_actor"])  # one host sync per round, as the training loop does per log interval
        return args.updates / (time.perf_counter() - start)

    def run_peer() -> float:
        start = time.perf_counter()
        peer.train(gradient_steps=args.updates, batch_size=config.batch_size)
        return args.updates / (time.perf_counter() - start)

    run_ours(), run_peer()  # warm-up (and compilation)
    ours_rates, peer_rates = [], []
    for _ in range(args.rounds):
        ours_rates.append(run_ours())
        peer_rates.append(run_peer())
    ours_median, peer_median = statistics.median(ours_rates), statistics.median(peer_rates)
    flags = " ".join(f for f, on in (("layer_norm", args.layer_norm), ("bf16", args.bf16), ("compile", args.compile))
                     if on) or "fp32"
    print(f"threads={args.threads} batch={config.batch_size} hidden={config.sac.hidden_dim} ours[{flags}]")
    print(f"pusht_sac SACAgent.update : median {ours_median:8.1f} updates/s  rounds {[round(r) for r in ours_rates]}")
    print(f"SB3 SAC.train             : median {peer_median:8.1f} updates/s  rounds {[round(r) for r in peer_rates]}")
    print(f"ratio (ours / SB3)        : {ours_median / peer_median:.2f}x")


if __name__ == "__main__":
    main()
