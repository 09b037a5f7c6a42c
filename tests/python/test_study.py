"""Studies from Python: create (dict, file, keywords), load_if_exists, get, list, stop, delete,
results (best_trial, best_trials, trials, trials_dataframe), warm starts and watch()."""

import json
import math
import threading

import pytest

import dhpt
from conftest import Scheduler, wait_until
from dhpt.client import pb


def space():
    return {"x": dhpt.float_range(-5.0, 5.0), "n": (1, 8), "kind": ["a", "b c"]}


def finish(study, trials, value=lambda t: (t.params["x"] - 1) ** 2):
    for _ in range(trials):
        trial = study.ask()
        study.tell(trial, value(trial))


def test_create_from_keywords_dict_and_file(client, tmp_path):
    by_keywords = dhpt.create_study("kw", space=space(), objective="loss", max_trials=3,
                                    algorithm="TPE", seed=7, client=client)
    assert by_keywords.spec["model"]["kind"] == "EXTERNAL"
    assert by_keywords.metric_names == ["loss"] and by_keywords.directions == ["minimize"]
    spec = {"name": "from-dict", "model": {"kind": "EXTERNAL"},
            "objective": {"metric": "acc", "goal": "MAXIMIZE"},
            "parameters": [{"name": "lr", "double_range": {"min": 0.001, "max": 0.1, "log": True}}],
            "max_trials": 2}
    assert dhpt.create_study(spec=spec, client=client).directions == ["maximize"]
    path = tmp_path / "study.yaml"
    path.write_text("name: from-file\nmodel: {kind: EXTERNAL}\nobjective: {metric: loss, goal: MINIMIZE}\n"
                    "parameters:\n  - {name: depth, int_range: {min: 2, max: 9}}\nmax_trials: 4\n")
    from_file = dhpt.create_study(spec=str(path), client=client)
    assert from_file.spec["max_trials"] == 4
    (tmp_path / "study.json").write_text(json.dumps({**spec, "name": "from-json"}))
    assert dhpt.create_study(spec=str(tmp_path / "study.json"), client=client).name == "from-json"
    assert sorted(s.name for s in dhpt.get_all_studies(client=client)) == [
        "from-dict", "from-file", "from-json", "kw"]


def test_load_if_exists(client):
    first = dhpt.create_study("again", space=space(), max_trials=3, client=client)
    with pytest.raises(dhpt.AlreadyExists, match="load_if_exists"):
        dhpt.create_study("again", space=space(), max_trials=3, client=client)
    same = dhpt.create_study("again", space=space(), max_trials=3, client=client,
                             load_if_exists=True)
    assert same.name == first.name
    with pytest.raises(dhpt.AlreadyExists,
                       match='parameters differ: "kind" only there, "n" only there, "x" changed'):
        dhpt.create_study("again", space={"x": (0.0, 2.0)}, max_trials=3, client=client,
                          load_if_exists=True)
    # Another budget (dhpt extend changed it since, or the code did): loaded as it is, saying so.
    with pytest.warns(UserWarning, match="max_trials is 3 there and 9 here"):
        loaded = dhpt.create_study("again", space=space(), max_trials=9, client=client,
                                   load_if_exists=True)
    assert loaded.spec["max_trials"] == 3


def test_load_if_exists_resumes_a_study_extended_since(client):
    # The documented script run again after `dhpt extend`: it resumes the extended study.
    dhpt.create_study("resumed", space=space(), max_trials=2, client=client)
    extend = pb.UpdateStudyRequest(name="resumed")
    extend.spec.max_trials = 5
    extend.spec.parallel_trials = 3
    extend.update_mask.paths.extend(["max_trials", "parallel_trials"])
    client.call("UpdateStudy", extend)
    with pytest.warns(UserWarning, match="max_trials is 5 there and 2 here"):
        study = dhpt.create_study("resumed", space=space(), max_trials=2, client=client,
                                  load_if_exists=True)
    assert study.spec["max_trials"] == 5 and study.spec["parallel_trials"] == 3
    finish(study, 5)
    assert study.refresh().state == "COMPLETED" and study.counts["completed"] == 5


