#!/usr/bin/python3
"""Are two optimisers' final regrets different, or is the gap between their medians noise?

    /usr/bin/python3 bench/quality_significance.py DHPT_REGRETS OPTUNA_REGRETS \\
        "dhpt TPE=optuna TPESampler" ["dhpt BAYESIAN=optuna CmaEsSampler" ...]

The files are what optimizer_quality_bench --regrets_out and optuna_quality_peer.py
--regrets-out write. For each function and pair: the medians, the probability that a run of the
first has the lower regret than a run of the second (ties count half), and the two-sided
p-value of the Mann-Whitney U test (normal approximation with the tie correction; fine for 20
or more runs each). Python's standard library only.
"""
import math
import sys
from statistics import median


def read(path):
    runs = {}
    with open(path) as f:
        for line in f:
            function, label, values = line.rstrip("\n").split("\t")
            runs[(function, label)] = [float(v) for v in values.split(",")]
    return runs


def mann_whitney(a, b):
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    n1, n2 = len(a), len(b)
    r1 = sum(r for r, (_, group) in zip(ranks, pooled) if group == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (u1 - n1 * n2 / 2) / sigma if sigma > 0 else 0.0
    p = math.erfc(abs(z) / math.sqrt(2))
    # u1 counts the pairs where a's run ranks above (a higher regret); superiority is the rest.
    return 1 - u1 / (n1 * n2), p


def main():
    ours, theirs = read(sys.argv[1]), read(sys.argv[2])
    print("| function | ours | peer | median ours | median peer | P(ours lower) | p (Mann-Whitney) |")
    print("|---|---|---|---|---|---|---|")
    labels_ours, labels_theirs = {l for _, l in ours}, {l for _, l in theirs}
    for pair in sys.argv[3:]:
        # A label may hold "=" itself ("TPE startup=5"): split where both sides name a run.
        cuts = [i for i, c in enumerate(pair) if c == "="]
        splits = [(pair[:i], pair[i + 1:]) for i in cuts]
        known = [s for s in splits if s[0] in labels_ours and s[1] in labels_theirs]
        mine, peer = known[0] if known else splits[0]
        for function in sorted({f for f, _ in ours}):
            if (function, mine) not in ours or (function, peer) not in theirs:
                continue
            a, b = ours[(function, mine)], theirs[(function, peer)]
            superiority, p = mann_whitney(a, b)
            print(f"| {function} | {mine} | {peer} | {median(a):.4g} | {median(b):.4g} | "
                  f"{superiority:.2f} | {p:.3g} |")


if __name__ == "__main__":
    main()
