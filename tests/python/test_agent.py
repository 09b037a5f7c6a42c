"""Running objectives here: optimize() in threads and processes, failures, pruning, Ctrl-C,
a scheduler restart ridden out, and dhpt.agent joining a study from several processes."""

import os
import signal
import sys
import threading

import pytest

import dhpt
from conftest import Scheduler


def quadratic(trial):
    x = trial.suggest_float("x", -5.0, 5.0)
    return (x - 2) ** 2


def make(client, name="opt", max_trials=6, **kwargs):
    return dhpt.create_study(name, space={"x": (-5.0, 5.0)}, max_trials=max_trials,
                             client=client, **kwargs)


def test_optimize_in_threads_each_with_its_own_client_id(client):
    study = make(client, max_trials=8, parallel_trials=4)
    together = threading.Barrier(3)

    def objective(trial):
        if trial.number < 3:  # The first three run at once, one in each thread.
            together.wait(timeout=60)
        return quadratic(trial)

    assert study.optimize(objective, n_jobs=3) == 8  # n_trials=None: until the study ends.
    trials = study.trials
    assert [t.state for t in trials] == [dhpt.TrialState.COMPLETED] * 8
    assert {t.client_id for t in trials[:3]} == {f"test-client-{i}" for i in range(3)}
    assert study.refresh().state == "COMPLETED"


def die_on_the_first_trial(trial):
    if trial.number == 0:
        os.kill(os.getpid(), signal.SIGKILL)  # As the kernel's OOM killer would.
    return quadratic(trial)


def test_an_evaluator_process_that_dies_is_named_and_its_trial_handed_back(client):
    # Found by a hostile review: optimize(processes=True) waited forever for the dead process,
    # and its trial stayed RUNNING for the whole lease.
    study = make(client, max_trials=4)
    with pytest.raises(dhpt.DhptError, match=r"process .*-p[01] died \(killed by SIGKILL\)"):
        study.optimize(die_on_the_first_trial, n_jobs=2, processes=True)
    first = study.trials[0]
    assert first.state == dhpt.TrialState.PENDING and "handed it back" in first.error


def test_optimize_in_processes(client):
    study = make(client, max_trials=4)
    assert study.optimize(quadratic, n_trials=4, n_jobs=2, processes=True) == 4
    trials = study.trials
    assert all(t.state == dhpt.TrialState.COMPLETED for t in trials)
    assert {t.client_id.rsplit("-", 1)[1] for t in trials} <= {"p0", "p1"}


def test_n_trials_and_results_as_sequences_or_metrics(client):
    study = make(client, max_trials=10)
    assert study.optimize(lambda t: {"value": quadratic(t), "loss_train": 1.5}, n_trials=2) == 2
    assert study.trials[1].metrics["loss_train"] == 1.5
    assert study.optimize(lambda t: [quadratic(t)], n_trials=1) == 1
    assert len(study.trials) == 3


def test_exceptions_fail_the_trial_with_their_last_line(client):
    study = make(client, max_trials=3)

    def broken(trial):
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="CUDA"):
        study.optimize(broken)
    assert study.trials[0].state == dhpt.TrialState.FAILED
    assert "RuntimeError: CUDA out of memory" in study.trials[0].error
    assert study.optimize(broken, n_trials=2, catch=(RuntimeError,)) == 2
    assert [t.state for t in study.trials] == [dhpt.TrialState.FAILED] * 3


def test_an_exception_with_a_long_message_still_fails_its_trial(client):
    # The scheduler keeps reasons of up to 2048 bytes and refused the tell of a longer one: the
    # trial stayed RUNNING and INVALID_ARGUMENT escaped in place of the objective's exception.
    study = make(client, max_trials=1)

    def broken(trial):
        raise RuntimeError("CUDA out of memory: " + "é" * 3000)

    with pytest.raises(RuntimeError, match="CUDA"):
        study.optimize(broken)
    trial = study.trials[0]
    assert trial.state == dhpt.TrialState.FAILED
    assert "RuntimeError: CUDA out of memory: éé" in trial.error
    assert trial.error.endswith("é...")  # Cut at 2048 bytes, never inside a character.


