"""Editing a dataset collect_dataset.py wrote, without collecting it again (edit_dataset.py's work): `episodes` (the
inputs read episode by episode, selections, re-recording by replay), `plan` (the request checked, every episode
routed to its output part before anything is written) and `run` (the staged write loop)."""
