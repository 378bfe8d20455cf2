#!/usr/bin/env bash
# The 15x15 preset on a GPU machine, the same wall time with each search engine: its self-play rate
# (steps/s in the log; a step is a move, 32 simulations with the preset's Gumbel root) and the
# network it reaches, shipped small to OUT/ship_<engine> for a match elsewhere:
#
#   bash benchmarks/gomoku_15x15_gpu.sh OUT [SECONDS] [ENGINES]
#   python benchmarks/gomoku_learning.py --preset gomoku_15x15 --run OUT/ship_ray --games 50 \
#       --match-search sequential
#
# Each run is stopped like Ctrl-C (it ends KILLED with a checkpoint) after SECONDS (default 150).
# ENGINES: which runs, in order (default "seq ray").
set -euo pipefail
out=${1:?usage: $0 OUT [SECONDS] [ENGINES]}
seconds=${2:-150}
engines=${3:-seq ray}
mkdir -p "$out"
common=(experiment=gomoku_15x15 device=cuda tracking=none progress=log log_every_s=15
        eval.every_steps=0 checkpoint.every_steps=1000000)
declare -A engine=(
    [seq]="search=sequential"
    [ray]="search=ray_async agent.workers=8 search.batch_size=128"
)
for name in $engines; do
    [[ -v "engine[$name]" ]] || { echo "$0: no engine '$name'; choose from: ${!engine[*]}" >&2; exit 2; }
    # shellcheck disable=SC2086
    timeout -k 60 -s INT "$seconds" python3 -m framework "${common[@]}" ${engine[$name]} \
        hydra.run.dir="$out/run_$name" > "$out/$name.log" 2>&1 || true
    python3 -m framework_plugins.alphazero.ship "$out/run_$name" "$out/ship_$name" \
        --about "The 15x15 preset after ${seconds} s on a GPU, ${engine[$name]}"
    grep "steps/s" "$out/$name.log" | tail -3
done
