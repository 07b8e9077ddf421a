#!/usr/bin/env bash
# Stages MuJoCo, MuJoCo Warp and the GL loaders on the lent GPU host (Python 3.12, no package index),
# whose calls carry at most 64 MiB each: warp-lang alone is 149 MB, so it travels as two xz parts over
# consecutive calls into the warm host's /tmp. Source it at the start of every call:
#   call 1, carry .gl .dev/stage1:  source scripts/device_stage.sh
#   call 2, carry .dev/stage2:      source scripts/device_stage.sh
#   call 3, carry .dev/stage3 ...:  source scripts/device_stage.sh && python3 ...
# MuJoCo alone (the mujoco backend, no Warp) fits one call:
#   carry .gl .dev/stage3:  MUJOCO_ONLY=1 source scripts/device_stage.sh
# Once /tmp/site/.ready exists (the host stayed warm) any call just sources it. It exports PYTHONPATH,
# MUJOCO_GL=egl and the NVIDIA EGL vendor file; returns 3 while parts are still missing.
# Making the parts here (a machine with pip): see scripts/device_parts.sh.
stage_dir=/tmp/stage
mkdir -p "$stage_dir"
if [ ! -e /tmp/site/.ready ]; then
  if [ -d .gl ] && [ ! -e "$stage_dir/.gl" ]; then
    for deb in .gl/*.deb; do dpkg -x "$deb" /; done
    ldconfig && touch "$stage_dir/.gl"
  fi
  if [ -n "${MUJOCO_ONLY:-}" ] && [ -d .dev/stage3 ]; then
    mkdir -p /tmp/site
    # shellcheck disable=SC2046
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      $(ls .dev/stage3/*.whl | grep -v mujoco_warp) 2>&1 | grep -v "^WARNING" || true
    touch /tmp/site/.ready
  fi
  for part in .dev/stage1/warp.tar.xz.* .dev/stage2/warp.tar.xz.*; do
    [ -e "$part" ] && cp "$part" "$stage_dir/"
  done
  if [ -d .dev/stage3 ] && [ -e "$stage_dir/warp.tar.xz.aa" ] && [ -e "$stage_dir/warp.tar.xz.ab" ]; then
    mkdir -p /tmp/site
    cat "$stage_dir"/warp.tar.xz.* | python3 -c \
      "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .dev/stage3/*.whl 2>&1 | grep -v "^WARNING" || true
    touch /tmp/site/.ready
  fi
fi
export PYTHONPATH=/tmp/site:$PWD MUJOCO_GL=egl PYTHONUNBUFFERED=1
export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}
if [ -e /tmp/site/.ready ]; then
  echo "device_stage: ready ($(python3 -c 'import importlib.util, mujoco; print("mujoco", mujoco.__version__, "warp" if importlib.util.find_spec("warp") else "no warp")' 2>&1 | tail -1))"
else
  echo "device_stage: have [$(cd "$stage_dir" && ls -A | tr '\n' ' ')]; carry the next stage in the next call"
  return 3 2>/dev/null || exit 3
fi
