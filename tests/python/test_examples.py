"""examples/python run as documented, with short budgets, against a real scheduler."""

import os
import subprocess
import sys

import dhpt
from conftest import ROOT

EXAMPLES = os.path.join(ROOT, "examples", "python")


def run(scheduler, *args, client_id=None):
    env = {**os.environ, "DHPT_SCHEDULER": scheduler.address,
           "PYTHONPATH": os.path.join(ROOT, "clients", "python")}
    if client_id:
        env["DHPT_CLIENT_ID"] = client_id
    return subprocess.Popen([sys.executable, os.path.join(EXAMPLES, args[0]), *args[1:]],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finished(process):
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0, out
    return out


def test_sklearn_with_pruning(scheduler, client):
    out = finished(run(scheduler, "sklearn_pruning.py", "--trials", "10"))
    study = dhpt.load_study("sklearn-sgd", client=client)
    assert study.state == "COMPLETED" and "best r2" in out
    assert sum(study.counts[k] for k in ("completed", "pruned")) == 10


def test_xgboost_with_two_jobs(scheduler, client):
    out = finished(run(scheduler, "xgboost_optimize.py", "--trials", "4"))
    study = dhpt.load_study("xgboost-friedman", client=client)
    assert study.state == "COMPLETED" and study.best_trial.value > 0.5, out
    assert len({t.client_id for t in study.trials}) == 2  # One client id per thread.


def test_multi_objective_front(scheduler, client):
    out = finished(run(scheduler, "multi_objective.py", "--trials", "6"))
    study = dhpt.load_study("forest-r2-vs-cost", client=client)
    assert f"Pareto front of {len(study.best_trials)} trials" in out
    assert all("nodes" in t.metrics for t in study.trials)


def test_agents_on_two_machines(scheduler, client):
    finished(run(scheduler, "agent.py", "--create", "--trials", "6"))
    agents = [run(scheduler, "agent.py", client_id=f"machine-{i}") for i in range(2)]
    outs = [finished(a) for a in agents]
    assert sum(int(o.split(" ran ")[1].split()[0]) for o in outs) == 6
    assert dhpt.load_study("gbr-agents", client=client).state == "COMPLETED"
