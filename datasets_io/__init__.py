"""Demonstration datasets from policy rollouts, by kind of module:

- `episode`: one rollout recorded frame by frame, and its replay from (seed, actions); `dp_keypoints`: Diffusion
  Policy's 9 block keypoints; `lerobot_stats`: LeRobot's per-feature statistics (an episode's images computed where
  it is recorded).
- `formats/`: a writer/reader module per format behind one registry (`formats/__init__.py`): `lerobot_v30` and
  `lerobot_v21` (with `lerobot_common`, what both share), `zarr_replay` (Diffusion Policy's
  replay zarr), `rlds` (+ `tfrecord`, written without TensorFlow). Adding a format is one module and one row.
- `collection/`: collecting a dataset: the checked request (`plan`), the workers (`collector`), recovery bursts
  (`perturbation`), the staged output folder (`staging`) and the write loop (`run`).
- about a written dataset: `manifest` (what was written, with checksums), `readers` (every format and the human
  reference read back), `statistics` (motion statistics), `verify` (metadata, checksums and replay).
"""
