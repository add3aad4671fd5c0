"""train.py's loop on one device: env steps/s of the learning phase of the default recipe (the demonstrator's: 4 env
steps a decision, 2 updates a decision, batch 256), eager, compiled and (on CUDA) with the update as a CUDA graph.

The rate is the trainer's own `Perf/env_steps_per_sec` (logged once an episode to TensorBoard), median over the
second half of the learning phase, so compilation and capture stay out of it; the wall time of each run is printed
beside it.

    python benchmarks/train_throughput.py [--device cuda] [--random-steps 2000] [--learning-steps 6000]
                                          [--variants eager compiled graph]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.config import TrainConfig  # noqa: E402
from training.trainer import Trainer  # noqa: E402

VARIANTS: dict[str, dict[str, bool]] = {"eager": {}, "compiled": {"compile": True}, "graph": {"cuda_graph": True}}


def learning_rate(log_dir: Path, after: int) -> float:
    """Median of the logged env steps/s at env steps past `after`."""
    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    events.Reload()
    values = [e.value for e in events.Scalars("Perf/env_steps_per_sec") if e.step > after]
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--random-steps", type=int, default=2000)
    parser.add_argument("--learning-steps", type=int, default=6000)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    total = args.random_steps + args.learning_steps
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"device={args.device} ({name}) torch={torch.__version__} default recipe, random={args.random_steps} "
          f"learning={args.learning_steps} env steps", flush=True)
    eager = None
    for label in args.variants:
        if label == "graph" and not args.device.startswith("cuda"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            base = TrainConfig()
            config = dataclasses.replace(base, max_env_steps=total, start_steps=args.random_steps,
                                         update_after=args.random_steps, eval_every=0, checkpoint_every=10**6,
                                         checkpoint_dir=f"{tmp}/ckpt", log_dir=f"{tmp}/logs", device=args.device,
                                         sac=dataclasses.replace(base.sac, **VARIANTS[label]))
            start = time.perf_counter()
            code = Trainer(config).train(resume=False)
            wall = time.perf_counter() - start
            if code:
                raise SystemExit(f"error: the {label} run exited {code}")
            rate = learning_rate(Path(config.log_dir), args.random_steps + args.learning_steps // 2)
        eager = rate if label == "eager" else eager
        ratio = f"  ({rate / eager:.2f}x eager)" if eager and label != "eager" else ""
        print(f"{label:9s}: {rate:7.1f} env steps/s while learning{ratio}; run {wall:.1f} s wall", flush=True)


if __name__ == "__main__":
    main()
