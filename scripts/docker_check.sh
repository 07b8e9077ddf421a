#!/usr/bin/env bash
# Build the Docker images and check, inside the embedded one, what a headless server relies on (docker/README.md
# has the results). Not part of CI: image builds take minutes. Uses docker if its daemon answers, else podman.
#
# Usage: scripts/docker_check.sh [--sandbox] [--gpu] [--torch_wheel FILE] [--work DIR]
#   --sandbox          this workplace's glue, never in the images: base images made with mmdebstrap (no registry
#                      of images is reachable), podman with runc and no default ulimits, the host's pip
#                      configuration and the files it names (CA bundle) mounted read-only into builds and pip runs
#   --gpu              also build the embedded image with --build-arg EXTRAS=gpu (mujoco-warp, warp-lang) and
#                      import them there
#   --torch_wheel FILE with --gpu: install this torch wheel (a CPU build) in a container of that image and run the
#                      bench on mjwarp on warp's CPU device (about a minute of kernel builds)
#   --work DIR         scratch: base root file systems, the folder mounted for --user
#                      (default /var/tmp/rlbench_vec-docker)
#
# Builds rlbench_vec:embedded (docker/embedded.Dockerfile) and rlbench_vec:coppeliasim-system (docker/Dockerfile up
# to its target system: every step before the downloads of Python 3.11 and CoppeliaSim). Then, in the embedded
# image: the bench at 16 envs with and without --shm-size, a worker killed with SIGKILL (with tini as PID 1, and
# without it as a control), a stop (SIGTERM) ending the bench, and evaluate and collect writing into a mounted
# folder as --user. Prints a line per check and a summary; exit status 1 if a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."

SANDBOX=0
GPU=0
TORCH_WHEEL=
WORK=/var/tmp/rlbench_vec-docker
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sandbox) SANDBOX=1 ;;
        --gpu) GPU=1 ;;
        --work) WORK="$2"; shift ;;
        --torch_wheel) TORCH_WHEEL="$2"; shift ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$WORK"
EMBEDDED=rlbench_vec:embedded
SYSTEM=rlbench_vec:coppeliasim-system
PROBE=/opt/check/docker_probe.py  # scripts/docker_probe.py, mounted
BENCH=(python -m rlbench_vec.bench --backend mujoco --num_envs 16 --quiet)
STARTED=$SECONDS

if docker info >/dev/null 2>&1; then
    ENGINE=(docker)
elif command -v podman >/dev/null; then
    ENGINE=(podman)
else
    echo "docker_check: neither a docker daemon nor podman here" >&2
    exit 2
fi
BUILD_FLAGS=()
PIP_ACCESS=()  # what a pip run in a container needs to reach the index
if [[ $SANDBOX == 1 ]]; then
    [[ ${ENGINE[0]} == podman ]] || { echo "docker_check: --sandbox is podman's glue (docker answers here)" >&2; exit 2; }
    printf '[containers]\ndefault_ulimits = []\n' > "$WORK/containers.conf"  # the sandbox refuses setrlimit
    export CONTAINERS_CONF="$WORK/containers.conf"
    ENGINE=(podman --runtime runc)  # crun rejects the hybrid cgroups
    BUILD_FLAGS=(--pull=never --network host)
fi

pip_files() {  # the global pip configuration files and the files they name (a CA bundle, constraints)
    python3 -m pip config debug 2>/dev/null | awk '
        /^[a-z_]+:$/ { global = ($1 == "global:") }
        global && /, exists: True$/ { sub(/,$/, "", $1); print $1 }
        global && /^    [a-z.-]+: \// { print $2 }' | sort -u
}

