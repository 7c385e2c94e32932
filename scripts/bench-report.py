#!/usr/bin/env python3
"""Writes the tables of benches/README.md from criterion's output.

    python3 scripts/bench-report.py            # rewrite the marked section of benches/README.md
    python3 scripts/bench-report.py --print    # print the section instead

Reads every `<criterion dir>/**/new/benchmark.json` (group and function ids, throughput) and
the `estimates.json` next to it (the median's point estimate, in nanoseconds), and replaces what
lies between the `<!-- bench-report:begin -->` and `<!-- bench-report:end -->` lines of
benches/README.md with one table per criterion group: each case's median time, its throughput
where the bench declares one, and its time as a multiple of the group's baseline from the same
data. BASELINES below says, for each bench, which case is the baseline of which. Each bench's
tables record the machine (CPU model, core count, OS: run this on the machine that ran the
benches) and the time criterion wrote each table's data (the estimates files' modification
times, UTC). A bench with no data in the criterion directory keeps the tables the section had
for it, with their machine line (so one bench can be rerun alone, on another machine too).

The criterion directory is --criterion DIR, else $CRITERION_HOME, else
$CARGO_TARGET_DIR/criterion, else target/criterion at the repository root (where `cargo bench`
puts it). Python 3 standard library only.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import sys
from pathlib import Path

BEGIN = "<!-- bench-report:begin -->"
END = "<!-- bench-report:end -->"

# (bench file, group id pattern, case id pattern, baseline case id). The patterns must match
# the whole id; the baseline may refer to the case pattern's groups (\1). The first rule whose
# group and case patterns match a (group, case) pair decides its bench and its baseline, so a
# group id that two benches share (`launch_empty`) is told apart by its case ids.
BASELINES = [
    ("host.rs", r"launch_empty", r"streamexec|rayon_install", "rayon_install"),
    ("host.rs", r"saxpy_16M", r".+", "rayon"),
    ("host.rs", r"saxpy_per_thread_\w+", r".+", "rayon"),
    ("host.rs", r"copy_h2d_64MiB", r".+", "copy_from_slice"),
    ("opencl.rs", r"opencl_launch_empty", r".+", "opencl3_execute_kernel_wait"),
    ("opencl.rs", r"opencl_launch_buffers", r".+", "opencl3_enqueue_finish"),
    ("opencl.rs", r"opencl_copy_(h2d|d2h)_64MiB", r".+", "opencl3_pinned"),
    ("cuda.rs", r"cuda_launch_empty|cuda_copy_(h2d|d2h)_256MiB", r".+", "cudarc"),
    ("cuda_on_cpu.rs", r"launch_empty|saxpy_1M", r"host|cuda", "host"),
    ("canned.rs", r"sgemm_1024", r".+", "gemm_crate_direct"),
    ("plugins.rs", r"opencl_sgemm_\d+", r".+", "builtin"),
    ("canned.rs", r"philox_fill_64MiB", r"(.+?)_(uniform_u32|gaussian_f32|memset32_baseline)",
     r"\1_memset32_baseline"),
    ("fft.rs", r"fft_c2c_f32_.+", r".+", "rustfft_direct"),
    ("fft.rs", r"fft_platforms_c2c_f32_.+", r"host|cuda", "host"),
    ("dnn.rs", r"conv_fwd_f32_.+", r".+", "plain_im2col_gemm"),
    ("dnn.rs", r"cnn_train_step", r"host|opencl|cuda", "host"),
    ("async_done.rs", r"completions_10k", r".+", "block_host_until_done_thread_per_stream"),
    ("command_buffer.rs", r"launch_chain_64/.+", r"(issue_only/)?(replay \(.+\)|one_by_one)",
     r"\1one_by_one"),
    ("rpc.rs", r"round_trip", r".+", "crossbeam"),
    ("rpc.rs", r"throughput", r"(?:rpc|crossbeam)/(\d+)", r"crossbeam/\1"),
    ("rpc.rs", r"spin_clients(_loaded)?", r"(?:ours|polling)/(\d+)", r"polling/\1"),
    ("mpi.rs", r"all_reduce_64MiB|ping_pong/.+|message_rate/.+", r".+", "plain_host"),
    ("ptx.rs", r"ptx_.+", r"rust|pocl|jit|interpreter", "rust"),
]

# The order of the bench sections.
BENCH_ORDER = ["host.rs", "opencl.rs", "cuda.rs", "cuda_on_cpu.rs", "canned.rs", "plugins.rs",
               "fft.rs", "dnn.rs", "async_done.rs", "command_buffer.rs", "rpc.rs", "mpi.rs",
               "ptx.rs"]


def repo_root():
    return Path(__file__).resolve().parent.parent


def bench_path(bench):
    """Where `bench` lives: the `crates/*/benches/` folder that holds it."""
    found = sorted(repo_root().glob(f"crates/*/benches/{bench}"))
    return found[0].relative_to(repo_root()).as_posix() if found else bench


def criterion_dir(arg):
    if arg:
        return Path(arg)
    if os.environ.get("CRITERION_HOME"):
        return Path(os.environ["CRITERION_HOME"])
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]) / "criterion"
    return repo_root() / "target" / "criterion"


def read_results(root):
    """Every measured case: dicts with group, case, median (ns), throughput, mtime."""
    results = []
    for bench_json in sorted(root.glob("**/new/benchmark.json")):
        estimates = bench_json.with_name("estimates.json")
        if not estimates.is_file():
            continue
        meta = json.loads(bench_json.read_text())
        est = json.loads(estimates.read_text())
        case = meta.get("function_id")
        if meta.get("value_str"):
            case = f"{case}/{meta['value_str']}" if case else meta["value_str"]
        results.append({
            "group": meta["group_id"],
            "case": case or "",
            "median": est["median"]["point_estimate"],
            "throughput": meta.get("throughput"),
            "mtime": estimates.stat().st_mtime,
        })
    return results


def classify(group, case):
    """(bench file, baseline case) of a result, or (None, None) if no rule matches."""
    for bench, group_re, case_re, baseline in BASELINES:
        if not re.fullmatch(group_re, group):
            continue
        m = re.fullmatch(case_re, case)
        if m:
            return bench, m.expand(baseline)
    return None, None


def fmt_time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def fmt_throughput(throughput, ns):
    if not throughput:
        return ""
    kind, amount = next(iter(throughput.items()))
    per_s = amount / (ns * 1e-9)
    if kind in ("Bytes", "BytesDecimal"):
        return f"{per_s / 2**30:.3g} GiB/s"
    if kind == "Elements":
        return f"{per_s / 1e6:.4g} M elements/s"
    return ""


def fmt_utc(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def natural(text):
    """A sort key that orders `rpc/8` before `rpc/64`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def cell(text):
    return text.replace("|", "\\|")


