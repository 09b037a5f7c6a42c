"""Ask and tell in Optuna's words: suggest_*, report/should_prune, tell, leases held by client
ids (a restarted evaluator gets its trial back), racing results, and bad input."""

import collections
import math
import signal
import threading
import warnings
from concurrent import futures

import grpc
import pytest

import dhpt
from conftest import Scheduler, wait_until


def make(client, name="at", **kwargs):
    kwargs.setdefault("max_trials", 5)
    return dhpt.create_study(name, space={"lr": dhpt.float_range(1e-4, 0.1, log=True),
                                          "depth": dhpt.int_range(2, 10),
                                          "booster": dhpt.categorical(["gbtree", "dart"])},
                             client=client, **kwargs)


def test_suggest_returns_the_schedulers_values_and_refuses_another_space(client):
    study = make(client)
    trial = study.ask()
    assert trial.suggest_float("lr", 1e-4, 0.1, log=True) == trial.params["lr"]
    assert trial.suggest_int("depth", 2, 10) == trial.params["depth"]
    assert trial.suggest_categorical("booster", ["gbtree", "dart"]) == trial.params["booster"]
    with pytest.raises(dhpt.InvalidArgument, match="not in study"):
        trial.suggest_float("momentum", 0.0, 1.0)
    with pytest.raises(dhpt.InvalidArgument, match="disagrees"):
        trial.suggest_float("lr", 1e-4, 0.1)  # Not log.
    with pytest.raises(dhpt.InvalidArgument, match="disagrees"):
        trial.suggest_int("depth", 1, 10)
    with pytest.raises(dhpt.InvalidArgument, match="not a int_range"):
        trial.suggest_int("lr", 0, 1)
    with pytest.raises(dhpt.InvalidArgument, match="disagrees"):
        trial.suggest_categorical("booster", ["gblinear"])
    study.tell(trial, 0.5)  # Nothing above changed the trial.
    assert study.trials[0].state == dhpt.TrialState.COMPLETED


def test_nan_and_wrong_results_are_refused_and_change_nothing(client):
    study = make(client)
    trial = study.ask()
    with pytest.raises(dhpt.InvalidArgument, match="finite"):
        study.tell(trial, math.nan)
    with pytest.raises(dhpt.InvalidArgument, match="objective"):
        study.tell(trial, values=[1.0, 2.0])
    with pytest.raises(dhpt.InvalidArgument, match="not a number"):
        study.tell(trial, "high")
    with pytest.raises(dhpt.InvalidArgument, match="finite"):
        trial.report(math.inf, 1)
    with pytest.raises(dhpt.InvalidArgument, match=r"objective \w+=1000000.*\.\.\. is too large"):
        study.tell(trial, 10**400)  # Too large for a float.
    with pytest.raises(dhpt.InvalidArgument, match="metric cost=inf is not a finite number"):
        study.tell(trial, 0.5, metrics={"cost": math.inf})
    # Found by a hostile review: enqueue and add_trials let Python's OverflowError out.
    with pytest.raises(dhpt.InvalidArgument, match="parameter depth=1000.* is too large"):
        study.enqueue_trial({"lr": 0.01, "depth": 10**400, "booster": "dart"})
    with pytest.raises(dhpt.InvalidArgument, match="parameter lr=nan is not a finite number"):
        study.add_trials([{"params": {"lr": math.nan, "depth": 3, "booster": "dart"}, "value": 1}])
    with pytest.raises(dhpt.InvalidArgument, match="metric cost=1000.* is too large"):
        study.add_trials([{"params": {"lr": 0.01, "depth": 3, "booster": "dart"}, "value": 1,
                           "metrics": {"cost": 10**400}}])
    with pytest.raises(dhpt.InvalidArgument, match="not a number"):
        study.tell(trial, 0.5, metrics={"cost": "cheap"})
    with pytest.raises(dhpt.InvalidArgument, match="integer from 0 to 2\\^63-1"):
        trial.report(1.0, 2**70)
    with pytest.raises(dhpt.InvalidArgument, match="FAILED trial takes a reason, not a value"):
        study.tell(trial, 1.0, state=dhpt.TrialState.FAILED)
    assert [t.state for t in study.trials] == [dhpt.TrialState.RUNNING]  # Nothing added.
    assert study.tell(trial, 10**30).value == 1e30  # An int a double holds.
    with pytest.raises(dhpt.NotFound):
        dhpt.load_study("absent", client=client).ask()