ubuntu_keyring() {  # Ubuntu's archive keys, from the archive's own package, checked against their fingerprints
    local deb="$WORK/ubuntu-keyring.deb" dir="$WORK/ubuntu-keyring"
    curl -fsS -o "$deb" http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2020.02.11.2_all.deb
    rm -rf "$dir" && dpkg-deb -x "$deb" "$dir"
    local keyring="$dir/usr/share/keyrings/ubuntu-archive-keyring.gpg" fingerprint
    for fingerprint in 790BC7277767219C42C86F933B4FE6ACC0B21F32 F6ECB3762474EDA9D21B7022871920D1991BC93C; do
        GNUPGHOME="$dir" gpg --show-keys --with-colons "$keyring" 2>/dev/null | grep -q "^fpr:::::::::$fingerprint:" \
            || { echo "docker_check: Ubuntu's keyring lacks key $fingerprint" >&2; exit 1; }
    done
    echo "$keyring"
}

base_image() {  # base_image NAME SUITE [SOURCE LINES]: a minbase root file system, imported as NAME
    local name="$1" suite="$2" tar="$WORK/$2.tar" keyring=() file
    shift 2
    "${ENGINE[@]}" image exists "$name" && return
    if [[ $suite == focal ]]; then file=$(ubuntu_keyring); keyring=(--keyring="$file"); fi
    # apt: Ubuntu's minbase lacks it (the registry's image has it). ca-certificates: the registry's images lack
    # it, but a build that mounts the host's CA bundle over the image's cannot set it up (install_base.sh's
    # install of it then has nothing to do)
    nice -n 10 mmdebstrap --quiet --variant=minbase --include=apt,ca-certificates \
        "${keyring[@]}" "$suite" "$tar" "$@"
    "${ENGINE[@]}" import --quiet "$tar" "$name" >/dev/null
}

if [[ $SANDBOX == 1 ]]; then
    for file in $(pip_files); do PIP_ACCESS+=(-v "$file:$file:ro"); done
    BUILD_FLAGS+=("${PIP_ACCESS[@]}")
    PIP_ACCESS+=(--network host)
    base_image debian:bookworm bookworm  # mmdebstrap's sources: bookworm, its updates and security
    base_image ubuntu:20.04 focal "deb http://archive.ubuntu.com/ubuntu focal main universe" \
        "deb http://archive.ubuntu.com/ubuntu focal-updates main universe" \
        "deb http://security.ubuntu.com/ubuntu focal-security main universe"
fi

build() {  # build TAG DOCKERFILE [FLAGS]: quiet unless it fails
    local tag="$1" file="$2" log="$WORK/build-${1//[:\/]/-}.log" start=$SECONDS
    shift 2
    if nice -n 10 "${ENGINE[@]}" build "${BUILD_FLAGS[@]}" -f "$file" -t "$tag" "$@" . > "$log" 2>&1; then
        echo "built $tag ($file${*:+ $*}) in $((SECONDS - start)) s"
    else
        tail -n 30 "$log" >&2
        echo "docker_check: building $tag failed (log: $log)" >&2
        exit 1
    fi
}
build "$EMBEDDED" docker/embedded.Dockerfile
[[ $GPU == 1 ]] && build "$EMBEDDED-gpu" docker/embedded.Dockerfile --build-arg EXTRAS=gpu
build "$SYSTEM" docker/Dockerfile --target system
BUILT=$SECONDS

PASSED=0
FAILED=0
report() {  # report OK NAME DETAIL
    if [[ $1 == 1 ]]; then PASSED=$((PASSED + 1)); echo "PASS $2: $3"; else FAILED=$((FAILED + 1)); echo "FAIL $2: $3"; fi
}
run() { "${ENGINE[@]}" run --rm -v "$PWD/scripts/docker_probe.py:$PROBE:ro" "$@"; }
CONTAINER=rlbench_vec-check-$$
trap '"${ENGINE[@]}" rm -f "$CONTAINER" >/dev/null 2>&1 || true' EXIT

