#!/usr/bin/env bash
# NVIDIA's GLX inside per-worker Xvfb, checked on a GPU machine that has neither Xvfb nor Mesa
# (docs/headless_gpu.md). Two steps:
#
#   scripts/glx_gpu_check.sh prepare [CARRY]   here (Debian 12, apt-get and pip reach their registries):
#       downloads Xvfb, xkbcomp, Mesa (llvmpipe), libglvnd and the X client libraries as .debs, unpacks
#       them into one pruned prefix (CARRY/prefix.tar.xz), and the wheels the GPU machine lacks
#       (CARRY/whl); CARRY/manifest.txt lists every package and version. It also copies this script
#       and this branch's files the check runs (CARRY/overlay). Default CARRY: .devcarry-glx
#   bash CARRY/glx_gpu_check.sh run CARRY [ARGS]  there, from the repository root: where the tree's
#       rlbench_vec/display/__init__.py has no self-test yet (this branch not merged), puts the overlay's files
#       into that (throw-away) copy of the tree; unpacks the prefix to /tmp/glx-prefix and uses from it
#       only the libraries the machine lacks; installs the wheels to /tmp/site unless mujoco, glfw and
#       gymnasium import already; runs scripts/glx_gpu_check.py (ARGS go to it). $OUT (default ./out)
#       gets four files: glx_gpu_check.json, glx_gpu_check.log, glx_images.png, prefix_libs.txt.
#
# Nothing is unpacked into /: the one file `run` may add outside /tmp is /usr/bin/xkbcomp, a
# two-line wrapper, and only where none exists (Xvfb runs xkbcomp from that compiled-in path).
# GLX_CHECK_ALL_LIBS=1 makes `run` use every library of the prefix (to test the prefix on a machine
# that has them all, as tests do here).
set -euo pipefail

DEBS=(
    xvfb x11-xkb-utils xkb-data libxkbfile1 libxfont2 libfontenc1 libfreetype6 libpng16-16 libbrotli1
    libpixman-1-0 libunwind8 libbsd0 libmd0
    libgl1-mesa-dri libglx-mesa0 libglapi-mesa libllvm15 libz3-4 libxml2 libicu72 libedit2 libffi8
    libdrm2 libdrm-common libdrm-amdgpu1 libdrm-intel1 libdrm-nouveau2 libdrm-radeon1 libpciaccess0
    libelf1 libsensors5 libsensors-config libexpat1
    libglvnd0 libgl1 libglx0
    libx11-6 libx11-data libx11-xcb1 libxau6 libxdmcp6 libxcb1 libxcb-dri2-0 libxcb-dri3-0 libxcb-glx0
    libxcb-present0 libxcb-randr0 libxcb-shm0 libxcb-sync1 libxcb-xfixes0 libxext6 libxfixes3
    libxshmfence1 libxxf86vm1 libxrandr2 libxrender1 libxinerama1 libxcursor1 libxi6
    # in most base images, carried in case the GPU machine's lacks one (only missing ones are used)
    libsystemd0 libaudit1 libcap-ng0 libselinux1 libpcre2-8-0 libgcrypt20 libgpg-error0 liblz4-1 libzstd1
    liblzma5 libcap2 libbz2-1.0 zlib1g libtinfo6 libuuid1
)
# The GPU machine's python3 is 3.12 with numpy, psutil, cloudpickle, typing-extensions, imageio.
WHEELS=(mujoco==4.0.0 mujoco-core==4.0.0 glfw==2.11.0 gymnasium==1.4.0 farama-notifications==0.0.6)
LIBS=(usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu)
OVERLAY=(rlbench_vec/display/__init__.py tests/programs/glx_fbo_readback.py benchmarks/glx_throughput.py scripts/glx_gpu_check.py)

