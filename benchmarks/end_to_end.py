"""End-to-end training throughput on PushT: train.py's loop vs Stable-Baselines3's SAC.learn.

Same env (the PushT wrapper with the fast recipe's options, configs/fast.yaml: one action per env step),
hyper-parameters, UTD 1 (one gradient step per env step after the random phase) and thread count.

    python benchmarks/end_to_end.py [--random-steps 5000] [--learning-steps 20000] [--threads 2] [--bf16]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch
from sb3_setup import make_sb3_sac

from env.pusht_wrapper import make_env
from training.config import load_config
from training.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random-steps", type=int, default=5000)
    parser.add_argument("--learning-steps", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast on our side")
    parser.add_argument("--compile", action="store_true", help="torch.compile on our side")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    total = args.random_steps + args.learning_steps

    with tempfile.TemporaryDirectory() as tmp:
        fast = load_config(Path(__file__).resolve().parents[1] / "configs" / "fast.yaml")
        config = dataclasses.replace(fast, episodes=10**6, max_env_steps=total, start_steps=args.random_steps,
                                     update_after=args.random_steps, eval_every=0, checkpoint_every=10**6,
                                     checkpoint_dir=f"{tmp}/ckpt", log_dir=f"{tmp}/logs", threads=args.threads,
                                     sac=dataclasses.replace(fast.sac, layer_norm=False,  # SB3: no LayerNorm
                                                             bf16=args.bf16, compile=args.compile))
        trainer = Trainer(config)
        start = time.perf_counter()
        trainer.train(resume=False)
        ours = total / (time.perf_counter() - start)

    peer = make_sb3_sac(make_env(config.env_id, config.env), config, learning_starts=args.random_steps)
    start = time.perf_counter()
    peer.learn(total_timesteps=total)
    sb3 = total / (time.perf_counter() - start)

    flags = " ".join(f for f, on in (("bf16", args.bf16), ("compile", args.compile)) if on) or "fp32"
    print(f"threads={args.threads} random={args.random_steps} learning={args.learning_steps} ours[{flags}]")
    print(f"pusht_sac train.py : {ours:7.1f} env steps/s")
    print(f"SB3 SAC.learn      : {sb3:7.1f} env steps/s")
    print(f"ratio (ours / SB3) : {ours / sb3:.2f}x")


if __name__ == "__main__":
    main()