# 1. /dev/shm: 16 envs of 256x256 images need a 110 MB block, past the engine's 64 MB default
out=$(run --shm-size=1g "$EMBEDDED" "${BENCH[@]}" --steps 20 --image_size 256 256 2>&1) && status=0 || status=$?
sps=$(grep -oE 'env-steps/s[^0-9]*[0-9.,]+' <<<"$out" | grep -oE '[0-9.,]+$' || true)
report "$([[ $status == 0 && -n $sps ]] && echo 1)" "bench --shm-size=1g" "status $status, ${sps:-no} env-steps/s"
out=$(run "$EMBEDDED" "${BENCH[@]}" --steps 20 --image_size 256 256 2>&1) && status=0 || status=$?
report "$([[ $status == 2 && $(wc -l <<<"$out") == 1 && $out == *--shm-size=*--ipc=host* ]] && echo 1)" \
    "bench without --shm-size" "status $status, $(wc -l <<<"$out") line: $out"

# 2. a worker killed with SIGKILL, each worker with its own Xvfb: tini reaps the orphaned Xvfb; without tini
#    (python as PID 1) its zombie stays, which shows that the probe sees one
out=$(run "$EMBEDDED" python "$PROBE" worker_kill 2>/dev/null) && status=0 || status=$?
report "$([[ $status == 0 ]] && echo 1)" "worker SIGKILL under tini" "$out"
out=$(run --entrypoint python "$EMBEDDED" "$PROBE" worker_kill 2>/dev/null) && status=0 || status=$?
report "$([[ $status == 1 && $out == *"Xvfb "*" Z "* ]] && echo 1)" "control: worker SIGKILL without tini" \
    "a zombie Xvfb expected: $out"

# 3. stop (SIGTERM to tini, which passes it on): the bench ends in one line with status 143, before the stop's
#    timeout would SIGKILL it; then the same with a shell passing SIGTERM on, which looks for leftovers after
stop_bench() {  # stop_bench COMMAND...: start it, stop it once the bench steps; prints "status seconds" then logs
    "${ENGINE[@]}" run -d --name "$CONTAINER" --shm-size=1g -v "$PWD/scripts/docker_probe.py:$PROBE:ro" \
        "$EMBEDDED" "$@" >/dev/null
    local tries=0
    until "${ENGINE[@]}" exec "$CONTAINER" sh -c 'ls /dev/shm | grep -q ^rlbv' 2>/dev/null || ((++tries > 300)); do
        sleep 0.1
    done
    sleep 3  # workers started and stepping
    local start=$SECONDS
    "${ENGINE[@]}" stop -t 30 "$CONTAINER" >/dev/null
    echo "$("${ENGINE[@]}" wait "$CONTAINER" 2>/dev/null || "${ENGINE[@]}" inspect -f '{{.State.ExitCode}}' "$CONTAINER")" \
        "$((SECONDS - start))"
    "${ENGINE[@]}" logs "$CONTAINER" 2>&1
    "${ENGINE[@]}" rm -f "$CONTAINER" >/dev/null
}
LONG=(--steps 1000000 --renderer glfw --image_size 64 64)
out=$(stop_bench "${BENCH[@]}" "${LONG[@]}")
read -r status seconds <<<"$(head -n 1 <<<"$out")"
logs=$(tail -n +2 <<<"$out")
report "$([[ $status == 143 && $(wc -l <<<"$logs") == 1 && $logs == *": terminated." && $seconds -lt 30 ]] && echo 1)" \
    "stop ends the bench" "status $status after ${seconds} s, $(wc -l <<<"$logs") line: $logs"
out=$(stop_bench sh -c "${BENCH[*]} ${LONG[*]} & bench=\$!; trap 'kill -TERM \$bench' TERM; wait \$bench; \
wait \$bench; status=\$?; python $PROBE leftovers || exit 1; exit \$status")
read -r status seconds <<<"$(head -n 1 <<<"$out")"
logs=$(tail -n +2 <<<"$out")
report "$([[ $status == 143 && $logs == *"leftovers: none" ]] && echo 1)" "stop leaves nothing" \
    "status $status; $(tr '\n' ' ' <<<"$logs")"