def test_spec_is_plain_python_and_creates_a_copy(client):
    spec = {"name": "plain", "model": {"kind": "EXTERNAL"}, "max_trials": 3,
            "algorithm": {"name": "TPE", "seed": 7},
            "objective": {"metric": "loss", "goal": "MINIMIZE"},
            "parameters": [{"name": "n", "int_range": {"min": 0, "max": 10}}]}
    study = dhpt.create_study(spec=spec, client=client)
    plain = study.spec
    assert plain["algorithm"]["seed"] == 7 and plain["max_trials"] == 3
    assert plain["parameters"][0]["int_range"]["min"] == 0
    assert plain["parameters"][0]["int_range"]["max"] == 10
    json.dumps(plain)  # Plain values only.
    copy = dhpt.create_study(spec={**plain, "name": "plain-copy"}, client=client)
    assert {**copy.spec, "name": "plain"} == plain


def test_bad_input_is_a_clear_error_and_changes_nothing(client):
    with pytest.raises(dhpt.NotFound, match="nope"):
        dhpt.load_study("nope", client=client)
    with pytest.raises(dhpt.InvalidArgument, match="min"):
        dhpt.create_study("bad", space={"x": dhpt.float_range(2.0, 1.0)}, client=client)
    with pytest.raises(dhpt.InvalidArgument, match="direction"):
        dhpt.create_study("bad", space=space(), direction="up", client=client)
    assert dhpt.get_all_studies(client=client) == []


def test_states_and_warm_start_rows_given_wrong_are_clear_errors(client):
    # Found by a hostile review: a state given as one string was read letter by letter
    # (ValueError: 'C' is not a valid TrialState), and a row without params was a KeyError.
    study = dhpt.create_study("rows", space=space(), max_trials=3, client=client)
    finish(study, 1)
    assert [t.number for t in study.get_trials(states="COMPLETED")] == [0]
    assert [t.number for t in study.get_trials(states="COMPLETE")] == [0]  # Optuna's name.
    assert study.get_trials(states=dhpt.TrialState.FAILED) == []
    with pytest.raises(dhpt.InvalidArgument, match="'DONE' is not a trial state; one of PENDING"):
        study.get_trials(states=["DONE"])
    # Second review: a state named twice listed its trials twice, none listed them all.
    assert [t.number for t in study.get_trials(states=["COMPLETED", "COMPLETE"])] == [0]
    assert study.get_trials(states=[]) == []
    with pytest.raises(dhpt.InvalidArgument, match="states=3: give a trial state or a list"):
        study.get_trials(states=3)
    with pytest.raises(dhpt.InvalidArgument, match="\\['COMPLETED'\\] is not a trial state"):
        study.get_trials(states=[["COMPLETED"]])
    for row, named in (({"value": 1.0}, "trial 0 is {'value': 1.0}"),
                       ([0.5, 1.0], "trial 0 is \\[0.5, 1.0\\]"),
                       ({"params": [0.5], "value": 1.0}, "give a FrozenTrial or a dict")):
        with pytest.raises(dhpt.InvalidArgument, match=named):
            study.add_trials([row])
    with pytest.raises(dhpt.InvalidArgument, match="add_trials: 'OK' is not a trial state"):
        study.add_trials([{"params": {"x": 0.5, "n": 1, "kind": "a"}, "value": 1.0,
                           "state": "OK"}])
    row = {"params": {"x": 0.5, "n": 1, "kind": "a"}}
    with pytest.raises(dhpt.InvalidArgument, match="trial 0 is FAILED and gives \"value\"; only"):
        study.add_trials([dict(row, value=1.0, state="FAILED")])  # The value was dropped.
    with pytest.raises(dhpt.InvalidArgument, match="gives both \"value\" and \"values\""):
        study.add_trials([dict(row, value=1.0, values=[2.0])])
    assert study.add_trials([{"params": {"x": 0.25, "n": 1, "kind": "a"}, "state": "FAIL"}]) \
        == (1, 0)
    assert [t.state for t in study.trials] == [dhpt.TrialState.COMPLETED, dhpt.TrialState.FAILED]


def test_a_closed_client_says_so(scheduler):
    client = dhpt.Client(scheduler.address)
    study = dhpt.create_study("closed", space=space(), max_trials=2, client=client)
    with client:
        pass  # Closed at the end of the block.
    for call in (study.refresh, study.ask, lambda: next(iter(study.watch()))):
        with pytest.raises(dhpt.FailedPrecondition, match="is closed .* make a new dhpt.Client"):
            call()


