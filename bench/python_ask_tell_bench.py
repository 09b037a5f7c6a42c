#!/usr/bin/python3
"""Ask-and-tell round trips from Python: DHPT's client through a real dhpt-scheduler (SQLite
file, full sync) side by side with Optuna 3.1's ask/tell on its SQLite and journal storages.

Each of P processes (1, 4 and 16 by default) makes --rounds round trips of ask, the
objective (x - 2)^2 and tell, timing each; the table gives round trips per second (all
processes together, over the wall time from the first ask to the last tell) and the p50/p99
latency of one round trip (of those that succeeded; `failed` counts the ones that raised). Both sides sample at random (DHPT's RANDOM, Optuna's
RandomSampler), so the numbers are the storage's and the protocol's, not a sampler's.

    /usr/bin/python3 bench/python_ask_tell_bench.py --bin build/bin --rounds 50
"""
import argparse
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))


def objective(x):
    return (x - 2) ** 2


def timed_rounds(ask_tell, rounds, start, out):
    """Times each round trip; one that raises (Optuna's "database is locked") counts as failed
    and the process goes on, so that a run always finishes."""
    start.wait()
    times, failed, reason = [], 0, ""
    for _ in range(rounds):
        t0 = time.perf_counter()
        try:
            ask_tell()
        except Exception as e:  # noqa: BLE001 - counted and reported in the table
            failed += 1
            reason = reason or f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            continue
        times.append(time.perf_counter() - t0)
    out.put((times, failed, reason))


def dhpt_worker(address, study, rounds, index, start, out):
    import dhpt
    client = dhpt.Client(address, client_id=f"bench-{index}")
    s = dhpt.load_study(study, client=client)

    def ask_tell():
        trial = s.ask()
        s.tell(trial, objective(trial.suggest_float("x", -5.0, 5.0)))
    timed_rounds(ask_tell, rounds, start, out)


def quiet_optuna():
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # JournalStorage
    return optuna


def optuna_worker(storage_url, journal, study, rounds, index, start, out):
    optuna = quiet_optuna()
    storage = optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(journal)) \
        if journal else storage_url
    s = optuna.load_study(study_name=study, storage=storage,
                          sampler=optuna.samplers.RandomSampler(seed=index))

    def ask_tell():
        trial = s.ask()
        s.tell(trial, objective(trial.suggest_float("x", -5.0, 5.0)))
    timed_rounds(ask_tell, rounds, start, out)


def run_processes(target, args, processes):
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(processes + 1), context.Queue()
    children = [context.Process(target=target, args=(*args, i, start, out))
                for i in range(processes)]
    for child in children:
        child.start()
    start.wait()  # Every process has connected and loaded its study.
    t0 = time.perf_counter()
    times, failed, reasons = [], 0, set()
    for _ in children:
        mine, lost, reason = out.get()
        times += mine
        failed += lost
        reasons |= {reason} if reason else set()
    wall = time.perf_counter() - t0
    for child in children:
        child.join()
    return len(times) / wall, times, failed, reasons


def start_scheduler(bin_dir, db):
    process = subprocess.Popen([os.path.join(bin_dir, "dhpt-scheduler"), "--listen=127.0.0.1:0",
                                f"--db={db}", "--metrics_port=-1"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    for line in process.stdout:
        if line.startswith("listening on "):
            return process, "127.0.0.1:" + line.strip().rsplit(":", 1)[1]
    raise SystemExit("dhpt-scheduler did not start")


def bench_dhpt(bin_dir, tmp, processes, rounds):
    import dhpt
    scheduler, address = start_scheduler(bin_dir, os.path.join(tmp, f"dhpt-{processes}.db"))
    try:
        name = f"bench-{processes}"
        dhpt.create_study(name, space={"x": dhpt.float_range(-5.0, 5.0)}, algorithm="RANDOM",
                          max_trials=processes * rounds, client=dhpt.Client(address))
        return run_processes(dhpt_worker, (address, name, rounds), processes)
    finally:
        scheduler.kill()
        scheduler.wait()


def bench_optuna(tmp, processes, rounds, journal):
    optuna = quiet_optuna()
    name = f"bench-{processes}"
    if journal:
        path = os.path.join(tmp, f"optuna-{processes}.log")
        storage = optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(path))
        url = None
    else:
        path = None
        url = storage = f"sqlite:///{os.path.join(tmp, f'optuna-{processes}.db')}"
    optuna.create_study(study_name=name, storage=storage)
    return run_processes(optuna_worker, (url, path, name, rounds), processes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--rounds", type=int, default=50, help="round trips per process")
    parser.add_argument("--processes", default="1,4,16")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="dhpt-ask-tell-bench-")
    rows = []
    try:
        for p in [int(n) for n in args.processes.split(",")]:
            runs = [("dhpt (SQLite, full sync)", bench_dhpt(args.bin, tmp, p, args.rounds)),
                    ("optuna 3.1 SQLite", bench_optuna(tmp, p, args.rounds, journal=False)),
                    ("optuna 3.1 journal file", bench_optuna(tmp, p, args.rounds, journal=True))]
            for name, (rate, times, failed, reasons) in runs:
                times = sorted(times)
                p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
                rows.append((p, name, rate, statistics.median(times) * 1e3, p99 * 1e3, failed))
                print(f"{p:3d} processes  {name:26s} {rate:8.1f}/s  p50 "
                      f"{rows[-1][3]:7.2f} ms  p99 {rows[-1][4]:8.2f} ms  failed {failed} "
                      f"{'; '.join(sorted(reasons))}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| processes | storage | ask+tell per second | p50 (ms) | p99 (ms) | failed |")
    print("|---|---|---|---|---|---|")
    for p, name, rate, p50, p99, failed in rows:
        print(f"| {p} | {name} | {rate:.0f} | {p50:.2f} | {p99:.2f} | {failed} |")
    by = {(p, n): r for p, n, r, _, _, _ in rows}
    for p in sorted({r[0] for r in rows}):
        print(f"{p} processes: DHPT / Optuna SQLite = "
              f"{by[(p, 'dhpt (SQLite, full sync)')] / by[(p, 'optuna 3.1 SQLite')]:.1f}x")


if __name__ == "__main__":
    main()
