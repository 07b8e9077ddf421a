#!/usr/bin/env bash
# A/B of the engine's round trip: benchmarks/profile_engine.py three times on an older package and on
# this tree, in turn, so both sides see the same moments of a shared host. JSONs go to $OUT (default .).
#   git archive <commit> rlbench_vec | tar -x -C /tmp/old        # the older package
#   bash scripts/engine_ab.sh /tmp/old --num_envs 16 --envs_per_worker 1 --steps 3000 [--min_envs 8]
# Extra PYTHONPATH entries (e.g. a folder holding gymnasium) come from $AB_PYTHONPATH.
set -euo pipefail
old=${1:?the folder holding the older rlbench_vec}
shift
out=${OUT:-.}
tag=${AB_TAG:-ab}
for run in 1 2 3; do
  for side in old new; do
    if [ "$side" = old ]; then path=$old; else path=$PWD; fi
    PYTHONPATH="$path${AB_PYTHONPATH:+:$AB_PYTHONPATH}" python3 benchmarks/profile_engine.py "$@" --top 3 \
      --json "$out/${tag}_${side}_$run.json" | grep -E "^cpu|main CPU per reply" | head -2 | sed "s/^/$side $run: /"
  done
done
