"""Batch Renormalisation (Ioffe 2017) for a batched ensemble of layers, as CrossQ's critics use it."""

from __future__ import annotations

import torch
from torch import nn


class _RenormAffine(torch.autograd.Function):
    """y = ((x − μ)·inv·r + d)·w + b with the batch normalisation gradient (μ, inv: the batch's, r, d: constants).

    Written out by hand: autograd's version of the same formula costs about three times as many passes over
    the (n, B, F) activations, which dominates a CPU update.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, mean, inv, r, d):  # noqa: ANN001, ANN205 (autograd's signature)
        scale = inv * r * weight
        shift = (d - mean * inv * r) * weight + bias
        ctx.save_for_backward(x, weight, mean, inv, r, d)
        return torch.addcmul(shift, x, scale)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        x, weight, mean, inv, r, d = ctx.saved_tensors
        sum_g = grad.sum(dim=1, keepdim=True)
        centred_gx = (grad * x).sum(dim=1, keepdim=True) - mean * sum_g  # Σ g·(x − μ)
        grad_x = None
        if ctx.needs_input_grad[0]:
            # ∂/∂x of BN: inv·k·(g − mean(g) − x̂·mean(g·x̂)) with k = w·r, x̂ = (x − μ)·inv, as a·g + b·x + c.
            n = grad.shape[1]
            a = inv * r * weight
            q = inv * inv * centred_gx / n
            grad_x = torch.addcmul(a * (mean * q - sum_g / n), x, -a * q).addcmul_(grad, a)
        grad_weight = inv * r * centred_gx + d * sum_g
        return grad_x, grad_weight, sum_g, None, None, None, None


class EnsembleBatchRenorm(nn.Module):
    """Batch renormalisation over the batch dimension, with separate statistics for each of `n` members.

    Input (n, B, F), or (B, F) shared by all members (expanded first); output (n, B, F).

    Training mode normalises with the batch statistics, corrected toward the running ones:
    x̂ = (x − μ_B)/σ_B · r + d with r = clip(σ_B/σ, 1/r_max, r_max) and d = clip((μ_B − μ)/σ, −d_max, d_max),
    both held constant in the gradient. For the first `warmup_steps` training calls r = 1 and d = 0 (plain
    batch normalisation). Every training call moves the running mean and variance toward the batch's by
    `momentum`. Evaluation mode normalises with the running statistics alone and changes nothing.
    The running statistics and the call counter are buffers, so they travel in `state_dict`.
    """

    def __init__(self, n: int, num_features: int, momentum: float = 0.01, eps: float = 1e-3,
                 warmup_steps: int = 100_000, r_max: float = 3.0, d_max: float = 5.0) -> None:
        super().__init__()
        self.n, self.num_features = n, num_features
        self.momentum, self.eps, self.warmup_steps = momentum, eps, warmup_steps
        self.r_max, self.d_max = r_max, d_max
        self.weight = nn.Parameter(torch.ones(n, 1, num_features))
        self.bias = nn.Parameter(torch.zeros(n, 1, num_features))
        self.register_buffer("running_mean", torch.zeros(n, 1, num_features))
        self.register_buffer("running_var", torch.ones(n, 1, num_features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.expand(self.n, -1, -1)
        dtype = x.dtype
        x = x.float()  # statistics in float32 even under bf16 autocast
        if not self.training:
            inv = (self.running_var + self.eps).rsqrt()
            scale = inv * self.weight
            return torch.addcmul(self.bias - self.running_mean * scale, x, scale).to(dtype)
        with torch.no_grad():
            batch = x.shape[1]
            # Shifted by the running mean, E[x²] − E[x]² keeps its precision when |mean| ≫ std.
            centred = x - self.running_mean
            shift = centred.mean(dim=1, keepdim=True)
            var = (centred.square().mean(dim=1, keepdim=True) - shift.square()).clamp_min(0.0)
            mean = shift + self.running_mean
            inv = (var + self.eps).rsqrt()
            running_inv = (self.running_var + self.eps).rsqrt()
            warm = self.steps >= self.warmup_steps
            r = torch.where(warm, (running_inv / inv).clamp(1.0 / self.r_max, self.r_max), 1.0)
            d = torch.where(warm, ((mean - self.running_mean) * running_inv).clamp(-self.d_max, self.d_max), 0.0)
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var * (batch / max(batch - 1, 1)), self.momentum)
            self.steps += 1
        return _RenormAffine.apply(x, self.weight, self.bias, mean, inv, r, d).to(dtype)

    def extra_repr(self) -> str:
        return (f"n={self.n}, num_features={self.num_features}, momentum={self.momentum}, "
                f"warmup_steps={self.warmup_steps}, r_max={self.r_max}, d_max={self.d_max}")
