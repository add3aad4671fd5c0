#!/usr/bin/env bash
# Build the real readers' virtual environments that tools/check_readers.py runs in (never a dependency of the
# project): lerobot 0.4.4 (LeRobot v3.0), lerobot 0.3.3 (LeRobot v2.1, the codebase openpi and GR00T read) and
# tensorflow-datasets (RLDS, what OpenVLA and Octo read).
#   tools/reader_venvs.sh [DIR]     (default: readers/ beside the repository; about 12 GB, torch is a CUDA build)
# lerobot pins torch < 2.11; the readers only decode and index, so both lerobots go in --no-deps beside the torch
# 2.14.1 stack this machine holds, with the libraries their dataset code imports. lerobot 0.3.3 needs datasets 3.x.
# Videos decode with torchcodec (lerobot's default; torchvision 0.29 has no video reader any more), which needs
# FFmpeg's shared libraries: Debian's ffmpeg package (apt-get install ffmpeg).
# The lerobot 0.4.4 venv also trains and evaluates a policy on our dumps (tests/protocol/test_lerobot_policy.py):
# it gets the project's own requirements but its torch pin (the venv keeps torch 2.14.1), diffusers, which
# lerobot's Diffusion Policy imports (lerobot 0.4.4 accepts diffusers >=0.27.2,<0.36), and pyserial, which
# lerobot-train imports through its motor code.
set -euo pipefail
dir="${1:-$(dirname "$0")/../../readers}"
mkdir -p "$dir"
command -v ffmpeg > /dev/null || { echo "install FFmpeg first (Debian: apt-get install ffmpeg)" >&2; exit 2; }
common=(torch==2.14.1 torchvision==0.29.1 torchcodec==0.14.0 accelerate "huggingface-hub[hf-transfer]>=0.34.2,<0.36" "av>=15,<16" jsonlines
        draccus==0.10.0 einops packaging termcolor deepdiff "imageio[ffmpeg]" opencv-python-headless gymnasium pandas
        pyarrow "numpy<3")
make_venv() {  # name, lerobot version, datasets pin
    [ -x "$dir/$1/bin/python" ] && "$dir/$1/bin/python" -c "import lerobot" 2>/dev/null && return
    python3 -m venv "$dir/$1"
    "$dir/$1/bin/pip" install -q "${common[@]}" "$3"
    "$dir/$1/bin/pip" install -q --no-deps "lerobot==$2"
}
make_venv lerobot-0.4.4 0.4.4 "datasets>=4,<5"
if ! "$dir/lerobot-0.4.4/bin/python" -c "import diffusers, gym_pusht, pymunk, serial, zarr" 2>/dev/null; then
    "$dir/lerobot-0.4.4/bin/pip" install -q "diffusers>=0.27.2,<0.36" "pyserial>=3.5,<4" \
        -r <(grep -v '^torch\b' "$(dirname "$0")/../requirements.txt")
fi
make_venv lerobot-0.3.3 0.3.3 "datasets==3.6.0"
if ! [ -x "$dir/tfds/bin/python" ]; then
    python3 -m venv "$dir/tfds"
    "$dir/tfds/bin/pip" install -q tensorflow-cpu tensorflow-datasets importlib_resources
fi
echo "reader venvs ready in $dir"
