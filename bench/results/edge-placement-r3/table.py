# The table in docs/benchmarks.md from runs.log and each run's nodes.tsv:
#   python3 table.py [DIR]   (DIR: this directory, or a fresh drive.sh run's /tmp/c32-bench)
import csv, re, sys, os
base = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = []
log = open(os.path.join(base, 'runs.log')).read().splitlines()
starts = {}
for line in log:
    m = re.match(r'(\S+) start (\S+) (\S+) (\d+) load (\S+) (\S+) (\S+)', line)
    if m: starts[(m[2], m[3], m[4])] = float(m[5])
    m = re.match(r'(\S+) end (\S+) (\S+) (\d+) rc (\d+) load (\S+) \S+ \S+: makespan (\S+) s;.*best r2 (\S+);.*completed per node (\{[^}]*\});.*more than one attempt (\d+)', line)
    if not m: continue
    study, mode, rnd = m[2], m[3], m[4]
    d = os.path.join(base, f'{study}-{mode}-{rnd}')
    cpu = cap = 0; util = []
    with open(d + '/nodes.tsv') as f:
        for r in csv.DictReader(f, delimiter='\t'):
            cpu += float(r['cpu_seconds']); cap += float(r['cap_cores'])
            util.append(f"{r['node']} {float(r['utilisation_of_cap'])*100:.0f}%")
    bound = cpu / cap
    print(f"| {study} | {rnd} | {mode} | {starts[(study,mode,rnd)]:.0f}-{float(m[6]):.0f} | {float(m[7]):.1f} | {bound:.1f} | {m[8]} | {m[9]} | {m[10]} | {', '.join(util)} |")