def test_an_objective_returning_none_is_named_in_the_error(client):
    # Without its own message the scheduler's refusal was "give the trial's metrics, or an
    # infeasible_reason", which does not point at the missing return.
    study = make(client)
    expected = (r"trial 0: the objective returned None; it must return a number \(or a dict of "
                r"the study's objectives: value\)")
    with pytest.raises(dhpt.InvalidArgument, match=expected):
        study.optimize(lambda trial: None)
    trial = study.trials[0]
    assert trial.state == dhpt.TrialState.FAILED
    assert "bad result: trial 0: the objective returned None" in trial.error


def test_a_result_over_the_message_limit_fails_its_trial_with_the_reason(tmp_path):
    # gRPC refuses the tell (RESOURCE_EXHAUSTED) before the scheduler reads it: before, the
    # error escaped optimize() and the trial stayed RUNNING until its lease ran out.
    scheduler = Scheduler(tmp_path, ["--max_message_bytes=65536"])
    try:
        study = make(dhpt.Client(scheduler.address, client_id="big"), max_trials=3)
        many = {f"m{i}": 1.0 for i in range(5000)}  # About 90 kB of metrics.

        def objective(trial):
            return {"value": quadratic(trial), **many}

        expected = (r"trial 0: the result \(5001 values\) is over the scheduler's message "
                    r"limit of 65536 bytes \(.*--max_message_bytes\): return the objectives "
                    r"and at most 64 metrics in all")
        with pytest.raises(dhpt.ResourceExhausted, match=expected):
            study.optimize(objective)
        trial = study.trials[0]
        assert trial.state == dhpt.TrialState.FAILED
        assert "bad result: trial 0: the result (5001 values) is over" in trial.error
        # Caught, as any other exception: each such trial fails and optimize() goes on.
        assert study.optimize(objective, n_trials=2, catch=(dhpt.ResourceExhausted,)) == 2
        assert [t.state for t in study.trials] == [dhpt.TrialState.FAILED] * 3
    finally:
        scheduler.kill()


def test_pruning_through_should_prune(client):
    study = make(client, max_trials=6, early_stopping={"median": {"n_startup_trials": 2}})

    def objective(trial):
        bad = trial.number >= 2 and trial.number % 2 == 0
        for step in range(5):
            trial.report(10.0 if bad else 1.0, step)
            if trial.should_prune():
                raise dhpt.TrialPruned()
        return 1.0

    assert study.optimize(objective) == 6
    states = [t.state for t in study.trials]
    assert states == [dhpt.TrialState.COMPLETED] * 2 + [
        dhpt.TrialState.PRUNED, dhpt.TrialState.COMPLETED] * 2, states
    assert study.refresh().counts["pruned"] == 2


def test_a_scheduler_restart_during_optimize_is_ridden_out(scheduler, client):
    study = make(client, max_trials=6)
    reached, restarted = threading.Event(), threading.Event()

    def objective(trial):
        if trial.number == 2:
            reached.set()
            assert restarted.wait(60)
        return quadratic(trial)

    done = []
    runner = threading.Thread(target=lambda: done.append(study.optimize(objective, n_jobs=2)))
    runner.start()
    assert reached.wait(60)
    scheduler.restart()  # SIGKILL, then the same port and database.
    restarted.set()
    runner.join(120)
    assert done == [6]
    study.refresh()
    assert study.state == "COMPLETED" and study.counts["completed"] == 6


def test_a_study_stopped_during_optimize_ends_it_quietly(scheduler, client):
    # Found by a hostile review: `dhpt stop` during optimize() or dhpt.agent() raised
    # FailedPrecondition ("trial 2 is already CANCELLED") out of every evaluator.
    study = make(client, max_trials=10)
    stopper = dhpt.load_study("opt", client=dhpt.Client(scheduler.address, client_id="user"))

    def stopped_midway(trial):
        if trial.number == 2:
            stopper.stop()
        return quadratic(trial)

    with pytest.warns(UserWarning, match="trial 2 of study 'opt': result not kept"):
        assert study.optimize(stopped_midway) == 2
    assert study.refresh().state == "STOPPED"
    assert [t.state for t in study.trials] == [dhpt.TrialState.COMPLETED] * 2 + [
        dhpt.TrialState.CANCELLED]


def test_sys_exit_in_the_objective_hands_its_trial_back(client):
    study = make(client, max_trials=3)
    with pytest.raises(SystemExit):
        study.optimize(lambda trial: sys.exit(3))
    trial = study.trials[0]
    assert trial.state == dhpt.TrialState.PENDING and "handed it back" in trial.error


