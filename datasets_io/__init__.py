"""Demonstration datasets from policy rollouts: the rollout record and its on-disk formats.

- `episode`: one rollout recorded frame by frame, and its replay from (seed, actions) for verification.
- `formats`: every format behind one writer/reader interface, and where each lives in a collection folder:
  - `lerobot_writer` (+ `lerobot_stats`): LeRobot dataset v3.0, the layout of the HF dataset `lerobot/pusht`;
  - `lerobot_v21`: LeRobot v2.1 (lerobot 0.3.3, openpi) with Isaac-GR00T's `meta/modality.json`;
  - `zarr_writer`: Diffusion Policy's replay-buffer zarr (`pusht_cchi_v7_replay.zarr`);
  - `rlds` (+ `tfrecord`): RLDS as a TFDS builder directory (OpenVLA, Octo), written without TensorFlow.
- `dp_keypoints`: Diffusion Policy's 9 block keypoints, rebuilt from gym-pusht's drawing code.
- `staging`: crash-safe output directories (build aside, swap in whole).
- `verify`: replay every stored episode from its seed and actions and compare, images included.
- `perturbation`: recovery demonstrations: noise or driver bursts executed, clean labels recorded, bursts marked.
- `readers` (+ `statistics`): any of these formats, and the human reference, read back; motion statistics.
"""
