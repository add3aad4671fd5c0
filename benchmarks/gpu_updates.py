"""Gradient updates per second of SACAgent.update on one device: eager, compiled, compiled bf16 and (on CUDA) the
update replayed as one CUDA graph.

    python benchmarks/gpu_updates.py [--device cuda] [--updates 2000] [--batch-size 256 [4096 ...]]
                                     [--variants eager compiled compiled-bf16 graph]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sac import ReplayBuffer, SACAgent, SACHyperParams  # noqa: E402

VARIANTS: dict[str, dict[str, bool]] = {"eager": {}, "compiled": {"compile": True},
                                        "compiled-bf16": {"compile": True, "bf16": True}, "graph": {"cuda_graph": True}}


def measure(agent: SACAgent, buffer: ReplayBuffer, updates: int, batch_size: int) -> float:
    for _ in range(50):  # warm-up, compilation and graph capture
        agent.update(buffer.sample(batch_size))
    if agent.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(updates):
        metrics = agent.update(buffer.sample(batch_size))
    float(metrics["loss_actor"])  # waits for the device
    return updates / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[256])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    obs_dim, act_dim = 24, 2
    buffer = ReplayBuffer(obs_dim, act_dim, 100_000, args.device)
    n = 50_000
    buffer.obs[:n].uniform_(-1, 1)
    buffer.next_obs[:n].uniform_(-1, 1)
    buffer.action[:n].uniform_(-1, 1)
    buffer.reward[:n].normal_()
    buffer.size = buffer.position = n
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"device={args.device} ({name}) torch={torch.__version__} hidden=256 updates={args.updates}")
    for batch_size in args.batch_size:
        eager = None
        for label in args.variants:
            if label == "graph" and not args.device.startswith("cuda"):
                continue
            agent = SACAgent(obs_dim, act_dim, SACHyperParams(layer_norm=True, **VARIANTS[label]), args.device)
            rate = measure(agent, buffer, args.updates, batch_size)
            eager = rate if label == "eager" else eager
            ratio = f"  ({rate / eager:.2f}x eager)" if eager and label != "eager" else ""
            print(f"batch {batch_size:5d} {label:14s}: {rate:8.1f} updates/s{ratio}", flush=True)


if __name__ == "__main__":
    main()
