#!/usr/bin/env bash
# Runs the PTX test binaries on each host PTX engine (the JIT forced, at each tier, then the
# interpreter) with one seed, and checks that every output they download is bit-identical on
# all (crates/streamexec-ptx/tests/common/mod.rs `download` writes a hash of each). Outputs
# whose order depends on how blocks interleave (atomic slot allocation) are left out by name.
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${STREAMEXEC_TEST_SEED:-$RANDOM$RANDOM}
# Results that depend on the order in which blocks claim slots or exchange values, which
# differs from run to run on either engine.
skip='^(sync::ballot_compaction|sync::atomic_min_max_inc_dec_exch_bitwise_and_wide_adds)#'
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The JIT twice: each tier of its code alone (quick: single-pass register allocation, what a
# kernel's first launch runs; optimized: what its later launches run), see docs/ptx.md.
for run in jit:quick jit:optimized interpreter:-; do
    engine=${run%%:*} tier=${run#*:} name=${run/:/-}
    STREAMEXEC_TEST_SEED=$seed STREAMEXEC_PTX_ENGINE=$engine STREAMEXEC_PTX_JIT_TIER=$tier \
        STREAMEXEC_PTX_DIGEST="$dir/$name" \
        cargo test -q -p streamexec-ptx --test corpus --test instructions --test bench_kernels 2>/dev/null \
        | grep -E "test result" || { echo "ptx tests failed on $name (seed $seed)"; exit 1; }
    grep -Ev "$skip" "$dir/$name" | sort > "$dir/$name.sorted"
done
for jit in jit-quick jit-optimized; do
    lines=$(wc -l < "$dir/$jit.sorted")
    if ! diff "$dir/$jit.sorted" "$dir/interpreter--.sorted" > "$dir/diff"; then
        echo "PTX engines disagree ($jit, STREAMEXEC_TEST_SEED=$seed): downloads whose hashes differ:"
        head -40 "$dir/diff"
        exit 1
    fi
    [ "$lines" -gt 100 ] || { echo "only $lines downloads were compared"; exit 1; }
    echo "PTX engines agree: $lines downloaded outputs bit-identical on the JIT ($jit) and the interpreter (STREAMEXEC_TEST_SEED=$seed)"
done