prepare() {
    local carry=${1:-.devcarry-glx} stage debs repo
    carry=$(mkdir -p "$carry" && cd "$carry" && pwd)
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    mkdir -p "$carry/overlay"
    (cd "$repo" && cp --parents "${OVERLAY[@]}" "$carry/overlay/")
    cp "$repo/scripts/glx_gpu_check.sh" "$carry/glx_gpu_check.sh"
    stage=$(mktemp -d) debs=$(mktemp -d)
    trap 'rm -rf "$stage" "$debs"' RETURN
    (cd "$debs" && apt-get download -q "${DEBS[@]}" >/dev/null)
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$stage"; done
    # Keep what Xvfb, xkbcomp, llvmpipe and the X clients load; drop docs, the other DRI drivers and
    # the ICU parts libxml2 does not link.
    rm -rf "${stage:?}"/usr/share/{doc,man,locale,lintian,bug,info,doc-base,pkgconfig} "${stage:?}"/etc
    find "$stage/${LIBS[0]}/dri" -type f ! -name swrast_dri.so -delete
    rm -f "$stage/${LIBS[0]}"/libicu{i18n,io,test,tu}.so*
    find "$stage/usr/bin" -type f ! -name Xvfb ! -name xkbcomp -delete
    tar -C "$stage" -cf - . | xz -9e -T0 >"$carry/prefix.tar.xz"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$carry/whl" "${WHEELS[@]}"
    {
        echo "# scripts/glx_gpu_check.sh prepare, $(date -u +%F): Debian $(cat /etc/debian_version) packages"
        # shellcheck disable=SC2016  # dpkg-deb's own ${field} syntax
        for deb in "$debs"/*.deb; do dpkg-deb --showformat='${Package} ${Version}\n' --show "$deb"; done
        echo "# wheels"
        ls "$carry/whl"
    } >"$carry/manifest.txt"
    du -sh "$carry" "$carry"/prefix.tar.xz "$carry"/whl
}

run() {
    local carry=$1 prefix=/tmp/glx-prefix
    shift
    export OUT=${OUT:-$PWD/out}
    mkdir -p "$OUT" "$prefix"
    export GLX_CHECK_DEADLINE=$(($(date +%s) + ${GLX_CHECK_SECONDS:-450}))
    : >"$OUT/prefix_libs.txt"
    if ! grep -q "def probe_gl" rlbench_vec/display/__init__.py; then  # this branch is not merged into the tree
        cp -r "$carry/overlay/." .
        if grep -q "def parent_death_signal" rlbench_vec/wire/process.py 2>/dev/null; then
            sed -i 's/from .worker import parent_death_signal/from .process import parent_death_signal/' \
                rlbench_vec/display/__init__.py
        fi
        echo "overlaid this branch's ${OVERLAY[*]}" >>"$OUT/prefix_libs.txt"
    fi
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='fully_trusted')" \
        "$carry/prefix.tar.xz" "$prefix"
    # Use from the prefix only what the machine lacks: its own (newer) libraries win. Sonames
    # (lib*.so.N) are what the dynamic linker looks up; a group shares private interfaces, so it
    # comes whole from one side.
    local folder lib name group member other cache kept=() used=()
    local -A ours=()
    cache=$(ldconfig -p)
    has() { grep -q "^[[:space:]]$1 " <<<"$cache"; }
    for group in "libGL.so.1 libGLX.so.0 libGLdispatch.so.0" "libGLX_mesa.so.0 libglapi.so.0" \
        "libX11.so.6 libX11-xcb.so.1"; do
        for member in $group; do
            if ! has "$member"; then for other in $group; do ours[$other]=1; done; break; fi
        done
    done
    for folder in "${LIBS[@]/#/$prefix/}"; do
        for lib in "$folder"/*.so.*; do
            name=$(basename "$lib")
            [[ $name =~ \.so\.[0-9]+$ ]] || continue
            if [[ ${GLX_CHECK_ALL_LIBS:-0} != 1 && -z ${ours[$name]:-} ]] && has "$name"; then
                rm -f "$lib"
                kept+=("$name")
            else
                used+=("$name")
            fi
        done
    done
    echo "from the prefix: ${used[*]:-}" >>"$OUT/prefix_libs.txt"
    echo "the machine's own: ${kept[*]:-}" >>"$OUT/prefix_libs.txt"
    mkdir -p "$prefix/wrap"
    printf '#!/bin/sh\nexec %s/usr/bin/Xvfb -xkbdir %s/usr/share/X11/xkb "$@"\n' "$prefix" "$prefix" >"$prefix/wrap/Xvfb"
    chmod +x "$prefix/wrap/Xvfb"
    if [[ ! -x /usr/bin/xkbcomp ]]; then
        printf '#!/bin/sh\nexec %s/usr/bin/xkbcomp "$@"\n' "$prefix" >/usr/bin/xkbcomp
        chmod +x /usr/bin/xkbcomp
        echo "added /usr/bin/xkbcomp (a wrapper)" >>"$OUT/prefix_libs.txt"
    fi
    export PATH=$prefix/wrap:$PATH
    export LD_LIBRARY_PATH=$prefix/${LIBS[0]}:$prefix/${LIBS[1]}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for folder in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do  # the driver's folder, where not in ld's cache
        if [[ -e $folder/libGLX_nvidia.so.0 ]] && ! ldconfig -p | grep -q libGLX_nvidia.so.0; then
            export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$folder
        fi
    done
    export LIBGL_DRIVERS_PATH=$prefix/${LIBS[0]}/dri
    [[ -d /usr/share/X11/locale ]] || export XLOCALEDIR=$prefix/usr/share/X11/locale
    if ! python3 -c "import mujoco, glfw, gymnasium" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            "$carry"/whl/*.whl
        export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    fi
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
    set -o pipefail
    python3 scripts/glx_gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/glx_gpu_check.log"
}

case ${1:-} in
    prepare) shift; prepare "$@" ;;
    run) shift; run "$@" ;;
    *) echo "usage: $0 prepare [CARRY] | run CARRY [ARGS for scripts/glx_gpu_check.py]" >&2; exit 2 ;;
esac