def test_tell_by_another_client_or_twice_is_a_clear_error(scheduler, client):
    study = make(client)
    trial = study.ask()
    other = dhpt.load_study("at", client=dhpt.Client(scheduler.address, client_id="other"))
    with pytest.raises(dhpt.PermissionDenied, match="never given"):
        other.tell(trial.number, 1.0)
    # A listed trial names whoever holds it: telling it is still as this client (it was told
    # as the holder, so another process completed alice's trial in her name: hostile review).
    listed = [t for t in other.trials if t.number == trial.number][0]
    assert listed.client_id == trial.client_id
    with pytest.raises(dhpt.PermissionDenied, match="never given"):
        other.tell(listed, 1.0)
    study.tell(trial, 1.0)
    with pytest.raises(dhpt.FailedPrecondition):
        study.tell(trial, 2.0)
    assert study.best_trial.value == 1.0


def test_a_trial_told_to_another_study_is_refused_and_changes_neither(client):
    first, second = make(client), dhpt.create_study(
        "at-too", space={"x": dhpt.float_range(-5.0, 5.0)}, objective="loss", max_trials=4,
        client=client)
    theirs, ours = second.ask(), first.ask()
    assert theirs.number == ours.number == 0
    # It completed this study's trial 0, of the same number, with the other's result, silently.
    with pytest.raises(dhpt.InvalidArgument, match="'at-too'"):
        first.tell(theirs, 1.0)
    with pytest.raises(dhpt.InvalidArgument, match="its own study"):
        first.tell(second.trials[0], 1.0)  # A FrozenTrial names its study too.
    assert [t.state for t in first.trials] == [dhpt.TrialState.RUNNING]
    assert second.tell(theirs, 2.0).value == 2.0
    assert first.tell(ours, 3.0).value == 3.0


