#!/usr/bin/env bash
# The engine's benchmarks on the lent GPU host (one H100, 16 cores, Python 3.12 with torch, no package
# index): unpack the carried GL loaders and wheels, then run one stage, writing into $OUT.
#   bash scripts/device_bench.sh peers|reset|mujoco|engine|collect|timing|timing_ik|phases|hostprofile|ab|cuda|cuda_tests
#   MUJOCO_ONLY=1 bash scripts/device_bench.sh evaluate   (NUM_ENVS="16 1": the oracle over peract18, then its bound)
#   (stage the host first: scripts/device_stage.sh says how; the last staging call carries .dev/stage3)
set -euo pipefail
stage=${1:?stage: peers, reset, mujoco, engine, collect, timing, timing_ik, phases, hostprofile, ab, cuda, cuda_tests or evaluate}
# shellcheck source=scripts/device_stage.sh
source "$(dirname "$0")/device_stage.sh"
case $stage in
  # every peer; PufferLib when its wheels are carried (/work/main/.dev/whl-peers: pufferlib 2.0.2 cp312, numpy
  # 1.26 for its extensions built against NumPy 1.x, gym 0.23.1 and gym-notices, setuptools for gym's distutils).
  # They go into their own folder, ahead of the host's numpy only for PufferLib's interpreter; else peers.py
  # says it skipped PufferLib.
  peers) wheels=${PEERS_WHEELS:-.dev/whl-peers} puffer=(--pufferlib_python /tmp/puffer_python)
         if compgen -G "$wheels/*.whl" >/dev/null; then
           python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/puffer_site "$wheels"/*.whl 2>&1 \
             | grep -v "^WARNING" || true
           echo "import os, site; site.addsitedir(os.path.dirname(__file__))" >/tmp/puffer_site/sitecustomize.py
           printf '#!/bin/sh\nPYTHONPATH=/tmp/puffer_site:$PYTHONPATH exec python3 "$@"\n' >/tmp/puffer_python
           chmod +x /tmp/puffer_python
         else
           puffer=()
         fi
         python3 benchmarks/peers.py --tag gpu16 --num_envs 16 64 --settings "0 ms" heavy-tailed --scale 16 "${puffer[@]}" \
           --out "$OUT" ;;
  reset) python3 benchmarks/reset_overlap.py --tag gpu16 --num_envs 16 --reset_s 0 0.05 0.25 1.0 --seconds 3 \
           --out "$OUT" ;;
  mujoco) python3 benchmarks/mujoco_groups.py --tag h100 --num_envs 16 64 --envs_per_worker 1 4 --out "$OUT" ;;
  collect) python3 benchmarks/collect_bench.py --tag gpu16 --episodes_per_env ${EPISODES_PER_ENV:-20} --num_envs 1 4 16 --repeats 2 --quiet \
           --out "$OUT" ;;
  timing|timing_ik)  # mjwarp, pick_and_lift, five cameras rgb+depth+mask 128x128, the bench's gripper switching
    arm=joint_velocity; sizes="1024 4096"
    if [ "$stage" = timing_ik ]; then arm=ik; sizes=1024; fi
    for n in $sizes; do
      for run in "fixed" "rlbench" "rlbench --async --min_envs $((n / 2))"; do
        tag=$(echo "$run" | tr -d '-' | tr ' ' '_')
        python3 -m rlbench_vec.bench --backend mjwarp --num_envs "$n" --task pick_and_lift --arm_mode $arm \
          --as_torch --device cuda --steps "${STEPS:-100}" --quiet --action_timing $run --json "$OUT/mjwarp_${arm}_${n}_${tag}.json"
      done
    done ;;
  phases)  # issue 42: each phase of an mjwarp step beside MuJoCo Warp alone; RUNS splits a fresh host's calls
    # shellcheck disable=SC2086  # RUNS holds several runs
    MUJOCO_GL=disable python3 benchmarks/mjwarp_phases.py --runs ${RUNS:-1024:five 4096:five 1024:one} \
      --json "$OUT/mjwarp_phases_${TAG:-all}.json" ;;
  hostprofile)  # issue 42: where the host's time goes in an mjwarp step (the main process and the worker), sampled
    # by py-spy (its wheel carried in .dev/pyspy: scripts/device_parts.sh) over the bench once the kernels are cached
    python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .dev/pyspy/*.whl 2>&1 | grep -v "^WARNING" || true
    bench=(python3 -m rlbench_vec.bench --backend mjwarp --task pick_and_lift --arm_mode joint_velocity
           --action_timing fixed --as_torch --device cuda --quiet)
    for n in ${SIZES:-1024}; do
      "${bench[@]}" --num_envs "$n" --steps 5
      /tmp/pyspy/bin/py-spy record --subprocesses --idle --nonblocking --rate 200 --format raw \
        -o "$OUT/host_profile_$n.txt" -- "${bench[@]}" --num_envs "$n" --steps "${STEPS:-400}" --json "$OUT/host_profile_$n.json"
    done ;;
  ab)  # the bench's mjwarp throughput, this tree against another version's package (BASE: a folder holding its
    # rlbench_vec, e.g. `git archive REV rlbench_vec | tar -x -C .ab/base`, carried), in turns, REPEATS rounds
    five=(--cameras left_shoulder right_shoulder overhead wrist front --modalities rgb depth mask); one=(--cameras front --modalities rgb)
    for run in ${RUNS:-1024:five 4096:five 1024:one}; do
      size=${run%%:*}; declare -n cams=${run##*:}
      for round in $(seq "${REPEATS:-2}"); do
        for side in base tree; do
          root=$PWD; [ "$side" = base ] && root=${BASE:?BASE: the folder of the other version}
          PYTHONPATH=/tmp/site:$root MUJOCO_GL=disable python3 -m rlbench_vec.bench --backend mjwarp --num_envs "$size" \
            --task pick_and_lift --arm_mode joint_velocity --action_timing fixed "${cams[@]}" --as_torch --device cuda \
            --steps "${STEPS:-100}" --quiet --json "$OUT/ab_${side}_${size}_${run##*:}_$round.json" | grep "env-steps/s " || true
        done
      done
    done ;;
  engine) for part in mujoco peers reset; do bash "$0" "$part"; done ;;
  evaluate)  # mujoco: the oracle over PerAct's 18 tasks, 25 episodes each, five cameras rgb+depth 128x128
    for n in ${NUM_ENVS:-16 1}; do
      /usr/bin/time -f "wall %e s" python3 -m rlbench_vec.evaluate --policy oracle --tasks peract18 --episodes 25 \
        --num_envs "$n" --backend mujoco --progress 0 --out "$OUT/mujoco_n$n" 2>&1 | tail -3
    done
    python3 benchmarks/evaluate_bound.py --tasks peract18 --episodes 25 --num_envs ${BOUND_ENVS:-16 1} \
      --json "$OUT/bound.json" ;;
  cuda) python3 scripts/bench_cuda.py --out "$OUT/bench_cuda_h100.json" ;;
  cuda_tests) python3 -m pytest -q -p no:cacheprovider tests/test_tensors.py 2>&1 | tee "$OUT/cuda_tests.log" ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
esac
