"""Demonstration datasets from policy rollouts: the rollout record and its on-disk formats.

- `episode`: one rollout recorded frame by frame, and its replay from (seed, actions) for verification.
- `dp_keypoints`: Diffusion Policy's 9 block keypoints, rebuilt from gym-pusht's drawing code.
- `lerobot_writer` (+ `lerobot_stats`): LeRobot dataset v3.0, the layout of the HF dataset `lerobot/pusht`.
- `zarr_writer`: Diffusion Policy's replay-buffer zarr (`pusht_cchi_v7_replay.zarr`).
- `staging`: crash-safe output directories (build aside, swap in whole).
- `verify`: replay every stored episode from its seed and actions and compare.
- `perturbation`: recovery demonstrations: noise or learner bursts executed, clean labels recorded, bursts marked.
- `readers` (+ `statistics`): any of these formats, and the human reference, read back; motion statistics.
"""
