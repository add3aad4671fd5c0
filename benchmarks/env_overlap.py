"""Does stepping the env beside the updates pay? Env steps/s of a training decision loop (act, one decision of the
env, store, `num_updates` updates) with the env stepped inline, in a worker thread or in a worker process while the
updates run, for one recipe's update settings. Issue 52's "both cores busy" lever, measured before it is built.

The overlapped loops update on the buffer as it stood before the decision being stepped (one transition behind),
which is what a deterministic pipelined trainer would do. Modes run in turn, `--rounds` times, and the medians are
printed with their ratio to inline.

    python benchmarks/env_overlap.py [--threads 2] [--num-updates 2] [--batch-size 256] [--bf16] [--policy-delay 1]
                                     [--decisions 1200] [--rounds 2] [--modes inline thread process]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from env.pusht_wrapper import make_env  # noqa: E402
from sac import ReplayBuffer, SACAgent  # noqa: E402
from training.config import TrainConfig  # noqa: E402


def env_worker(conn: Connection) -> None:
    """The env in a process of its own: ("reset", seed) or ("step", action) in, the env's answer out."""
    config = TrainConfig()
    env = make_env(config.env_id, config.env, decisions=True)
    while (message := conn.recv()) is not None:
        kind, value = message
        conn.send(env.reset(seed=value) if kind == "reset" else env.step(value))


class Stepper:
    """One decision of the env, started with `start` and collected with `finish`, inline or overlapped."""

    def __init__(self, mode: str) -> None:
        self.mode, self.pending = mode, None
        if mode == "process":
            self.conn, child = mp.Pipe()
            self.worker = mp.get_context("spawn").Process(target=env_worker, args=(child,), daemon=True)
            self.worker.start()
        else:
            config = TrainConfig()
            self.env = make_env(config.env_id, config.env, decisions=True)
            self.pool = ThreadPoolExecutor(1) if mode == "thread" else None

    def reset(self, seed: int) -> tuple:
        if self.mode == "process":
            self.conn.send(("reset", seed))
            return self.conn.recv()
        return self.env.reset(seed=seed)

    def start(self, action: np.ndarray) -> None:
        if self.mode == "process":
            self.conn.send(("step", action))
        elif self.mode == "thread":
            self.pending = self.pool.submit(self.env.step, action)
        else:
            self.pending = self.env.step(action)

    def finish(self) -> tuple:
        if self.mode == "process":
            return self.conn.recv()
        return self.pending.result() if self.mode == "thread" else self.pending

    def close(self) -> None:
        if self.mode == "process":
            self.conn.send(None)
            self.worker.join()
        elif self.pool is not None:
            self.pool.shutdown()


def decision_loop(stepper: Stepper, agent: SACAgent, buffer: ReplayBuffer, update: Callable[[], None],
                  decisions: int, warm_up: int) -> float:
    """Env steps/s over `decisions` decisions after `warm_up` random ones (which fill the buffer, untimed)."""
    rng = np.random.default_rng(0)
    obs, _ = stepper.reset(0)
    steps, started = 0, 0.0
    for i in range(warm_up + decisions):
        if i == warm_up:
            steps, started = 0, time.perf_counter()
        learning = i >= warm_up
        action = agent.act(obs) if learning else rng.uniform(-1, 1, agent.act_dim).astype(np.float32)
        stepper.start(action)
        if learning:
            update()  # overlapped with the env's decision unless inline (then the env has already stepped)
        next_obs, reward, terminated, truncated, info = stepper.finish()
        buffer.add(obs, action, reward, next_obs, terminated)
        steps += int(info.get("env_steps", 1))
        obs = next_obs
        if terminated or truncated:
            obs, _ = stepper.reset(i + 1)
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--num-updates", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--policy-delay", type=int, default=1)
    parser.add_argument("--decisions", type=int, default=1200, help="timed decisions a run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", nargs="+", default=["inline", "thread", "process"],
                        choices=["inline", "thread", "process"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = TrainConfig()
    hp = replace(config.sac, bf16=args.bf16, policy_delay=args.policy_delay)
    rates: dict[str, list[float]] = {mode: [] for mode in args.modes}
    for _ in range(args.rounds):
        for mode in args.modes:
            stepper = Stepper(mode)
            obs_dim = stepper.reset(0)[0].shape[0]
            agent = SACAgent(obs_dim, 2, hp)
            buffer = ReplayBuffer(obs_dim, 2, 100_000, discount=hp.gamma)

            def update(agent: SACAgent = agent, buffer: ReplayBuffer = buffer) -> None:
                for _ in range(args.num_updates):
                    agent.update(buffer.sample(args.batch_size))

            rates[mode].append(decision_loop(stepper, agent, buffer, update, args.decisions, warm_up=2000))
            stepper.close()
    print(f"torch {torch.__version__}, {args.threads} thread(s); num_updates={args.num_updates} "
          f"batch_size={args.batch_size} bf16={args.bf16} policy_delay={args.policy_delay}; "
          f"{args.decisions} timed decisions a run")
    base = statistics.median(rates[args.modes[0]])
    for mode, values in rates.items():
        median = statistics.median(values)
        print(f"{mode:8s}: median {median:7.1f} env steps/s  rounds {[round(v, 1) for v in values]}  "
              f"{median / base:.2f}x {args.modes[0]}")


if __name__ == "__main__":
    main()
