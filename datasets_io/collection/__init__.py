"""Collecting a dataset: the validated request (plan), the workers that record episodes, recovery bursts, the
staged output folder swapped in whole, and the write loop."""
