#!/usr/bin/env bash
# Builds every test binary, the examples and benches/cuda here (no GPU needed), into
# target/gpu-check/ with a run.sh that runs them on a GPU machine with STREAMEXEC_REQUIRE=cuda.
#
#   scripts/gpu-check.sh            # build the bundle (release, no debug info)
#   bash target/gpu-check/run.sh    # on the GPU machine, from the repository root
#
# Test binaries find the examples at ../examples from their own folder, as under target/.
# run.sh refuses to start where the CUDA driver that answers is streamexec's CPU libcuda (every
# check would pass without a GPU): it asks device_query which driver answers before it runs
# anything else.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/gpu-check
rm -rf "$out"
mkdir -p "$out/deps" "$out/examples"
export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=true
cargo build --release -p streamexec-examples --examples
cargo test --release -p streamexec --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        if name != "compile_fail":  # needs cargo and rustc
            print(m["executable"])
' | while read -r exe; do cp "$exe" "$out/deps/"; done
cargo bench -p streamexec --no-run --bench cuda --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])
' | while read -r exe; do cp "$exe" "$out/deps/bench-cuda"; done
for ex in add_mystery_value device_query; do cp "target/release/examples/$ex" "$out/examples/"; done
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the bundle on a GPU machine: every test binary with STREAMEXEC_REQUIRE=cuda, the
# examples on cuda, then benches/cuda briefly. Exit status: non-zero if any test failed.
cd "$(dirname "$0")"
export STREAMEXEC_REQUIRE=${STREAMEXEC_REQUIRE:-cuda}
# Which driver answers, before anything runs: streamexec's CPU libcuda (found through
# LD_LIBRARY_PATH) would pass every check here without a GPU.
query="$(examples/device_query)"
driver="$(grep -m1 -E '^ +driver: +(NVIDIA|streamexec)' <<<"$query" | sed -E 's/^ +driver: +//')"
case "$driver" in
    "NVIDIA's driver"*) ;;
    "streamexec's CPU libcuda"*)
        echo "gpu-check: refusing to run on $driver, not NVIDIA's driver: take its folder off" \
            "LD_LIBRARY_PATH (and unset STREAMEXEC_LIBCUDA_DIR), then rerun" >&2
        exit 2 ;;
    *)
        echo "gpu-check: refusing to run: no CUDA driver answers (device_query:" \
            "$(grep -m1 '^Platform cuda' <<<"$query"))" >&2
        exit 2 ;;
esac
nvidia-smi -L 2>/dev/null || true
echo "$query"
examples/add_mystery_value --platform cuda
fail=0
for t in deps/*; do
    case "$t" in *bench-cuda) continue ;; esac
    echo "== $t"
    "$t" --test-threads=4 -q || fail=1
done
if [[ -x deps/bench-cuda && "${SKIP_BENCH:-}" != 1 ]]; then
    deps/bench-cuda --bench --warm-up-time 1 --measurement-time 3
fi
echo "gpu-check: $([[ $fail == 0 ]] && echo PASS || echo FAIL)"
exit $fail
RUN
chmod +x "$out/run.sh"
du -sh "$out"