def machine():
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    os_name = platform.system()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    cpu = model or platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} logical CPUs, {os_name} (kernel {platform.release()})"


def table(rows):
    """Markdown rows of one group's table: each baseline, then the cases measured against it."""
    by_case = {r["case"]: r for r in rows}
    rows = sorted(rows, key=lambda r: (natural(r["baseline"]), r["case"] != r["baseline"],
                                       natural(r["case"])))
    show_tp = any(fmt_throughput(r["throughput"], r["median"]) for r in rows)
    head = "| case | median | throughput | time / baseline |" if show_tp else \
        "| case | median | time / baseline |"
    lines = [head, "|---|---|---|---|" if show_tp else "|---|---|---|"]
    for r in rows:
        base = by_case.get(r["baseline"])
        if r["case"] == r["baseline"]:
            ratio = "1 (baseline)"
        elif base:
            ratio = f"{r['median'] / base['median']:.3g}× `{cell(r['baseline'])}`"
        else:
            ratio = f"– (`{cell(r['baseline'])}` did not run)"
        cols = [f"`{cell(r['case'])}`", fmt_time(r["median"])]
        if show_tp:
            cols.append(fmt_throughput(r["throughput"], r["median"]) or "")
        cols.append(ratio)
        lines.append("| " + " | ".join(cols) + " |")
    return lines


def ptx_summary(groups):
    """The PTX bench's goal table: JIT / Rust and JIT / PoCL per kernel and their geometric
    means (issue 26 sets them against 2 and 1)."""
    lines = ["PTX JIT against plain Rust and PoCL (this table's medians):", "",
             "| kernel | jit / rust | jit / pocl |", "|---|---|---|"]
    logs = {"rust": [], "pocl": []}
    for group in sorted(groups, key=natural):
        by = {r["case"]: r["median"] for r in groups[group]}
        if "jit" not in by:
            continue
        cols = []
        for base in ("rust", "pocl"):
            if base in by:
                ratio = by["jit"] / by[base]
                logs[base].append(ratio)
                cols.append(f"{ratio:.3g}×")
            else:
                cols.append("–")
        lines.append(f"| `{cell(group)}` | " + " | ".join(cols) + " |")
    geo = []
    for base in ("rust", "pocl"):
        v = logs[base]
        geo.append(f"{pow(2, sum(map(math.log2, v)) / len(v)):.3g}× ({len(v)})" if v else "–")
    lines.append("| geometric mean | " + " | ".join(geo) + " |")
    return lines + [""]