# 4. evaluate and collect as the caller (--user) into a folder it owns, mounted; root runs them as uid 1000
uid=$(id -u); gid=$(id -g)
[[ $uid == 0 ]] && { uid=1000; gid=1000; }
OUT="$WORK/out"
rm -rf "$OUT" && mkdir -p "$OUT" && chown "$uid:$gid" "$OUT"
AS_CALLER=(--user "$uid:$gid" -v "$OUT:/workspace/out")
SMALL=(--backend mujoco --tasks reach_target --num_envs 2 --image_size 64 64)
run "${AS_CALLER[@]}" "$EMBEDDED" python -m rlbench_vec.evaluate "${SMALL[@]}" --episodes 4 --out out/eval \
    >/dev/null 2>&1 && status=0 || status=$?
run "${AS_CALLER[@]}" "$EMBEDDED" python -m rlbench_vec.collect "${SMALL[@]}" --episodes_per_task 2 --out out/demos \
    >/dev/null 2>&1 && status2=0 || status2=$?
files=$(find "$OUT" -type f | wc -l)
others=$(find "$OUT" ! -uid "$uid" | wc -l)
episodes=$(find "$OUT/demos" -maxdepth 4 -type d -name 'episode[0-9]*' | wc -l)
report "$([[ $status == 0 && $status2 == 0 && -s $OUT/eval/results.json && $episodes == 2 && $others == 0 ]] && echo 1)" \
    "evaluate and collect as --user $uid:$gid" "status $status and $status2, results.json and $episodes episodes, \
$files files, $others not owned by $uid"

# 5. the CoppeliaSim image's system steps on Ubuntu 20.04: tini, and an Xvfb whose GLX (Mesa) a client sees
out=$(run --entrypoint sh "$SYSTEM" -c 'tini --version && Xvfb :7 -nolisten tcp +extension GLX & sleep 2; \
DISPLAY=:7 xdpyinfo -queryExtensions | grep -o "GLX.*" | head -n 1' 2>/dev/null) && status=0 || status=$?
report "$([[ $status == 0 && $out == *tini*GLX* ]] && echo 1)" "CoppeliaSim image up to its downloads" \
    "$(tr '\n' ' ' <<<"$out")"

# 6. with --gpu: the gpu extra imports; with --torch_wheel, the bench on mjwarp on warp's CPU device (no GPU here)
if [[ $GPU == 1 ]]; then
    out=$(run "$EMBEDDED-gpu" python -c 'import mujoco_warp, warp; print("mujoco_warp", mujoco_warp.__name__, \
"warp", warp.config.version)' 2>&1) && status=0 || status=$?
    report "$([[ $status == 0 ]] && echo 1)" "gpu extra" "$(tail -n 1 <<<"$out")"
fi
if [[ $GPU == 1 && -n $TORCH_WHEEL ]]; then
    wheel=/tmp/$(basename "$TORCH_WHEEL")
    out=$(run "${PIP_ACCESS[@]}" --shm-size=1g -v "$TORCH_WHEEL:$wheel:ro" "$EMBEDDED-gpu" sh -c "pip install -q $wheel \
&& python -m rlbench_vec.bench --backend mjwarp --num_envs 16 --quiet --backend_options '{\"device\": \"cpu\"}' --steps 4 --image_size 32 32 \
--cameras front" 2>&1) && status=0 || status=$?
    sps=$(grep -oE 'env-steps/s[^0-9]*[0-9.,]+' <<<"$out" | grep -oE '[0-9.,]+$' || true)
    start=$(grep -oE 'startup[^0-9]*[0-9.]+ s' <<<"$out" | grep -oE '[0-9.]+ s$' || true)
    report "$([[ $status == 0 && -n $sps ]] && echo 1)" "bench on mjwarp (warp's CPU device)" \
        "status $status, ${sps:-no} env-steps/s, start-up ${start:-?} (kernel builds)$([[ $status == 0 ]] || \
        tail -n 1 <<<"$out")"
fi

echo "docker_check (${ENGINE[*]}): $PASSED passed, $FAILED failed; builds $((BUILT - STARTED)) s, checks $((SECONDS - BUILT)) s, \
wall $((SECONDS - STARTED)) s"
[[ $FAILED == 0 ]]
