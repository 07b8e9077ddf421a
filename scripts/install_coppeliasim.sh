#!/usr/bin/env bash
# Install CoppeliaSim 4.1 (official tarball), PyRep and RLBench for rlbench_vec's backend="rlbench".
# The same steps build docker/Dockerfile. Made for Ubuntu 20.04, the release CoppeliaSim 4.1 supports.
#
# Usage: scripts/install_coppeliasim.sh [--dry_run] [--root DIR] [--python PYTHON] [--skip_system_packages]
#                                      [--system_packages_only]
#   --dry_run               print every command instead of running it
#   --root DIR              where CoppeliaSim goes (default: $COPPELIASIM_ROOT, else ~/CoppeliaSim); must stay
#                           writable while PyRep installs (it writes a symlink and settings there)
#   --python PYTHON         the interpreter (of your virtualenv, Python >= 3.11 for rlbench_vec) to install PyRep
#                           and RLBench into (default: python3)
#   --skip_system_packages  no apt-get (no root needed; install the packages listed below yourself)
#   --system_packages_only  apt-get alone: every step before the downloads (docker/Dockerfile's target system)
set -euo pipefail

COPPELIASIM_URL="https://downloads.coppeliarobotics.com/V4_1_0/CoppeliaSim_Edu_V4_1_0_Ubuntu20_04.tar.xz"
PYREP_REPO="https://github.com/stepjam/PyRep.git"
PYREP_REF="8f420be8064b1970aae18a9cfbc978dfb15747ef"    # PyRep 4.1.0.3, Jul 2024
RLBENCH_REPO="https://github.com/stepjam/RLBench.git"
RLBENCH_REF="02720bba4c73fe02eb75df946b8791b806028a9d"  # RLBench 1.2.0, Jan 2025
SYSTEM_PACKAGES=(
    curl ca-certificates xz-utils git build-essential libffi-dev
    # an X server per worker, and xdpyinfo to check one by hand
    xvfb x11-utils
    # Mesa's software OpenGL (GLX under Xvfb)
    libgl1 libgl1-mesa-dri libglu1-mesa libegl1
    # what CoppeliaSim's bundled Qt xcb plugin loads
    libx11-6 libx11-xcb1 libxcb1 libxau6 libxext6 libxrender1 libxi6 libsm6 libice6 libxkbcommon-x11-0
    libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-xinerama0 libxcb-xkb1
    libfontconfig1 libfreetype6 libdbus-1-3 libglib2.0-0
    # RLBench #17: without these a reset under Xvfb takes about a minute
    libavcodec-dev libavformat-dev libswscale-dev libgl1-mesa-dev
    # installed by colosseum's and Coppelia Robotics' own CoppeliaSim images: libraries that CoppeliaSim's
    # bundled plugins load (FireWire and USB devices, exact arithmetic), and dbus-launch for Qt's session
    # bus (not checked here with ldd: CoppeliaSim cannot be downloaded where this was written)
    libraw1394-11 libmpfr6 libusb-1.0-0 dbus-x11
)
# RLBench's own requirements (its setup.py also pins PyRep by git URL: installed with --no-deps below)
RLBENCH_REQUIREMENTS=(Pillow pyquaternion scipy natsort "gymnasium>=1.0")

DRY_RUN=0
ROOT="${COPPELIASIM_ROOT:-$HOME/CoppeliaSim}"
PYTHON=python3
SYSTEM=1
ONLY_SYSTEM=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dry_run) DRY_RUN=1 ;;
        --root) ROOT="$2"; shift ;;
        --python) PYTHON="$2"; shift ;;
        --skip_system_packages) SYSTEM=0 ;;
        --system_packages_only) ONLY_SYSTEM=1 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [[ $SYSTEM == 0 && $ONLY_SYSTEM == 1 ]]; then
    echo "--skip_system_packages and --system_packages_only leave nothing to do: give one of them" >&2
    exit 2
fi

run() {  # run a command, or print it in --dry_run
    if [[ $DRY_RUN == 1 ]]; then
        printf '+'; printf ' %q' "$@"; printf '\n'
    else
        "$@"
    fi
}

