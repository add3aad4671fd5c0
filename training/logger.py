"""What a training run shows in TensorBoard, against env steps (the tags the README lists)."""

from __future__ import annotations

from torch.utils.tensorboard import SummaryWriter

UPDATE_TAGS = {"loss_critic1": "Loss/critic1", "loss_critic2": "Loss/critic2", "alpha": "Alpha",
               "mean_q1": "Q/mean_q1", "mean_q2": "Q/mean_q2"}
POLICY_TAGS = {"loss_actor": "Loss/actor", "loss_alpha": "Loss/alpha", "log_prob": "Policy/log_prob"}
EVAL_TAGS = ("success_rate", "mean_max_reward", "mean_max_coverage", "mean_return")


class TrainingLogger:
    """A SummaryWriter with the run's tags; a resumed run purges what a killed one logged past its checkpoint."""

    def __init__(self, log_dir: str, resumed_at: int | None) -> None:
        self.writer = SummaryWriter(log_dir, purge_step=None if resumed_at is None else resumed_at + 1)

    def updates(self, values: dict[str, float], step: int) -> None:
        for key, tag in UPDATE_TAGS.items():
            self.writer.add_scalar(tag, values[key], step)
        if "loss_actor" in values:  # the last policy update's (policy_delay > 1 skips it on some updates)
            for key, tag in POLICY_TAGS.items():
                self.writer.add_scalar(tag, values[key], step)
            self.writer.add_scalar("Policy/entropy", -values["log_prob"], step)

    def evaluation(self, summary: dict, step: int) -> None:
        for key in EVAL_TAGS:
            self.writer.add_scalar(f"Eval/{key}", summary[key], step)

    def episode(self, raw_return: float, mean_100: float, train_return: float, length: int, success: bool,
                max_coverage: float, step: int) -> None:
        for tag, value in (("Reward/episode", raw_return), ("Reward/mean_100", mean_100),
                           ("Reward/episode_train", train_return), ("Episode/length", length),
                           ("Episode/success", float(success)), ("Episode/max_coverage", max_coverage)):
            self.writer.add_scalar(tag, value, step)

    def speed(self, env_steps_per_sec: float, step: int, threads: int) -> None:
        self.writer.add_scalar("Perf/env_steps_per_sec", env_steps_per_sec, step)
        self.writer.add_scalar("Perf/torch_threads", threads, step)  # threads 0: what the tuner chose

    def close(self) -> None:
        self.writer.close()
