"""A LeRobot policy as an evaluate.py controller, so a model lerobot-train fitted on our dumps runs under
pusht-eval-v1 on the same starts as ours:

    python evaluate.py --controller protocol.lerobot_policy:load \
                       --controller-arg path=OUTPUT_DIR/checkpoints/last/pretrained_model [device=cuda]

lerobot is not a dependency of the project: it is imported only when `load` is called, in a Python that has it
(tools/reader_venvs.sh builds one: lerobot 0.4.4 with the project's requirements).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from common.cli import BadInput, first_line

# Our observation's keys under the dataset feature names a policy trained on our LeRobot dumps declares.
FEATURES = {"observation.image": "pixels", "observation.state": "agent_pos",
            "observation.environment_state": "environment_state"}
NEEDS_LEROBOT = "the LeRobot adapter needs lerobot installed in this Python (lerobot 0.4.4: see tools/reader_venvs.sh)"


class LeRobotController:
    """lerobot's own pipeline per step: preprocessor (batch, device, normalise), select_action (which keeps the
    action chunk queue between calls), postprocessor (unnormalise to env pixels)."""

    def __init__(self, policy: Any, preprocessor: Any, postprocessor: Any, files: list[str]) -> None:
        self.policy, self.preprocessor, self.postprocessor = policy, preprocessor, postprocessor
        self.files = files  # what was read, for evaluate.py to hash into the metrics
        self.inputs = {key: FEATURES[key] for key in policy.config.input_features}
        image = policy.config.input_features.get("observation.image")
        self.image_shape = tuple(image.shape) if image is not None else None

    def reset(self) -> None:
        self.policy.reset()  # empties the observation and action queues

    def __call__(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        batch = {}
        for key, name in self.inputs.items():
            value = torch.from_numpy(np.asarray(observation[name]))
            if key == "observation.image":
                value = value.permute(2, 0, 1).float() / 255.0  # HWC uint8 -> CHW in [0, 1], as lerobot's datasets
                if tuple(value.shape) != self.image_shape:
                    raise BadInput(f"the policy was trained on {self.image_shape[1]}x{self.image_shape[2]} images "
                                   f"and got {value.shape[1]}x{value.shape[2]}; pass --image-size "
                                   f"{self.image_shape[1]}")
            batch[key] = value.float().unsqueeze(0)
        with torch.inference_mode():
            action = self.postprocessor(self.policy.select_action(self.preprocessor(batch)))
        return action.reshape(-1).cpu().numpy().astype(np.float64)


def load(path: str, device: str = "cpu") -> LeRobotController:
    """The controller for a `pretrained_model/` folder written by lerobot-train (lerobot 0.4.x: config.json,
    model.safetensors and the policy_preprocessor/policy_postprocessor pipelines with their statistics)."""
    try:
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as err:
        raise BadInput(NEEDS_LEROBOT if (err.name or "lerobot").startswith("lerobot")
                       else f"lerobot could not import {err.name}; install it in this Python "
                            f"(see tools/reader_venvs.sh)") from None
    folder = Path(str(path))
    if not folder.is_dir():
        raise BadInput(f"{folder} is not a folder; give a lerobot-train pretrained_model/ folder")
    config_file, weights = folder / "config.json", folder / "model.safetensors"
    processors = sorted(folder.glob("policy_preprocessor*")) + sorted(folder.glob("policy_postprocessor*"))
    for needed, why in ((config_file, ""), (weights, ""), (folder / "policy_preprocessor.json",
                        " (a checkpoint older than lerobot 0.4 keeps its statistics in the model; convert it with "
                        "python -m lerobot.processor.migrate_policy_normalization --pretrained-path FOLDER)")):
        if not needed.is_file():
            raise BadInput(f"{folder} is not a LeRobot pretrained_model folder: it has no {needed.name}{why}")
    try:
        raw = json.loads(config_file.read_text())
        kind, inputs = raw["type"], set(raw["input_features"])
        policy_class = get_policy_class(kind)
    except ImportError as err:
        raise BadInput(f"lerobot's policy code could not import {err.name}; install it in this Python "
                       f"(see tools/reader_venvs.sh)") from None
    except KeyError as err:
        raise BadInput(f"{config_file} is not a LeRobot policy config: it has no {err}") from None
    except (OSError, ValueError, TypeError) as err:
        raise BadInput(f"{config_file} is not a LeRobot policy config ({type(err).__name__}: "
                       f"{first_line(err)})") from None
    if inputs - set(FEATURES):
        raise BadInput(f"{folder}: the policy reads {', '.join(sorted(inputs - set(FEATURES)))}, which our "
                       f"observations do not provide (they are {', '.join(FEATURES)})")
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # lerobot prints progress; stdout is our report
            config = PreTrainedConfig.from_pretrained(folder)
            config.device = device
            policy = policy_class.from_pretrained(folder, config=config)
            preprocessor, postprocessor = make_pre_post_processors(
                config, pretrained_path=str(folder), preprocessor_overrides={"device_processor": {"device": device}})
    except Exception as err:
        raise BadInput(f"{folder}: lerobot could not load the {kind} policy ({type(err).__name__}: "
                       f"{first_line(err)})") from None
    policy.eval()
    return LeRobotController(policy, preprocessor, postprocessor,
                             [str(p) for p in (config_file, weights, *processors)])