def test_ctrl_c_stops_and_hands_back_the_trial(scheduler, client, children):
    make(client, max_trials=5)
    code = ("import dhpt, sys\n"
            "def slow(trial):\n"
            "    print(trial.number, flush=True); sys.stdin.readline()\n"
            "try:\n"
            "    dhpt.load_study('opt').optimize(slow)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n")
    child = children(code, {"DHPT_SCHEDULER": scheduler.address, "DHPT_CLIENT_ID": "ctrl-c"})
    number = int(child.line())
    child.process.send_signal(signal.SIGINT)
    assert child.line() == "interrupted"
    assert child.process.wait(30) == 0
    study = dhpt.load_study("opt", client=client)
    trial = study.trials[number]
    assert trial.state == dhpt.TrialState.PENDING and "handed it back" in trial.error
    again = study.ask()  # Another client gets the same point, uncharged.
    assert again.number == number and again.params == trial.params
    told = study.tell(again, 1.0)
    assert told.attempt == 2 and told.lost_attempts == 0


def test_agents_on_two_machines_share_a_study(scheduler, client, children):
    make(client, "shared", max_trials=8, parallel_trials=2)
    code = ("import dhpt\n"
            "def f(trial):\n"
            "    return (trial.suggest_float('x', -5.0, 5.0) - 2) ** 2\n"
            "print('ran', dhpt.agent('shared', f), flush=True)\n")
    agents = [children(code, {"DHPT_SCHEDULER": scheduler.address,
                              "DHPT_CLIENT_ID": f"machine-{i}"}) for i in range(2)]
    ran = [int(a.line().split()[1]) for a in agents]
    assert sum(ran) == 8
    study = dhpt.load_study("shared", client=client)
    assert study.state == "COMPLETED"
    assert {t.client_id for t in study.trials} <= {"machine-0", "machine-1"}


def test_agent_on_a_study_that_does_not_exist(scheduler, client):
    with pytest.raises(dhpt.NotFound, match="absent"):
        dhpt.agent("absent", quadratic, client=client)


def test_function_study_on_a_worker_is_watched_and_listed(scheduler, client, cpu_worker):
    spec = {"name": "branin", "model": {"kind": "FUNCTION", "function": "branin"},
            "objective": {"metric": "value", "goal": "MINIMIZE"},
            "parameters": [{"name": "x1", "double_range": {"min": -5, "max": 10}},
                           {"name": "x2", "double_range": {"min": 0, "max": 15}}],
            "max_trials": 4}
    study = dhpt.create_study(spec=spec, client=client)
    ended = [e.study for e in study.watch(summaries_only=True) if e.study]
    assert ended[-1].state == "COMPLETED"
    assert all(t.worker_id == "py-worker" for t in study.trials)
    assert study.best_trial.value == min(t.value for t in study.trials)


def test_optimize_stops_at_its_timeout(scheduler, client):
    study = make(client, max_trials=5, parallel_trials=1)
    other = dhpt.load_study("opt", client=dhpt.Client(scheduler.address, client_id="holder"))
    held = other.ask()  # The one trial allowed at a time: optimize finds none free.
    assert study.optimize(quadratic, timeout=0.5) == 0
    other.tell(held, 1.0)
    assert study.optimize(quadratic, timeout=60) == 4  # Then it runs the rest.


def test_optimize_keeps_the_lease_of_an_objective_that_never_reports(tmp_path):
    scheduler = Scheduler(tmp_path, ["--client_lease=1s"])
    running, finish = threading.Event(), threading.Event()
    try:
        study = make(dhpt.Client(scheduler.address, client_id="slow"), max_trials=1,
                     parallel_trials=1)

        def slow(trial):
            running.set()
            assert finish.wait(60)
            return 1.0

        runner = threading.Thread(target=study.optimize, args=(slow,))
        runner.start()
        assert running.wait(60)
        other = dhpt.load_study("opt", client=dhpt.Client(scheduler.address, client_id="other"))
        # Three leases long, the trial stays with its evaluator: nobody else gets it.
        with pytest.raises(dhpt.DeadlineExceeded):
            other.ask(timeout=3)
        finish.set()
        runner.join(60)
        trial = study.trials[0]
        assert trial.state == dhpt.TrialState.COMPLETED and trial.client_id == "slow"
        assert trial.lost_attempts == 0
    finally:
        finish.set()
        scheduler.kill()