def test_two_clients_racing_to_tell_one_wins(tmp_path):
    scheduler = Scheduler(tmp_path, ["--client_lease=1s"])
    try:
        a = dhpt.Client(scheduler.address, client_id="a")
        b = dhpt.Client(scheduler.address, client_id="b")
        study_a = make(a, parallel_trials=1)
        held = study_a.ask()
        study_b = dhpt.load_study("at", client=b)
        # b waits until a's lease runs out, then gets the same trial.
        taken = study_b.ask(timeout=30)
        assert taken.number == held.number
        results, start = {}, threading.Barrier(2)

        def tell(name, study, trial, value):
            start.wait()
            try:
                results[name] = study.tell(trial, value).value
            except dhpt.DhptError as e:
                results[name] = e

        threads = [threading.Thread(target=tell, args=("a", study_a, held, 1.0)),
                   threading.Thread(target=tell, args=("b", study_b, taken, 2.0))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [v for v in results.values() if not isinstance(v, dhpt.DhptError)]
        losers = [v for v in results.values() if isinstance(v, dhpt.DhptError)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert isinstance(losers[0], dhpt.FailedPrecondition), losers[0]
        assert "trial 0" in losers[0].reason
        assert study_a.trials[0].value == winners[0]
    finally:
        scheduler.kill()


class LosesAnswers(grpc.GenericRpcHandler):
    """A fault between the client and a real scheduler: forwards every unary call, and answers
    CANCELLED after the scheduler has answered, `cut[method]` times (an answer lost on the way
    back, as when the scheduler stops): the client's retry then reaches the scheduler again."""

    def __init__(self, target):
        self.channel = grpc.insecure_channel(target)
        self.cut = collections.Counter()
        self.calls = collections.Counter()

    def service(self, details):
        method = details.method
        forward = self.channel.unary_unary(method)  # Bytes in, bytes out.

        def handle(request, context):
            name = method.rsplit("/", 1)[1]
            self.calls[name] += 1
            try:
                answer = forward(request, timeout=30)
            except grpc.RpcError as e:
                context.abort(e.code(), e.details())
            if self.cut[name] > 0:
                self.cut[name] -= 1
                context.abort(grpc.StatusCode.CANCELLED, "the answer was lost")
            return answer
        return grpc.unary_unary_rpc_method_handler(handle)


@pytest.fixture
def lossy(scheduler):
    handler = LosesAnswers(scheduler.address)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield handler, f"127.0.0.1:{port}"
    server.stop(None)
    handler.channel.close()


def test_each_ask_is_a_new_trial_and_a_retried_ask_gets_its_own(lossy):
    handler, address = lossy
    client = dhpt.Client(address, client_id="parallel-asks", retry_seconds=30)
    study = make(client, "asks", max_trials=10)
    first = study.ask()
    handler.cut["SuggestTrials"] = 1
    second = study.ask()  # Given a trial, answered CANCELLED, asked again: the same trial.
    third = study.ask()
    assert handler.calls["SuggestTrials"] == 4
    assert len({first.number, second.number, third.number}) == 3  # Three to evaluate at once.
    # No trial was leaked to the lost answer: the study has these three, each running.
    assert sorted((t.number, t.state) for t in study.trials) == sorted(
        (t.number, dhpt.TrialState.RUNNING) for t in (first, second, third))
    for trial in (third, first, second):  # Told in any order.
        study.tell(trial, float(trial.number))
    assert [t.state for t in study.trials] == [dhpt.TrialState.COMPLETED] * 3


def test_a_killed_evaluator_restarted_with_its_id_gets_its_trial_back(scheduler, client,
                                                                     children):
    make(client)
    code = ("import dhpt; s = dhpt.load_study('at'); t = s.ask(); print(t.number, flush=True);"
            " import time; time.sleep(600)")
    env = {"DHPT_SCHEDULER": scheduler.address, "DHPT_CLIENT_ID": "evaluator-7"}
    first = children(code, env)
    number = int(first.line())
    first.kill()
    # Another evaluator gets another trial: the first is still leased to evaluator-7.
    assert dhpt.load_study("at", client=client).ask().number != number
    second = children(code, env)
    assert int(second.line()) == number


def test_evaluators_ride_out_a_graceful_scheduler_restart(tmp_path):
    scheduler = Scheduler(tmp_path)
    try:
        dhpt.create_study("restarted", space={"x": dhpt.float_range(0.0, 1.0)}, objective="loss",
                          max_trials=100000, parallel_trials=100,
                          client=dhpt.Client(scheduler.address))
        done, lock, told, refused = threading.Event(), threading.Lock(), {}, []

        def evaluate(k):
            study = dhpt.load_study("restarted", client=dhpt.Client(
                scheduler.address, client_id=f"evaluator-{k}", retry_seconds=30))
            while not done.is_set():
                try:
                    trial = study.ask()
                    study.tell(trial, trial.number + 0.5)
                    with lock:
                        told[trial.number] = trial.number + 0.5
                except dhpt.DhptError as e:  # A call the scheduler's stop cut: CANCELLED.
                    with lock:
                        refused.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=evaluate, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for _ in range(3):
            wait_until(lambda: len(told) > 50, "trials told before the stop")
            scheduler.process.send_signal(signal.SIGTERM)  # Graceful: calls in flight end first.
            scheduler.process.wait()
            told_before = len(told)
            scheduler.start()
            wait_until(lambda: len(told) > told_before, "trials told after the restart")
        done.set()
        for thread in threads:
            thread.join()
        assert refused == []
        stored = {t.number: t for t in dhpt.load_study(
            "restarted", client=dhpt.Client(scheduler.address)).trials}
        assert all(stored[n].state == dhpt.TrialState.COMPLETED and stored[n].value == v
                   for n, v in told.items())
    finally:
        scheduler.kill()


def test_report_renews_the_lease_and_should_prune_follows_the_studys_rule(client):
    study = make(client, max_trials=4,
                 early_stopping={"median": {"n_startup_trials": 2}})
    for _ in range(2):  # Two good curves: 1.0 at every step.
        trial = study.ask()
        for step in range(3):
            assert trial.report(1.0, step) is False
        study.tell(trial, 1.0)
    bad = study.ask()
    bad.report(5.0, 0)
    assert bad.should_prune()
    assert "median" in bad.prune_reason or bad.prune_reason
    assert study.tell(bad, state=dhpt.TrialState.PRUNED).state == dhpt.TrialState.PRUNED
    assert study.trials[2].state == dhpt.TrialState.PRUNED
    good = study.ask()
    good.report(0.5, 0)
    assert not good.should_prune()


def test_a_report_the_scheduler_ignores_is_a_warning(client):
    # The scheduler keeps increasing steps only; a repeated step was dropped silently.
    study = make(client, max_trials=1)
    trial = study.ask()
    trial.report(1.0, 3)
    with pytest.warns(UserWarning, match="step 3 of trial 0 is not after its last reported step 3"):
        trial.report(0.5, 3)
    with pytest.warns(UserWarning, match="step 2 of trial 0 is not after"):
        trial.report(0.5, 2)
    with pytest.warns(UserWarning, match="past 2\\*\\*53"):
        trial.report(0.5, 2**53 + 1)
    for step in (4.5, "5", True):  # Read as steps 4, 5 and 1 before.
        with pytest.raises(dhpt.InvalidArgument, match="must be an integer"):
            trial.report(0.5, step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trial.report(0.25, 4)
    study.tell(trial, 0.25)
    curve = study.get_trials(intermediate_values=True)[0].intermediate_values
    assert curve == {3: 1.0, 4: 0.25}


def test_ask_waits_for_a_free_trial(scheduler, client):
    study = make(client, parallel_trials=1)
    held = study.ask()
    other = dhpt.load_study("at", client=dhpt.Client(scheduler.address, client_id="waiter"))
    with pytest.raises(dhpt.DeadlineExceeded, match="parallel_trials"):
        other.ask(timeout=0.2)
    got = []
    waiter = threading.Thread(target=lambda: got.append(other.ask(timeout=30)))
    waiter.start()
    study.tell(held, 1.0)  # Frees the one slot: the waiting ask gets the next trial.
    waiter.join(30)
    assert got and got[0].number == held.number + 1


def test_a_trial_the_client_prunes_by_itself_ends_pruned(client):
    study = make(client, max_trials=2)  # No early-stopping rule: only the client stops it.
    trial = study.ask()
    trial.report(0.9, 0)
    assert not trial.should_prune()
    told = study.tell(trial, state=dhpt.TrialState.PRUNED)
    assert told.state == dhpt.TrialState.PRUNED and "pruned by client" in told.error
    with pytest.raises(dhpt.FailedPrecondition):
        study.tell(trial, 0.5)  # Settled once.
    study.tell(study.ask(), 0.5)
    assert study.refresh().counts["pruned"] == 1 and study.state == "COMPLETED"


def test_a_failure_reason_as_long_as_a_traceback_fails_the_trial(client):
    # Found by a hostile review: a reason over 2048 bytes was refused, the trial left RUNNING.
    study = make(client)
    trial = study.ask()
    reason = "Traceback (most recent call last):\n" + "  File \"x.py\", line 1\n" * 300
    told = study.tell(trial, state=dhpt.TrialState.FAILED, reason=reason)
    assert told.state == dhpt.TrialState.FAILED
    assert told.error.startswith("infeasible: Traceback (most recent call last):")
    assert told.error.endswith("...") and len(told.error.encode()) < 2100
