"""The stamps that tell our outputs from the user's (common/ownership.py): a stamp holds for its writer and the bytes
(text) or pixels (images) written, and a file cut short anywhere is a plain "not ours", never an error."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import imageio.v3 as iio
import matplotlib.pyplot as plt
import numpy as np
import pytest

from common.ownership import stamp_gif, stamp_html, stamp_json, stamp_png, written_by


def png() -> bytes:
    fig = plt.figure(figsize=(2, 2))
    plt.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return stamp_png(buffer.getvalue(), "tool")


def gif() -> bytes:
    frames = np.random.default_rng(0).integers(0, 255, (4, 16, 16, 3), dtype=np.uint8)
    return stamp_gif(iio.imwrite("<bytes>", frames, extension=".gif", duration=100, loop=0), "tool")


STAMPED: dict[str, Callable[[], bytes]] = {
    "json": lambda: stamp_json({"summary": {"success_rate": 0.5}, "episodes": [1.5, None]}, "tool"),
    "html": lambda: stamp_html("<!DOCTYPE html>\n<html><body><h1>report</h1></body></html>\n", "tool"),
    "png": png,
    "gif": gif,
}


@pytest.mark.parametrize("kind", list(STAMPED))
def test_a_stamp_holds_for_its_writer_only_and_a_cut_file_is_not_ours(tmp_path: Path, kind: str) -> None:
    data = STAMPED[kind]()
    path = tmp_path / f"out.{kind}"
    path.write_bytes(data)
    assert written_by("tool")(path) and written_by("another", "tool")(path) and not written_by("another")(path)
    for cut in range(0, len(data), max(1, len(data) // 200)):
        path.write_bytes(data[:cut])
        held = written_by("tool")(path)  # never an exception, whatever Pillow meets
        assert held is False or kind in ("png", "gif") and cut > len(data) - 20, cut  # an image's pixels all there
