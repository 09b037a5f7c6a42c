# Issue 32, fourth round: each measured run's makespan against a lower bound on any placement's
#   python3 ideal.py [DIR]   (DIR: this directory, or a fresh drive.sh run's output)
# A trial's work is its time on an Orin: its own wall time (start to end, as the scheduler saw
# it) where an Orin ran it, else its wall time over r, the run's Pi 4 / Orin ratio of median
# seconds per boosting round (as the scheduler learns it). Bound = max(total work over the
# cluster's capacity in Orins, 2 + 4 / r; the largest trial on an Orin). No placement can beat
# it: it lets every board work without a gap, and splits no trial.
import json, os, re, statistics, sys
from datetime import datetime
base = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
FAST = {'n1', 'n2'}
def t(s):
    s = s.rstrip('Z'); frac = ''
    if '.' in s: s, frac = s.split('.')
    return datetime.fromisoformat(s).timestamp() + (float('0.' + frac) if frac else 0)
rows = {}
for name in sorted(os.listdir(base)):
    d = os.path.join(base, name)
    if not os.path.isfile(os.path.join(d, 'trials.json')): continue
    m = re.match(r'(.*)-(fc|sp)-(\d+)$', name)
    trials = [x for x in json.load(open(os.path.join(d, 'trials.json')))['trials'] if x['state'] == 'COMPLETED']
    makespan = float(re.search(r'makespan (\S+) s', open(os.path.join(d, 'summary.txt')).read())[1])
    per_round = {True: [], False: []}
    work = []
    for x in trials:
        wall = t(x['end_time']) - t(x['start_time'])
        fast = x['worker_id'] in FAST
        per_round[fast].append(wall / x['params']['num_boost_round'])
        work.append((wall, fast))
    r = statistics.median(per_round[False]) / statistics.median(per_round[True])
    orin = [w if fast else w / r for w, fast in work]
    capacity = len(FAST) + (6 - len(FAST)) / r
    bound = max(sum(orin) / capacity, max(orin))
    rows[(m[1], m[3], m[2])] = (makespan, bound, r, sum(orin) / capacity, max(orin))
print('| study | pair | r (Pi 4 / Orin) | fc: makespan / bound (s) | fc ratio | sp: makespan / bound (s) | sp ratio |')
print('|---|---|--:|--:|--:|--:|--:|')
for (study, pair, mode) in sorted(rows):
    if mode != 'fc': continue
    fc, sp = rows[(study, pair, 'fc')], rows.get((study, pair, 'sp'))
    print(f'| {study} | {pair} | {fc[2]:.1f} / {sp[2]:.1f} | {fc[0]:.1f} / {fc[1]:.1f} | {fc[0]/fc[1]:.2f} | '
          f'{sp[0]:.1f} / {sp[1]:.1f} | {sp[0]/sp[1]:.2f} |')
