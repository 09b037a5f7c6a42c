"""The report of bench/edge/compare.sh: each study's sequential and framework runs, and a row
per emulated board, from `dhpt compare`'s report.json (its framework nodes: trials, busy and
idle time, the trials' CPU time) and the boards' cgroups (CPU time over each run's own interval,
from samples.tsv; peak memory, from memory.tsv).

  python3 bench/edge/compare_report.py OUT NODES STUDY.yaml...

NODES is bench/edge_cluster.sh's EDGE_NODES (n1:orin,n2:pi4,...). Writes OUT/edge-compare.json
and OUT/edge-compare.md.
"""
import bisect
import datetime
import json
import os
import sys


def timestamp(text):
    """Seconds since the epoch of an RFC 3339 time as protobuf's JSON writes it."""
    base, _, fraction = text.rstrip("Z").partition(".")
    start = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    return start.replace(tzinfo=datetime.timezone.utc).timestamp() + float("0." + (fraction or "0"))


def read_tsv(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        return header, [line.rstrip("\n").split("\t") for line in f if line.strip()]


class Counters:
    """Each cgroup's cpuacct.usage at the times compare.sh sampled it (every 0.5 s, or later
    when the host is busy)."""

    def __init__(self, path):
        header, rows = read_tsv(path)
        self.groups = header[1:]
        self.times = [float(r[0]) for r in rows]
        self.values = {g: [int(r[i + 1]) / 1e9 for r in rows] for i, g in enumerate(self.groups)}

    def enclosing(self, group, start, seconds):
        """(CPU seconds, interval) between the last sample at or before `start` and the first
        at or after start + seconds: counters read, not interpolated, so that CPU over the
        interval can never exceed the cap times the interval."""
        times, values = self.times, self.values[group]
        i = max(0, bisect.bisect_right(times, start) - 1)
        j = min(len(times) - 1, bisect.bisect_left(times, start + seconds))
        return values[j] - values[i], times[j] - times[i]


def best(run):
    return run.get("summary", {}).get("best_objective")


def devices(run):
    return ",".join(sorted({t["device"] for t in run.get("trials", []) if t.get("device")}))


def study_entry(out, name, profiles, caps):
    report = json.load(open(os.path.join(out, name, "report.json")))
    counters = Counters(os.path.join(out, name, "samples.tsv"))
    _, memory_rows = read_tsv(os.path.join(out, name, "memory.tsv"))
    peak = {g: int(v) / 2**20 for g, v in memory_rows}
    seq, fw = report["sequential"], report["framework"]
    seq_wall, fw_wall = seq.get("wall_seconds", 0), fw.get("wall_seconds", 0)
    seq_cpu, seq_interval = counters.enclosing("cmd", timestamp(seq["start_time"]), seq_wall)
    entry = {
        "study": name,
        "model": report["spec"]["model"]["kind"],
        "algorithm": report["spec"]["algorithm"]["name"],
        "trials": report["spec"]["max_trials"],
        "speedup": report.get("speedup", 0),
        "sequential": {
            "board": caps["cmd"]["profile"], "wall_seconds": seq_wall, "best": best(seq),
            "completed": seq.get("summary", {}).get("trials_completed", 0),
            "devices": devices(seq), "cgroup_cpu_seconds": seq_cpu,
            "cap_cores": caps["cmd"]["cores"],
            "cgroup_interval_seconds": seq_interval,
            "utilisation_of_cap":
                seq_cpu / (caps["cmd"]["cores"] * seq_interval) if seq_interval else 0,
            "peak_memory_mib": peak.get("cmd", 0),
        },
        "framework": {
            "wall_seconds": fw_wall, "best": best(fw),
            "completed": fw.get("summary", {}).get("trials_completed", 0),
            "failed": fw.get("summary", {}).get("trials_failed", 0),
        },
        "boards": [],
    }
    rows = {n["node"]: n for n in fw.get("nodes", [])}
    start = timestamp(fw["start_time"])
    for node, profile in profiles.items():
        row = rows.get(node, {})
        cpu, interval = counters.enclosing(node, start, fw_wall)
        cap = caps[node]["cores"]
        slots = row.get("slots", 0)  # Of workers that run the study's model.
        entry["boards"].append({
            "node": node, "board": profile, "devices": row.get("devices", ""),
            "slots": row.get("slots", 0), "trials": row.get("trials", 0),
            "busy_seconds": row.get("busy_seconds", 0.0),
            "idle_seconds": row.get("idle_seconds", fw_wall * slots),
            "busy_fraction":
                row.get("busy_seconds", 0.0) / (fw_wall * slots) if fw_wall and slots else 0,
            "trial_cpu_seconds": row.get("cpu_seconds", 0.0),
            "cgroup_cpu_seconds": cpu, "cgroup_interval_seconds": interval, "cap_cores": cap,
            "utilisation_of_cap": cpu / (cap * interval) if interval else 0,
            "peak_memory_mib": peak.get(node, 0),
        })
    return entry


def value(x):
    return "-" if x is None else f"{x:.4f}"


def markdown(entries, load):
    lines = ["# dhpt compare on the emulated edge cluster", "",
             f"Load average before and after: {' / '.join(load)}", ""]
    for e in entries:
        s, f = e["sequential"], e["framework"]
        lines += [
            f"## {e['study']}: {e['model']}, {e['algorithm']}, {e['trials']} trials", "",
            f"- sequential on one {s['board']} board: {s['wall_seconds']:.1f} s, best r2 "
            f"{value(s['best'])}, {s['completed']} completed, on {s['devices'] or '?'}; "
            f"{s['cgroup_cpu_seconds']:.1f} CPU s, {100 * s['utilisation_of_cap']:.0f}% of its "
            f"cap of {s['cap_cores']:.3f} cores, peak {s['peak_memory_mib']:.0f} MiB",
            f"- framework on the cluster: {f['wall_seconds']:.1f} s, best r2 {value(f['best'])}, "
            f"{f['completed']} completed, {f['failed']} failed; speedup {e['speedup']:.2f}x",
            "",
            "| node | board | devices | slots | trials | busy s | idle s | busy % | trial CPU s "
            "| cgroup CPU s | cap (cores) | % of cap | peak MiB |",
            "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for b in e["boards"]:
            lines.append(
                f"| {b['node']} | {b['board']} | {b['devices']} | {b['slots']} | {b['trials']} "
                f"| {b['busy_seconds']:.1f} | {b['idle_seconds']:.1f} "
                f"| {100 * b['busy_fraction']:.0f} | {b['trial_cpu_seconds']:.1f} "
                f"| {b['cgroup_cpu_seconds']:.1f} | {b['cap_cores']:.3f} "
                f"| {100 * b['utilisation_of_cap']:.0f} | {b['peak_memory_mib']:.0f} |")
        lines.append("")
    lines += [
        "Slots: of the board's workers that run the study's model. Busy and idle: the framework "
        "run's trials on that board (their wall time) and the rest of its slot time. Trial CPU: what the trials measured. cgroup CPU: the board's cgroup "
        "(its workers, their trials, heartbeats) between the 0.5 s samples that enclose the "
        "framework run; % of cap is that over the board's CPU cap times that interval. Peak memory: the cgroup's "
        "high-water mark over the whole comparison (the boards are idle during the sequential "
        "run).", ""]
    return "\n".join(lines)


def main():
    out, nodes_arg, studies = sys.argv[1], sys.argv[2], sys.argv[3:]
    profiles = dict(item.split(":") for item in nodes_arg.split(","))
    _, cap_rows = read_tsv(os.path.join(out, "caps.tsv"))
    caps = {g: {"profile": p, "cores": float(c)} for g, p, c in cap_rows}
    entries = [study_entry(out, os.path.basename(s)[:-len(".yaml")], profiles, caps)
               for s in studies]
    load = [line.split("load average:")[-1].strip()
            for line in open(os.path.join(out, "load.txt")) if "load average" in line]
    json.dump({"studies": entries, "load_average": load},
              open(os.path.join(out, "edge-compare.json"), "w"), indent=1)
    text = markdown(entries, load)
    open(os.path.join(out, "edge-compare.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
