"""Settings refused before anything is built or written: a device, an env or sizes this machine cannot run."""

from __future__ import annotations

import os

import gymnasium as gym
import torch

from common.cli import first_line
from env.pusht_wrapper import PUSHT_ENV_ID
from sac import SACAgent, SACHyperParams
from training.config import ConfigError


def check_device(device: str) -> None:
    """One line, before anything is built, for a CUDA device this machine does not have."""
    if device == "cpu":
        return
    if not torch.cuda.is_available():
        why = ("this torch build has no CUDA support" if torch.version.cuda is None else
               "no CUDA GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)")
        raise ConfigError(f"device {device!r} is not available: {why} (torch {torch.__version__}); set device=cpu")
    count = torch.cuda.device_count()
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise ConfigError(f"device {device!r} is not available: this machine has {count} CUDA GPU"
                          f"{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1}); set device to one of them")


def cpu_line() -> str:
    """The CPU a measurement ran on, as every benchmark prints it: its name, cores, vector width and bfloat16."""
    cpu = torch.cpu.get_capabilities()
    native = "native bfloat16" if native_bf16(cpu) else "no native bfloat16"
    return (f"{cpu.get('cpu_name', 'CPU')} ({cpu.get('num_physical_cores')} cores, "
            f"{'AVX-512' if cpu.get('avx512_f') else 'AVX2' if cpu.get('avx2') else 'no AVX2'}, {native})")


def native_bf16(capabilities: dict) -> bool:
    """Whether a CPU (torch.cpu.get_capabilities()) multiplies bfloat16 itself: AVX512-BF16 or AMX."""
    return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))


def slow_bf16_warning(bf16: bool, device: str) -> str | None:
    """bfloat16 autocast pays only where the CPU multiplies bfloat16 itself (AVX512-BF16 or AMX); elsewhere oneDNN
    emulates it, and a bf16 update ran ~20x slower than fp32 on an AVX2 EPYC (docs/experiments.md): say so up front."""
    if not bf16 or device != "cpu":
        return None
    capabilities = torch.cpu.get_capabilities()
    if native_bf16(capabilities):
        return None
    return (f"bf16=true on a CPU without native bfloat16 matrix products ({capabilities.get('cpu_name', 'this CPU')}, "
            f"no AVX512-BF16 or AMX): torch emulates them and training runs many times slower than fp32; "
            f"set bf16=false here")


def check_env(env_id: str) -> None:
    """One line, not a gymnasium traceback, for an env id that is not registered or that SAC cannot drive."""
    if env_id == PUSHT_ENV_ID:
        return
    if env_id.startswith("gym_pusht/"):
        import gym_pusht  # noqa: F401  (registers the namespace, so gymnasium can list its versions)
    hint = f"set env_id to {PUSHT_ENV_ID!r} or another continuous-control env such as 'Pendulum-v1'"
    try:
        probe = gym.make(env_id)
    except gym.error.UnregisteredEnv as err:
        raise ConfigError(f"env_id {env_id!r} is not a registered gymnasium environment ({first_line(err)}); "
                          f"{hint}") from None
    except (gym.error.Error, ImportError) as err:  # a missing dependency, an unimportable "module:Env" id
        raise ConfigError(f"env_id {env_id!r} could not be made ({type(err).__name__}: {first_line(err)}); "
                          f"install what it needs, or {hint}") from None
    try:
        wrong = [f"a {type(space).__name__} {part} space"
                 for part, space in (("observation", probe.observation_space), ("action", probe.action_space))
                 if not isinstance(space, gym.spaces.Box)]
    finally:
        probe.close()
    if wrong:
        raise ConfigError(f"env_id {env_id!r} has {' and '.join(wrong)}; SAC needs Box (continuous) observation and "
                          f"action spaces: {hint}")


def check_memory(hp: SACHyperParams, buffer_size: int, device: str, obs_dim: int, act_dim: int) -> None:
    """Refuse networks and a replay buffer larger than the device's whole memory, before allocating them."""
    with torch.device("meta"):  # shapes only: builds the real modules without allocating
        shapes = SACAgent(obs_dim, act_dim, hp, "meta")
    actor = sum(p.numel() for p in shapes.actor.parameters())
    critic = sum(t.numel() for t in (*shapes.critic.parameters(), *shapes.critic.buffers()))
    # weights, gradients and Adam's two moments; the critics' target copy (none with crossq)
    network_bytes = 4 * (4 * actor + (4 if hp.crossq else 5) * critic)
    buffer_bytes = 4 * buffer_size * (2 * obs_dim + act_dim + 3)  # + reward, terminated, discount
    if device == "cpu":
        total, where = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's RAM"
    else:
        index = int(device.partition(":")[2] or 0)
        total, where = torch.cuda.get_device_properties(index).total_memory, f"{device}'s memory"
    if network_bytes + buffer_bytes > total:
        raise ConfigError(
            f"hidden_dim={hp.hidden_dim} and buffer_size={buffer_size} ask for about "
            f"{gib(network_bytes + buffer_bytes)} ({actor + critic:,} network parameters: {gib(network_bytes)} with "
            f"gradients, Adam state and targets; replay buffer {gib(buffer_bytes)}), more than the {gib(total)} of "
            f"{where}; lower hidden_dim or buffer_size")


def gib(n_bytes: int) -> str:
    """A byte count in binary units from MiB up: '0.2 MiB', '187.9 GiB', '48.0 EiB'."""
    size, unit = n_bytes / 2**20, "MiB"
    for bigger in ("GiB", "TiB", "PiB", "EiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:,.1f} {unit}"
