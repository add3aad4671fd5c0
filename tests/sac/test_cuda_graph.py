"""The update replayed as a CUDA graph is the eager update: same steps, only the launches differ. Runs where CUDA is
(the H200 check, benchmarks/gpu_run.sh); on the CPU only the refusals run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sac import ReplayBuffer, SACAgent, SACHyperParams

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def filled_buffer(device: str, n: int = 500) -> ReplayBuffer:
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(6, 2, 1000, device, seed=0)
    for _ in range(n):
        buffer.add(rng.normal(size=6), rng.uniform(-1, 1, 2), rng.normal(), rng.normal(size=6), rng.random() < 0.1)
    return buffer


def test_a_cuda_graph_needs_cuda_and_excludes_compile():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        SACAgent(6, 2, SACHyperParams(cuda_graph=True), "cpu")
    with pytest.raises(ValueError, match="choose one"):
        SACHyperParams(cuda_graph=True, compile=True).validate()


@cuda
@pytest.mark.parametrize("policy_delay", [1, 2])
def test_the_graphed_update_tracks_the_eager_one(policy_delay: int):
    torch.manual_seed(0)
    eager = SACAgent(6, 2, SACHyperParams(hidden_dim=64, policy_delay=policy_delay), "cuda")
    graphed = SACAgent(6, 2, SACHyperParams(hidden_dim=64, policy_delay=policy_delay, cuda_graph=True), "cuda")
    graphed.load_state_dict(eager.state_dict())
    start = [p.detach().clone() for p in eager.actor.parameters()]
    buffer = filled_buffer("cuda")
    for step in range(30):
        batch = buffer.sample(128)
        torch.manual_seed(step)
        m_eager = eager.update(batch)
        torch.manual_seed(step)
        m_graph = graphed.update(batch)
        for key in m_eager:
            torch.testing.assert_close(m_graph[key], m_eager[key], rtol=1e-3, atol=1e-4, msg=f"{key} at {step}")
    moved = sum(float((p - s).pow(2).sum()) for p, s in zip(eager.actor.parameters(), start, strict=True)) ** 0.5
    apart = sum(float((p - q).pow(2).sum())
                for p, q in zip(eager.actor.parameters(), graphed.actor.parameters(), strict=True)) ** 0.5
    assert moved > 0 and apart < 1e-3 * moved, (moved, apart)
    graphed.load_state_dict(eager.state_dict())  # a resumed run captures again with the loaded optimiser state
    assert all(torch.isfinite(v) for v in graphed.update(buffer.sample(128)).values())
