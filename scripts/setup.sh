#!/usr/bin/env bash
# One-step set-up on a fresh Debian/Ubuntu machine: system libraries for headless rendering and per-worker
# X displays, then this package with its test tools, in a virtual environment: the one that is active, or
# else .venv here (made if missing). Either way .venv/bin/python then runs it (.venv points at an active
# environment). Bring your own torch (any build): `.venv/bin/python -m pip install -e ".[torch]"` keeps it.
# --system_only: the system libraries alone (the Docker images' shared base step, docker/install_base.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM_ONLY=0
case "${1:-}" in
  "") ;;
  --system_only) SYSTEM_ONLY=1 ;;
  *) echo "setup: unknown argument $1 (the only one is --system_only)" >&2; exit 2 ;;
esac

APT_PACKAGES=(
  xvfb x11-utils        # per-worker X displays (CoppeliaSim, MuJoCo's glfw mode); xdpyinfo
  libosmesa6            # MuJoCo CPU rendering without a display
  libegl1 libgl1        # MuJoCo EGL rendering (GPU) and GL dispatch
  libegl-mesa0          # EGL on the CPU (Mesa), when there is no GPU
  libglfw3              # MuJoCo glfw mode under Xvfb
  python3-venv          # Debian's python3 makes virtual environments only with it
)
if command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null
else
  echo "apt-get not found: install the equivalents of ${APT_PACKAGES[*]} yourself." >&2
fi
[ "$SYSTEM_ONLY" = 1 ] && exit 0

if [ -n "${VIRTUAL_ENV:-}" ]; then
  if [ ! -e .venv ]; then
    ln -s "$VIRTUAL_ENV" .venv
  elif [ "$(cd .venv && pwd -P)" != "$(cd "$VIRTUAL_ENV" && pwd -P)" ]; then
    echo "setup: .venv here is not the active environment $VIRTUAL_ENV: remove .venv, or deactivate." >&2
    exit 1
  fi
elif [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q -e ".[test]"
echo "rlbench_vec is installed in $(cd .venv && pwd -P): run it with .venv/bin/python, or 'source .venv/bin/activate' first."