def test_stop_and_delete(client):
    study = dhpt.create_study("stopped", space=space(), max_trials=10, client=client)
    trial = study.ask()
    assert study.stop().state == "STOPPED"
    with pytest.raises(dhpt.StudyEnded, match="STOPPED"):
        study.ask()
    assert trial.renew() is True  # Its trial was cancelled: stop evaluating it.
    study.delete()
    with pytest.raises(dhpt.NotFound):
        study.refresh()


def test_results_are_plain_python_values(client):
    study = dhpt.create_study("values", space=space(), max_trials=4, client=client)
    with pytest.raises(dhpt.NotFound):
        study.best_trial
    assert study.best_trials == []
    finish(study, 3)
    failed = study.ask()
    study.tell(failed, state=dhpt.TrialState.FAIL, reason="out of memory")
    trials = study.trials
    assert [t.number for t in trials] == [0, 1, 2, 3]  # Trial 0 has its number.
    zero = trials[0]
    assert zero.state == dhpt.TrialState.COMPLETE and isinstance(zero.number, int)
    assert isinstance(zero.params["n"], int) and isinstance(zero.params["x"], float)
    assert zero.params["kind"] in ("a", "b c") and zero.value == zero.metrics["value"]
    assert trials[3].value is None and "out of memory" in trials[3].error
    best = study.best_trial
    assert best.value == min(t.value for t in trials[:3])
    assert [t.number for t in study.best_trials] == [best.number]
    assert [t.number for t in study.get_trials(states=[dhpt.TrialState.FAILED])] == [3]
    frame = study.trials_dataframe()
    assert list(frame["number"]) == [0, 1, 2, 3]
    assert frame["params_n"].dtype.kind == "i" and math.isnan(frame["value"][3])
    assert list(frame["state"]) == ["COMPLETED"] * 3 + ["FAILED"]
    assert study.refresh().state == "COMPLETED"


def test_many_pages_of_trials(client):
    study = dhpt.create_study("pages", space=space(), max_trials=1, client=client)
    points = [{"params": {"x": i / 1000, "n": 1, "kind": "a"}, "value": i} for i in range(1500)]
    assert study.add_trials(points) == (1500, 0)
    assert study.add_trials(points[:10]) == (0, 10)  # Points the study already has.
    assert len(study.trials) == 1500  # Two pages of ListTrials (1,000 a page).


def test_multi_objective_best_trials(client):
    study = dhpt.create_study("mo", space={"x": (0.0, 1.0)}, objectives=[
        ("time", "minimize"), ("acc", "maximize")], max_trials=6, client=client)
    for _ in range(6):
        trial = study.ask()
        x = trial.params["x"]
        study.tell(trial, values=[x, x * x])  # Every trial trades time for accuracy.
    front = study.best_trials
    assert sorted(t.number for t in front) == list(range(6))
    assert all(len(t.values) == 2 for t in front)
    assert "values_1" in study.trials_dataframe().columns


def test_enqueue_and_add_trials(client):
    study = dhpt.create_study("warm", space=space(), max_trials=3, client=client)
    number = study.enqueue_trial({"x": 0.5, "n": 3, "kind": "b c"})
    trial = study.ask()
    assert trial.number == number and trial.params == {"x": 0.5, "n": 3, "kind": "b c"}
    with pytest.raises(dhpt.InvalidArgument):
        study.enqueue_trial({"x": 99.0, "n": 3, "kind": "a"})
    assert study.add_trial({"params": {"x": 1.0, "n": 2, "kind": "a"}, "value": 0.0}) == (1, 0)
    assert study.refresh().counts["added"] == 1
    assert study.best_trial.params["x"] == 1.0


def test_watch_follows_a_study_to_its_end_and_resumes(scheduler, client):
    study = dhpt.create_study("watched", space=space(), max_trials=3, client=client)
    seen, positions = [], []
    watcher_ready = threading.Event()

    def watch():
        for event in study.watch():
            positions.append(event.position)
            if event.trial is not None:
                seen.append((event.trial.number, event.trial.state))
            watcher_ready.set()

    thread = threading.Thread(target=watch)
    thread.start()
    assert watcher_ready.wait(30)
    finish(study, 1)
    wait_until(lambda: (0, dhpt.TrialState.COMPLETED) in seen, "trial 0 completed in the watch")
    scheduler.restart()  # The stream drops; the watch resumes after its last position.
    finish(study, 2)
    thread.join(60)
    assert not thread.is_alive()  # Ended with the study.
    assert {(n, dhpt.TrialState.COMPLETED) for n in range(3)} <= set(seen)
    assert positions == sorted(positions)


