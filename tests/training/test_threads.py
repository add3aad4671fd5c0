"""The thread tuner (training/threads.py) against a simulated machine: it settles on the faster thread count, pays
little for its probes, and moves when the machine gets busy or quiet again."""

from __future__ import annotations

from training.threads import ThreadTuner

QUIET = {2: 0.008, 1: 0.010}  # seconds a decision: two threads faster on an idle machine
BUSY = {2: 0.060, 1: 0.012}  # beside a CPU hog: two spinning threads collapse


class Machine:
    """The simulated machine: its timings now, and what `OtherWork` would see on it."""

    def __init__(self, now: dict[int, float]) -> None:
        self.now = now

    def busy(self) -> bool:
        return self.now is BUSY


def run(tuner: ThreadTuner, machine: Machine, decisions: int) -> tuple[float, list[int]]:
    """Seconds spent over `decisions`, and the count each decision ran with."""
    spent, used = 0.0, []
    for n in range(decisions):
        seconds = machine.now[tuner.current] * (1.0 + 0.05 * ((n * 7919) % 11 - 5) / 5)  # a little jitter
        spent += seconds
        used.append(tuner.current)
        tuner.observe(seconds)
    return spent, used


def test_it_settles_on_the_faster_count_and_its_probes_cost_little() -> None:
    for timings in (QUIET, BUSY):
        machine = Machine(timings)
        spent, used = run(ThreadTuner((2, 1), busy=machine.busy), machine, 100_000)
        best = min(timings, key=timings.get)
        assert used[-1] == best and used.count(best) > 0.99 * len(used)
        assert spent < 1.03 * 100_000 * timings[best]


def test_it_follows_the_machine_when_it_gets_busy_and_quiet_again() -> None:
    machine = Machine(QUIET)
    tuner = ThreadTuner((2, 1), busy=machine.busy)
    run(tuner, machine, 60_000)
    machine.now = BUSY
    spent, used = run(tuner, machine, 20_000)
    assert used[-1] == 1 and used[:1000].count(1) > 800  # at the next look, not the next period
    assert spent < 1.05 * 20_000 * BUSY[1]
    machine.now = QUIET
    _, used = run(tuner, machine, 1_000)
    assert used[-1] == 2 and used[300:].count(2) > 650


def test_on_a_quiet_machine_it_never_leaves_the_preferred_count() -> None:
    """A probe's switch costs a little on a real machine; with nothing else running it is never paid."""
    machine = Machine(QUIET)
    _, used = run(ThreadTuner((2, 1), busy=machine.busy), machine, 50_000)
    assert set(used) == {2}


def test_other_work_is_seen_at_once() -> None:
    """OtherWork reads /proc/stat: a busy process beside this one shows within a second (the load average would take
    a minute)."""
    import subprocess
    import sys
    import time

    from training.threads import OtherWork

    seen = OtherWork()
    spin = "import time\nend = time.time() + 3\nwhile time.time() < end: pass"
    spinner = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(1.0)
        assert seen()
    finally:
        spinner.kill()


def test_an_update_differs_in_its_last_bits_on_one_and_two_threads() -> None:
    """Why a run whose count the tuner switches is not bit-repeatable (threads: N is): the agent's updates on one
    and on two threads end a few ulps apart, and no further."""
    import torch

    from sac.agent import SACAgent
    from sac.replay_buffer import Batch

    generator = torch.Generator().manual_seed(1)
    batch = Batch(*(torch.randn(256, width, generator=generator) for width in (18, 2, 1, 18)),
                  torch.zeros(256, 1), torch.full((256, 1), 0.99))
    results = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        agent = SACAgent(obs_dim=18, act_dim=2)
        for _ in range(3):
            agent.update(batch)
        results.append([p.detach().clone() for p in agent.actor.parameters()])
    torch.set_num_threads(1)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(*results, strict=True))
