#!/usr/bin/env bash
# Builds the parts that scripts/device_stage.sh unpacks on the GPU host (Python 3.12, x86-64), under
# .dev/ and .gl/ (both ignored through .git/info/exclude). Needs pip, apt-get and xz on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || printf '/.dev/\n/.gl/\n' >>.git/info/exclude
mkdir -p .dev/whl .dev/stage1 .dev/stage2 .dev/stage3 .dev/pyspy .gl
platforms=()
for p in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014; do
  platforms+=(--platform "${p}_x86_64")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .dev/whl mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 mujoco-warp==4.0.0 warp-lang==1.19.0 isal==1.9.1 \
  gymnasium farama-notifications cloudpickle glfw pyopengl stable-baselines3
tmp=$(mktemp -d)
unzip -q .dev/whl/warp_lang-1.19.0-*.whl -d "$tmp"
tar cf - -C "$tmp" . | xz -6 -T0 | split -b 56M - .dev/stage2/warp.tar.xz.
rm -rf "$tmp"
mv .dev/stage2/warp.tar.xz.aa .dev/stage1/
find .dev/whl -name '*.whl' ! -name 'warp_lang*' -exec cp {} .dev/stage3/ \;
python3 -m pip download -q --no-deps --only-binary=:all: -d .dev/pyspy py-spy  # sampling profiles (device_bench.sh hostprofile)
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
mkdir -p /tmp/amd64/partial
# shellcheck disable=SC2086
apt-get $o update -qq && (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
du -sh .dev/stage1 .dev/stage2 .dev/stage3 .gl