run_in() {  # run_in DIR COMMAND...: PyRep's build reads files relative to the current directory
    local dir="$1"; shift
    if [[ $DRY_RUN == 1 ]]; then
        printf '+ cd %q &&' "$dir"; printf ' %q' "$@"; printf '\n'
    else
        (cd "$dir" && "$@")
    fi
}

write_file() {  # write_file PATH CONTENT
    if [[ $DRY_RUN == 1 ]]; then
        printf '+ write %q:\n%s\n' "$1" "$2"
    else
        printf '%s\n' "$2" > "$1"
    fi
}

if [[ $DRY_RUN == 1 ]]; then
    WORK="${TMPDIR:-/tmp}/rlbench_vec-install"
else
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
fi
TARBALL="$WORK/$(basename "$COPPELIASIM_URL")"

if [[ $SYSTEM == 1 ]]; then
    SUDO=()
    [[ $(id -u) == 0 ]] || SUDO=(sudo)
    run "${SUDO[@]}" apt-get update
    run "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${SYSTEM_PACKAGES[@]}"
fi
if [[ $ONLY_SYSTEM == 1 ]]; then
    echo "System packages done; run again with --skip_system_packages for CoppeliaSim, PyRep and RLBench."
    exit 0
fi

# CoppeliaSim 4.1, unpacked straight into ROOT
run curl -fL --retry 3 -o "$TARBALL" "$COPPELIASIM_URL"
run mkdir -p "$ROOT"
run tar -xf "$TARBALL" -C "$ROOT" --strip-components 1
run rm -f "$TARBALL"

# The variables CoppeliaSim and PyRep need, here and in every later shell that sources ENV_FILE.
# LD_LIBRARY_PATH and QT_QPA_PLATFORM_PLUGIN_PATH as RLBench's own CI sets them; QT_PLUGIN_PATH lets Qt's
# xcb plugin find CoppeliaSim's xcbglintegrations/libqxcb-glx-integration.so, without which it has no GLX
# context ("neither GLX nor EGL are enabled") and cameras render black frames or CoppeliaSim segfaults.
ENV_LINES="export COPPELIASIM_ROOT=\"$ROOT\"
export LD_LIBRARY_PATH=\"\${LD_LIBRARY_PATH:+\$LD_LIBRARY_PATH:}\$COPPELIASIM_ROOT:\$COPPELIASIM_ROOT/platforms\"
export QT_QPA_PLATFORM_PLUGIN_PATH=\"\$COPPELIASIM_ROOT\"
export QT_PLUGIN_PATH=\"\$COPPELIASIM_ROOT\""
ENV_FILE="$ROOT/rlbench_env.sh"
write_file "$ENV_FILE" "$ENV_LINES"
eval "$ENV_LINES"

# PyRep builds a cffi extension against libcoppeliaSim: build tools first, no build isolation.
# (its requirements.txt pins cffi 1.14.2, which has no wheel for current Pythons)
# CC=gcc: standalone Pythons (uv's, before uv 0.5.10 / uv#9916 rewrote it to cc) name clang as their
# compiler, which build-essential does not install; gcc is there whatever built the interpreter.
run "$PYTHON" -m pip install --upgrade pip setuptools wheel "cffi>=1.15" numpy
run git clone "$PYREP_REPO" "$WORK/PyRep"
run git -C "$WORK/PyRep" checkout --quiet "$PYREP_REF"
run_in "$WORK/PyRep" env CC=gcc "$PYTHON" -m pip install --no-build-isolation .

run git clone "$RLBENCH_REPO" "$WORK/RLBench"
run git -C "$WORK/RLBench" checkout --quiet "$RLBENCH_REF"
run "$PYTHON" -m pip install --no-deps "$WORK/RLBench"
run "$PYTHON" -m pip install "${RLBENCH_REQUIREMENTS[@]}"

# Found without importing: importing pyrep loads libcoppeliaSim
run "$PYTHON" -c "import importlib.util as u; assert u.find_spec('pyrep') and u.find_spec('rlbench'), 'not installed'"
if [[ $DRY_RUN == 1 ]]; then
    echo "Dry run: nothing was changed."
else
    echo "Done. In every shell that runs rlbench_vec with backend='rlbench': source $ENV_FILE"
fi