def longest_calls(root, group):
    """A line with the longest single call of each case, where the bench wrote them
    (`<group>/longest_call.json`: case -> nanoseconds)."""
    path = root / group / "longest_call.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    cases = ", ".join(f"`{cell(k)}` {fmt_time(v)}" for k, v in sorted(data.items(), key=lambda kv: natural(kv[0])))
    return [f"Longest single call: {cases}.", ""]


def old_sections(text):
    """The `### ...` subsections of an existing generated section, by heading line."""
    blocks, head = {}, None
    for line in text.splitlines():
        if line.startswith("### "):
            head = line
            blocks[head] = []
        elif line.strip() == END:
            head = None
        elif head is not None:
            blocks[head].append(line)
    return blocks


def report(root, previous=""):
    results = read_results(root)
    kept = old_sections(previous)
    # Sections written before each named its machine: the one the old header named.
    old = re.search(r"^Machine: (.*)$", previous, re.M)
    for head, lines in kept.items():
        if old and not any(line.startswith("Machine: ") for line in lines):
            kept[head] = ["", f"Machine: {old.group(1)}"] + lines
    out = [
        BEGIN,
        "",
        "*Generated by `scripts/bench-report.py`; do not edit by hand.*",
        "",
    ]
    if not results:
        out += [f"No criterion data under `{root}`: run the benches, then this script.", "", END]
        return "\n".join(out)
    sections = {}
    unmatched = []
    for r in results:
        bench, baseline = classify(r["group"], r["case"])
        if bench is None:
            unmatched.append(r)
            continue
        r["baseline"] = baseline
        sections.setdefault(bench, {}).setdefault(r["group"], []).append(r)
    # The span covers the tables kept from earlier runs too ("YYYY-MM-DD HH:MM" sorts as text).
    stamps = [fmt_utc(r["mtime"]) for r in results]
    for bench in BENCH_ORDER:
        head = f"### `{bench_path(bench)}`"
        if bench not in sections and head in kept:
            stamps += re.findall(r"\(data of (\d{4}-\d\d-\d\d \d\d:\d\d) UTC\)", "\n".join(kept[head]))
    first, last = min(stamps), max(stamps)
    out += [
        f"Criterion data written {first} to {last} UTC, on the machine each bench's section "
        "names. Times are criterion's median estimates; *time / baseline* below 1 means "
        "faster than the baseline.",
        "",
    ]
    for bench in BENCH_ORDER:
        groups = sections.get(bench)
        head = f"### `{bench_path(bench)}`"
        if not groups:
            # No data of this bench here: its tables from the last run stay (each names
            # when its data was written).
            if head in kept:
                out += [head] + kept[head]
            continue
        out += [head, "", f"Machine: {machine()}.", ""]
        if bench == "ptx.rs":
            out += ptx_summary(groups)
        for group in sorted(groups):
            rows = groups[group]
            when = fmt_utc(max(r["mtime"] for r in rows))
            out += [f"`{group}` (data of {when} UTC)", ""]
            out += table(rows)
            out.append("")
            out += longest_calls(root, group)
    if unmatched:
        out += ["### Cases no rule of `scripts/bench-report.py` names", ""]
        out += ["| group | case | median |", "|---|---|---|"]
        for r in sorted(unmatched, key=lambda r: (r["group"], r["case"])):
            out.append(f"| `{cell(r['group'])}` | `{cell(r['case'])}` | {fmt_time(r['median'])} |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--criterion", help="criterion's output directory")
    ap.add_argument("--readme", default=str(repo_root() / "benches" / "README.md"))
    ap.add_argument("--print", action="store_true", help="print the section, change nothing")
    args = ap.parse_args()
    readme = Path(args.readme)
    text = readme.read_text() if readme.exists() else ""
    start, end = text.find(BEGIN), text.find(END)
    previous = text[start:end + len(END)] if 0 <= start < end else ""
    section = report(criterion_dir(args.criterion), previous)
    if args.print:
        print(section)
        return 0
    if start < 0 or end < start:
        print(f"{readme}: no {BEGIN} ... {END} section", file=sys.stderr)
        return 1
    readme.write_text(text[:start] + section + text[end + len(END):])
    print(f"{readme}: bench tables rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
