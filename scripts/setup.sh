#!/usr/bin/env bash
# One-step set-up on a fresh Debian/Ubuntu machine: system libraries for headless rendering and
# per-worker X displays, then this package with its test tools. Bring your own torch (any build).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  xvfb x11-utils        # per-worker X displays (CoppeliaSim, MuJoCo's glfw mode); xdpyinfo
  libosmesa6            # MuJoCo CPU rendering without a display
  libegl1 libgl1        # MuJoCo EGL rendering (GPU) and GL dispatch
  libegl-mesa0          # EGL on the CPU (Mesa), when there is no GPU
  libglfw3              # MuJoCo glfw mode under Xvfb
)
if command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null
else
  echo "apt-get not found: install the equivalents of ${APT_PACKAGES[*]} yourself." >&2
fi
python3 -m pip install -q -e ".[test]"
