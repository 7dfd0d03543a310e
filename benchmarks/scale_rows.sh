#!/usr/bin/env bash
# Issue 37's table, every row, before and now in one run: each benchmark of this folder run against the commit
# before (a checkout beside, imported through PYTHONPATH) and against this tree, alternating, ROUNDS times.
#
#   git worktree add --detach /work/before 2db5b70        # the commit the issue measured
#   flock /tmp/bench.lock benchmarks/scale_rows.sh /work/before runs/scale-rows [ROUNDS]
#
# Each run's whole output is kept as OUT/<row>.<round>.<before|now>.log; the medians are in those logs (every
# benchmark prints medians of its own repetitions). Rows and their benchmark:
#   a WebSocket / HTTP step against in process, 100 sessions      serve_ws.py (recorded and unrecorded)
#   a checkpoint after every turn; fork against a replay            fork.py (SQLite and PostgreSQL)
#   the serial runner per core; 2 Ray workers against 1             throughput.py
#   the pool on a 2-node cluster, per node                          ray_cluster.py
#   sessions all past their first write, memory per session         sessions_memory.py --written 1000
#   a step against the same statements as raw SQL                   step_vs_sql.py
# Rows this tree adds a mode to (serve_ws.py --batched) run that mode for "now" only.
set -euo pipefail
before=$(cd "${1:?usage: scale_rows.sh BEFORE_DIR OUT_DIR [ROUNDS]}" && pwd)
out=${2:?usage: scale_rows.sh BEFORE_DIR OUT_DIR [ROUNDS]}
rounds=${3:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
py="$here/.venv/bin/python"
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: each benchmark runs from the repository root
git -C "$before" log --oneline -1 > "$out/before-commit.txt"
git -C "$here" log --oneline -1 > "$out/now-commit.txt"

bench() {  # ROW ROUND TREE ARGS...: one benchmark run, its output kept
    local row=$1 round=$2 tree=$3
    shift 3
    local log="$out/$row.$round.$tree.log"
    echo "$(date -u +%H:%M:%S) $row round $round $tree: $*" | tee -a "$out/order.txt"
    if [ "$tree" = before ]; then
        (cd "$here" && PYTHONPATH="$before" "$py" "$@") > "$log" 2>&1 || echo "  failed: see $log" | tee -a "$out/order.txt"
    else
        (cd "$here" && "$py" "$@") > "$log" 2>&1 || echo "  failed: see $log" | tee -a "$out/order.txt"
    fi
}

for round in $(seq 1 "$rounds"); do
    for tree in before now; do
        bench step_vs_sql "$round" "$tree" benchmarks/step_vs_sql.py --scenarios 20 --reps 10
        bench fork "$round" "$tree" benchmarks/fork.py --backends sqlite,postgres --reps 100 --pg-reps 30
    done
    for tree in before now; do
        bench throughput "$round" "$tree" benchmarks/throughput.py --max-workers 2 --reps 3
    done
    for tree in before now; do
        extra=()
        [ "$tree" = now ] && extra=(--batched)
        bench serve_ws "$round" "$tree" benchmarks/serve_ws.py --sessions 100 --episodes 3 --unrecorded "${extra[@]}"
    done
done
for tree in before now; do
    bench ray_cluster 1 "$tree" benchmarks/ray_cluster.py --reps 3
    bench sessions_memory 1 "$tree" benchmarks/sessions_memory.py --written 1000
done
echo "$(date -u +%H:%M:%S) done" | tee -a "$out/order.txt"
