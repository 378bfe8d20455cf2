#!/usr/bin/env bash
# Every GPU figure of self-play, in one run of about 7 minutes, each printed as a ratio to a baseline
# measured in the same run on the same machine (the baseline's own figure beside it):
#
#   1. the tree kernels on 1, 2, 4, ... all cores, tree only, 15x15 (mcts_speed.py section 1);
#   2. self-play beside the network's forward at batches 256 and 1024, eager fp32 and torch_half, on
#      1 thread and on every core, in 1 and 2 pipeline groups (mcts_speed.py section 2, the 15x15
#      default network);
#   3. the network's backends: eager fp32, fp16 eager, torch_half (fp16 + CUDA graphs, cuDNN's
#      algorithms timed or not), and what `auto` chooses (inference_backends.py);
#   4. 8 Ray workers x 256 games sharing the inference service, beside the best in-process
#      configuration measured just before them (mcts_batching.py --workers 8);
#   5. the 15x15 preset as a user runs it, device=cuda, its self-play moves/s (goal: 10,000), after
#      a short run of it that compiles the tree kernels into numba's cache (warm; with the preset
#      alone, the first measured run would spend its first minute or more compiling).
#
#   bash benchmarks/gpu_selfplay.sh [OUT]           # OUT: where each part's output goes (default: a temp folder)
#   PARTS="selfplay preset" bash benchmarks/gpu_selfplay.sh    # some parts only
#   PRESET_CONFIGS="device=cuda;device=cuda search.pipeline_groups=1" ...   # the preset's runs side by side
#
# On a bare GPU machine, first (from the project's root; see ../shared/gpu/pack.sh's header):
#   bash .device/install.sh && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
# A part that runs past its time is stopped and says so; the others still run. QUICK=1 runs every
# part on small settings, on whatever device there is (a check that the script runs, not figures).
# The preset runs last: by then numba's cache holds the kernels (a fresh install compiles them for
# a minute or more in its first process).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d -t gpu-selfplay-XXXXXX)}
mkdir -p "$out"
cores=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))")
threads="1,2,4,8,$cores"
device=cuda
if [ "${QUICK:-0}" = 1 ]; then
    device=$(python3 -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
fi
started=$(date +%s)

parts=${PARTS:-tree selfplay backends workers warm preset}
preset_configs=${PRESET_CONFIGS:-device=$device}
part() {  # part NAME SECONDS COMMAND...: run it, its output to OUT/NAME.txt and here, within SECONDS
    local name=$1 seconds=$2
    shift 2
    case " $parts " in *" $name "*) ;; *) return 0 ;; esac
    echo "== $name (at most ${seconds} s): $*"
    (cd "$here" && timeout -k 15 "$seconds" "$@") 2>&1 | tee "$out/$name.txt" | grep -v -e "^\s*$" -e WARNING
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 124 ] && echo "!! $name ran past its ${seconds} s and was stopped: its figures are missing"
    [ "$rc" != 0 ] && [ "$rc" != 124 ] && echo "!! $name failed ($rc): see $out/$name.txt"
    return 0
}

if [ "${QUICK:-0}" = 1 ]; then
    part tree 120 python3 mcts_speed.py --section 1 --repeats 1 --sims 400 --roots 64 --threads 1,2
    part selfplay 240 python3 mcts_speed.py --section 2 --device "$device" --board 9 --blocks 1 \
        --batches 32 --net-threads 1,2 --groups 1,2 --net-sims 32 --repeats 1 --backends torch,torch_half
    part backends 240 python3 inference_backends.py --device "$device" --nets "9x9 preset" --batches 32 \
        --repeats 1 --runner-batches ""
    part workers 300 python3 mcts_batching.py --device "$device" --batches 32 --waits 5 --backends torch \
        --games 16 --sims 32 --steps 1 --repeats 1 --workers 1 --seconds 5 --grace 60 --threads 2
    part preset 200 python3 preset_selfplay.py --preset gomoku_9x9 --configs "$preset_configs" \
        --seconds 100 --warmup 50 --every 5 --repeats 1
else
    part tree 110 python3 mcts_speed.py --section 1 --repeats 3 --sims 400 --roots 512 --threads "$threads"
    part selfplay 180 python3 mcts_speed.py --section 2 --device cuda --board 15 --blocks 4 \
        --batches 256,1024 --net-threads "1,$cores" --groups 1,2 --net-sims 100 --repeats 3 \
        --backends torch,torch_half
    part backends 100 python3 inference_backends.py --device cuda --repeats 3
    part workers 130 python3 mcts_batching.py --device cuda --board 15 --blocks 4 --channels 64 \
        --games 256 --sims 100 --batches 256 --waits 5 --backends torch --steps 1 --repeats 2 \
        --workers 8 --seconds 20 --grace 40 --threads "$cores" --num-cpus "$cores"
    # 512 games (the parallel kernels), gates of 2 games (the serial ones), early phases and gates.
    part warm 240 python3 -m framework experiment=gomoku_15x15 device=cuda total_steps=40000 \
        agent.min_replay=300 agent.train_every=2000 agent.updates_per_phase=5 agent.gate_every=1 \
        agent.gate_games=2 eval.every_steps=0 checkpoint.every_steps=1000000000 tracking=none \
        progress=log log_every_s=10 "hydra.run.dir=$out/warm"
    n=$(( $(tr -cd ';' <<<"$preset_configs" | wc -c) + 1 ))
    part preset $(( (${PRESET_SECONDS:-90} + 15) * n )) python3 preset_selfplay.py --preset gomoku_15x15 --configs "$preset_configs" \
        --seconds "${PRESET_SECONDS:-90}" --warmup 35 --every 5 --repeats 1 --keep "$out/preset"
fi

echo
echo "== summary ($(( $(date +%s) - started )) s; outputs in $out)"
python3 - "$out" <<'PY'
import re, sys
from pathlib import Path

out = Path(sys.argv[1])
keys = re.compile(
    r"\[(met|MISSED)\]|target|workers: |best cell|x threads=|moves/s|inference backend auto|"
    r"training in the background|Error"
)
for part in ("tree", "selfplay", "backends", "workers", "warm", "preset"):
    path = out / f"{part}.txt"
    lines = path.read_text().splitlines() if path.exists() else ["(no output)"]
    print(f"-- {part}")
    for line in lines:
        if keys.search(line) and not line.startswith("=="):
            print("  " + line.strip()[:220])
PY