def test_a_tell_over_the_message_limit_fails_its_trial_with_the_reason(tmp_path):
    # gRPC refuses the tell (RESOURCE_EXHAUSTED) before the scheduler reads it: before, tell()
    # raised it as it came and the trial stayed RUNNING until its lease ran out.
    scheduler = Scheduler(tmp_path, ["--max_message_bytes=1024"])
    try:
        study = dhpt.create_study("big", space={"x": (-5.0, 5.0)}, max_trials=3,
                                  client=dhpt.Client(scheduler.address, client_id="big"))
        trial = study.ask()
        expected = (r"RESOURCE_EXHAUSTED: trial 0: the result \(201 values\) is over the "
                    r"scheduler's message limit of 1024 bytes \(Received message larger than max "
                    r"\(\d+ vs\. 1024\); "
                    r"dhpt-scheduler --max_message_bytes\): return the objectives and at most "
                    r"64 metrics in all$")
        with pytest.raises(dhpt.ResourceExhausted, match=expected):
            study.tell(trial, 0.5, metrics={f"m{i}": i for i in range(200)})
        failed = study.trials[0]
        assert failed.state == dhpt.TrialState.FAILED
        assert failed.error.startswith(
            "infeasible: bad result: trial 0: the result (201 values) is over")

        # A reason too long: said as such, and the trial keeps the start of it.
        trial = study.ask()
        with pytest.raises(dhpt.ResourceExhausted, match=r"RESOURCE_EXHAUSTED: trial 1: the "
                           r"reason \(1100 bytes\) is over .* limit of 1024 bytes"):
            study.tell(trial, state=dhpt.TrialState.FAILED, reason="r" * 1100)
        failed = study.trials[1]
        assert failed.state == dhpt.TrialState.FAILED
        assert failed.error.startswith("infeasible: " + "r" * 253 + "... [cut to 256 bytes; bad "
                                       "result: trial 1: the reason (1100 bytes) is over")

        # One long metric name: that name is what is too big, not the number of metrics.
        trial = study.ask()
        with pytest.raises(dhpt.ResourceExhausted, match=r"RESOURCE_EXHAUSTED: trial 2: metric "
                           r"name 'nnnn.*' \(1100 bytes\) is over"):
            study.tell(trial, 0.5, metrics={"n" * 1100: 1.0})
        assert study.trials[2].state == dhpt.TrialState.FAILED
    finally:
        scheduler.kill()


def test_a_conditional_study_keeps_inactive_parameters_absent(client):
    spec = {"name": "conditional", "model": {"kind": "EXTERNAL"}, "max_trials": 6,
            "objective": {"metric": "loss", "goal": "MINIMIZE"},
            "parameters": [
                {"name": "kind", "categorical": {"values": ["a", "b"]}},
                {"name": "depth", "int_range": {"min": 1, "max": 9},
                 "condition": {"parent": "kind", "values": ["b"]}}]}
    study = dhpt.create_study(spec=spec, client=client)
    # A point of branch a, given as params reads it back (the inactive depth as None).
    number = study.enqueue_trial({"kind": "a", "depth": None})
    trial = study.ask()
    assert trial.number == number and trial.params.get("depth") is None
    with pytest.raises(dhpt.InvalidArgument,
                       match=r"'depth' is inactive in trial 0: it applies only when kind is one "
                             r"of \[b\], and this trial has kind='a'"):
        trial.suggest_int("depth", 1, 9)
    assert trial.suggest_categorical("kind", ["a", "b"]) == "a"
    study.tell(trial, 1.0)
    with pytest.raises(dhpt.InvalidArgument):
        study.enqueue_trial({"kind": "a", "depth": 3})  # depth is inactive when kind is a.

    assert study.add_trials([study.trials[0]]) == (0, 1)  # Already there: skipped, not refused.
