"""Studies in Optuna's words: create_study, load_study, ask, tell, best_trial(s), trials.

A study made here from keyword arguments is an EXTERNAL one (evaluated by this client and its
peers); a dict or a YAML/JSON file may hold any study the CLI accepts (docs/python.md).
"""

import json
import math
import operator
import re
import threading
import time
import uuid
import warnings

from google.protobuf import json_format

from . import errors
from .client import Client, check_client_id, common_pb, pb
from .trial import (FrozenTrial, Trial, TrialState, finite_number, parameter_value,
                    plain_message, shortened)

_ENDED = ("COMPLETED", "STOPPED", "FAILED")
# ask() when every trial is leased to others: first wait, and the longest between two asks.
_ASK_FIRST_WAIT = 0.02
_ASK_MAX_WAIT = 1.0
# The (scheduler, study, client id) this process has asked for a trial: the first ask of each
# resumes what that id holds (an evaluator restarted with its id gets its trial back); every
# later one is a new ask, with its own request id.
_ASKED = set()
_ASKED_LOCK = threading.Lock()


def _ask_request_id(scheduler, study, client_id):
    """'' for the first ask of `study` as `client_id` in this process (the scheduler answers
    the trials the id holds first), else an id of its own that the ask's retries repeat."""
    key = (scheduler, study, client_id)
    with _ASKED_LOCK:
        if key not in _ASKED:
            _ASKED.add(key)
            return ""
    return uuid.uuid4().hex

# The most metrics the scheduler keeps of one result (kMaxResultMetrics in
# services/scheduler/scheduler_core.h): named when a result is refused for its size.
MAX_RESULT_METRICS = 64
# The longest reason a failed trial keeps, in bytes of UTF-8 (kMaxWorkerErrorBytes, same header).
MAX_REASON_BYTES = 2048
# What a trial failed for its size keeps of the caller's own reason: the failure must itself
# fit under the smallest message limit (--max_message_bytes >= 1024). As dhpt tell's
# (kKeptTellReasonBytes in services/cli/ask_tell.h).
KEPT_REASON_BYTES = 256


def clip(reason, limit=MAX_REASON_BYTES):
    """The reason cut to `limit` bytes of UTF-8: a longer one than the scheduler keeps is
    refused (INVALID_ARGUMENT), and the trial would then not be told at all."""
    data = reason.encode()
    if len(data) <= limit:
        return reason
    return data[:limit - 3].decode(errors="ignore") + "..."


def oversized_result(e, request):
    """gRPC's refusal of a CompleteTrialRequest over the message limit ("Received message
    larger than max (N vs. M)", before the scheduler read it) in words its caller can act on:
    what is too big and the limit in bytes. None for any other error. As dhpt tell's
    (OversizedTellReason in services/cli/ask_tell.cc): keep the two alike."""
    if not isinstance(e, errors.ResourceExhausted) or "larger than max" not in e.reason:
        return None
    limit = re.search(r"vs\. (\d+)\)", e.reason)
    limit = f"of {limit.group(1)} bytes " if limit else ""
    reason_bytes = len(request.infeasible_reason.encode())
    names = [name.encode() for name in request.metrics]
    longest = max(names, key=len, default=b"")
    metric_bytes = sum(len(name) + 12 for name in names)  # A map entry: its name, a double, tags.
    if reason_bytes >= metric_bytes:
        what, fix = f"the reason ({reason_bytes} bytes)", "give a shorter reason"
    elif 2 * len(longest) > metric_bytes:  # One name is most of the result.
        shown = clip(longest.decode(errors="ignore"), 40)
        what, fix = f"metric name {shown!r} ({len(longest)} bytes)", "give shorter metric names"
    else:
        what = f"the result ({len(names)} {'value' if len(names) == 1 else 'values'})"
        fix = f"return the objectives and at most {MAX_RESULT_METRICS} metrics in all"
    return errors.ResultOverMessageLimit(
        f"trial {request.trial}: {what} is over the scheduler's message limit {limit}"
        f"({e.reason}; dhpt-scheduler --max_message_bytes): {fix}")


def failure_reason(refusal, request):
    """The reason a trial refused for its size fails with: a cut of the caller's own, if any."""
    reason = f"bad result: {refusal.reason}"
    own = request.infeasible_reason
    if own and len(own.encode()) <= KEPT_REASON_BYTES:
        reason = f"{own} [{reason}]"
    elif own:
        reason = f"{clip(own, KEPT_REASON_BYTES)} [cut to {KEPT_REASON_BYTES} bytes; {reason}]"
    return clip(reason)


# --- The search space, as keyword arguments ---

def float_range(low, high, *, log=False, step=None):
    return {"double_range": {"min": low, "max": high, "log": log, "step": step or 0}}


def int_range(low, high, *, log=False, step=None):
    return {"int_range": {"min": low, "max": high, "log": log, "step": step or 0}}


def categorical(values):
    return {"categorical": {"values": [str(v) for v in values]}}


def discrete(values):
    return {"discrete": {"values": [float(v) for v in values]}}


def _parameter(name, domain):
    """One parameter from a shorthand: (low, high) of ints or floats, a list of choices, or a
    domain dict (float_range(...), or the spec's own {"double_range": {...}})."""
    if isinstance(domain, dict):
        return {"name": name, **domain}
    if isinstance(domain, tuple) and len(domain) == 2:
        low, high = domain
        if isinstance(low, int) and isinstance(high, int):
            return {"name": name, **int_range(low, high)}
        return {"name": name, **float_range(float(low), float(high))}
    if isinstance(domain, list):
        return {"name": name, **categorical(domain)}
    raise errors.InvalidArgument(
        f"space[{name!r}]: give (low, high), a list of choices, or dhpt.float_range / "
        f"int_range / categorical / discrete")


def _goal(direction):
    goal = str(direction).upper()
    if goal not in ("MINIMIZE", "MAXIMIZE"):
        raise errors.InvalidArgument(f"direction {direction!r}: minimize or maximize")
    return goal


def _objective(objective, direction):
    if isinstance(objective, dict):
        return objective
    if isinstance(objective, tuple):
        objective, direction = objective
    return {"metric": objective, "goal": _goal(direction)}


def _load_file(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if str(path).endswith((".yaml", ".yml")):
        import yaml  # Debian's python3-yaml; only studies kept as YAML need it.
        return yaml.safe_load(text)
    return json.loads(text)


def build_spec(name=None, *, spec=None, space=None, objective=None, direction="minimize",
               objectives=None, constraints=None, algorithm=None, seed=None,
               early_stopping=None, max_trials=None, parallel_trials=None,
               max_failed_trials=None):
    """A StudySpec from a dict or file (`spec`) and/or keyword arguments, which win."""
    if isinstance(spec, (str, bytes)) or hasattr(spec, "__fspath__"):
        spec = _load_file(spec)
    fields = dict(spec or {})
    if space is not None:
        fields["parameters"] = [_parameter(n, d) for n, d in space.items()]
    if not spec:
        fields.setdefault("model", {"kind": "EXTERNAL"})
    if objectives is not None:
        fields["objectives"] = [_objective(o, "minimize") for o in objectives]
    elif objective is not None or not (fields.get("objective") or fields.get("objectives")):
        fields["objective"] = _objective(objective or "value", direction)
    if constraints is not None:
        fields["constraints"] = list(constraints)
    if algorithm is not None:
        fields["algorithm"] = {"name": algorithm.upper()} if isinstance(algorithm, str) else algorithm
    if seed is not None:
        fields.setdefault("algorithm", {})["seed"] = seed
    if early_stopping is not None:
        fields["early_stopping"] = ({early_stopping: {}} if isinstance(early_stopping, str)
                                    else early_stopping)
    for key, value in (("name", name), ("max_trials", max_trials),
                       ("parallel_trials", parallel_trials),
                       ("max_failed_trials", max_failed_trials)):
        if value is not None:
            fields[key] = value
    if not fields.get("name"):
        raise errors.InvalidArgument("a study needs a name")
    try:
        return json_format.ParseDict(fields, common_pb.StudySpec())
    except json_format.ParseError as e:
        raise errors.InvalidArgument(f"study spec: {e}") from None


# --- Studies on a scheduler ---

# What UpdateStudy (dhpt extend) may change after a study was created (kUpdatableFields in
# services/scheduler/update_study.cc): create_study(load_if_exists=True) keeps the stored ones.
UPDATABLE_FIELDS = ("max_trials", "parallel_trials", "max_failed_trials", "trial_timeout")

def _client(client, connection):
    if client is not None and connection:
        raise errors.InvalidArgument("give a client or connection settings, not both")
    return client or Client(**connection)


def create_study(name=None, *, load_if_exists=False, client=None, spec=None, space=None,
                 objective=None, direction="minimize", objectives=None, constraints=None,
                 algorithm=None, seed=None, early_stopping=None, max_trials=None,
                 parallel_trials=None, max_failed_trials=None, **connection):
    """Creates a study; with load_if_exists, the study of that name when it has the same spec
    but for the budget and limits UpdateStudy changes (dhpt extend), which it keeps; any other
    difference is dhpt.AlreadyExists, naming it."""
    client = _client(client, connection)
    request = build_spec(name, spec=spec, space=space, objective=objective, direction=direction,
                         objectives=objectives, constraints=constraints, algorithm=algorithm,
                         seed=seed, early_stopping=early_stopping, max_trials=max_trials,
                         parallel_trials=parallel_trials, max_failed_trials=max_failed_trials)
    if not load_if_exists:
        try:
            client.call("GetStudy", pb.GetStudyRequest(name=request.name))
            raise errors.AlreadyExists(
                f"study {request.name!r} already exists; load it with dhpt.load_study or "
                f"create_study(..., load_if_exists=True)")
        except errors.NotFound:
            pass
    try:
        return Study(client, client.call("CreateStudy", request))
    except errors.AlreadyExists as e:
        if not load_if_exists:
            raise
        refusal = e
    # Extended or limited since this code last created it (dhpt extend): resumed as it is now,
    # with a warning. The scheduler still compares the rest, and names what differs.
    stored = client.call("GetStudy", pb.GetStudyRequest(name=request.name)).spec
    present = {field.name: value for field, value in stored.ListFields()}
    for field in UPDATABLE_FIELDS:
        request.ClearField(field)
        if field not in present:
            continue
        if hasattr(present[field], "CopyFrom"):  # trial_timeout, a Duration.
            getattr(request, field).CopyFrom(present[field])
        else:
            setattr(request, field, present[field])
    study = Study(client, client.call("CreateStudy", request))
    warnings.warn(f"create_study: loaded study {request.name!r} with its stored budget and "
                  f"limits, not the ones given: {refusal.reason}", stacklevel=2)
    return study


def load_study(name, *, client=None, **connection):
    """The study of that name (dhpt.NotFound when there is none)."""
    client = _client(client, connection)
    return Study(client, client.call("GetStudy", pb.GetStudyRequest(name=name)))


def get_all_studies(*, client=None, **connection):
    """Every study on the scheduler (following pages)."""
    client = _client(client, connection)
    studies, token = [], ""
    while True:
        page = client.call("ListStudies", pb.ListStudiesRequest(page_token=token))
        studies += [Study(client, s) for s in page.studies]
        token = page.next_page_token
        if not token:
            return studies


def delete_study(name, *, force=False, client=None, **connection):
    _client(client, connection).call(
        "DeleteStudy", pb.DeleteStudyRequest(name=name, force=force), retry=False)


class WatchEvent:
    """One change of a watched study: `study` (a summary) or `trial`, and its position."""

    def __init__(self, position, study=None, trial=None):
        self.position, self.study, self.trial = position, study, trial

    def __repr__(self):
        return f"WatchEvent(position={self.position}, {'study' if self.study else 'trial'}=" \
               f"{self.study or self.trial!r})"


class Study:
    """A study on the scheduler, as of the last answer about it (refresh() fetches it again)."""

    def __init__(self, client, study):
        self._client = client
        self._pb = study
        self.name = study.spec.name

    def __repr__(self):
        return f"Study(name={self.name!r}, state={self.state}, trials_completed=" \
               f"{self._pb.trials_completed})"

    # --- What the study is ---
    @property
    def client(self):
        return self._client

    @property
    def spec(self):
        """The spec as a plain dict (snake_case names, int64 as ints, zero values shown) that
        create_study(spec=...) takes back."""
        return plain_message(self._pb.spec)

    @property
    def state(self):
        return common_pb.Study.State.Name(self._pb.state)

    @property
    def state_reason(self):
        return self._pb.state_reason

    @property
    def counts(self):
        s = self._pb
        return {"pending": s.trials_pending, "running": s.trials_running,
                "completed": s.trials_completed, "failed": s.trials_failed,
                "cancelled": s.trials_cancelled, "pruned": s.trials_pruned,
                "added": s.trials_added}

    def _objectives(self):
        spec = self._pb.spec
        return list(spec.objectives) or [spec.objective]

    @property
    def metric_names(self):
        return [o.metric for o in self._objectives()]

    @property
    def directions(self):
        return [common_pb.Objective.Goal.Name(o.goal).lower() for o in self._objectives()]

    def _parameters(self):
        return {p.name: p for p in self._pb.spec.parameters}

    def refresh(self):
        self._pb = self._client.call("GetStudy", pb.GetStudyRequest(name=self.name))
        return self

    def stop(self):
        self._pb = self._client.call("StopStudy", pb.StopStudyRequest(name=self.name))
        return self

    def delete(self, force=False):
        delete_study(self.name, force=force, client=self._client)

    # --- Results ---
    @property
    def best_trial(self):
        """The best completed trial (dhpt.NotFound until one has completed)."""
        return FrozenTrial(self._client.call("GetBestTrial",
                                             pb.GetBestTrialRequest(study=self.name)))

    @property
    def best_trials(self):
        """The Pareto front (multi-objective studies), else [best_trial] once there is one."""
        if len(self._pb.spec.objectives) < 2:
            try:
                return [self.best_trial]
            except errors.NotFound:
                return []
        front, token = [], ""
        while True:
            page = self._client.call("GetParetoFront", pb.GetParetoFrontRequest(
                study=self.name, page_token=token))
            front += [FrozenTrial(t) for t in page.trials]
            token = page.next_page_token
            if not token:
                return front

    @property
    def trials(self):
        return self.get_trials()

    def get_trials(self, states=None, intermediate_values=False):
        """Every trial in number order (following pages); `states`: only these TrialStates."""
        if states is None:
            wanted = [0]  # Every state.
        else:
            # dict.fromkeys: each state once, in the order given ("COMPLETED" and Optuna's
            # "COMPLETE" are one); none given, none listed (as Optuna).
            wanted = list(dict.fromkeys(
                common_pb.Trial.State.Value(_state(s, "get_trials").value)
                for s in _one_or_many(states, "get_trials")))
        out = []
        for state in wanted:
            token = ""
            while True:
                page = self._client.call("ListTrials", pb.ListTrialsRequest(
                    study=self.name, state=state, page_token=token,
                    intermediate_values=intermediate_values))
                curves = {}
                for curve in page.curves:
                    curves.setdefault(curve.number, []).append(curve)
                out += [FrozenTrial(t, curves.get(t.number, ())) for t in page.trials]
                token = page.next_page_token
                if not token:
                    break
        return sorted(out, key=lambda t: t.number)

    def trials_dataframe(self):
        """The trials as a pandas DataFrame (Debian's python3-pandas): number, state, value or
        values_<i>, params_<name>, metrics_<name>, times; missing values are NaN/None."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("trials_dataframe() needs pandas (Debian: python3-pandas); "
                              "study.trials has the same values") from None
        rows = []
        multi = len(self._objectives()) > 1
        for t in self.trials:
            row = {"number": t.number, "state": t.state.value}
            if multi:
                for i in range(len(self._objectives())):
                    row[f"values_{i}"] = t.values[i] if t.values else math.nan
            else:
                row["value"] = t.value if t.value is not None else math.nan
            row.update({"datetime_start": t.datetime_start,
                        "datetime_complete": t.datetime_complete, "duration": t.duration})
            row.update({f"params_{k}": v for k, v in t.params.items()})
            row.update({f"metrics_{k}": v for k, v in t.metrics.items()})
            row.update({"client_id": t.client_id, "worker_id": t.worker_id, "error": t.error})
            rows.append(row)
        return pd.DataFrame(rows)

    # --- Ask and tell ---
    def ask(self, timeout=None, client_id=None):
        """A new trial leased to this client, as Optuna's ask(): asking twice without a tell
        gives two trials to evaluate. The first ask of a client id in a process gives the
        trial that id holds unfinished, if any (an evaluator restarted with its id resumes).
        While every trial is leased to others it waits, up to `timeout` seconds (None: until
        one is free; then dhpt.DeadlineExceeded); dhpt.StudyEnded once the study has ended."""
        client_id = client_id or self._client.client_id
        check_client_id(client_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        wait = _ASK_FIRST_WAIT
        # Repeated by every retry of this ask (a lost answer): the scheduler gives it the trial
        # it gave this ask, not another.
        request_id = _ask_request_id(self._client.scheduler, self.name, client_id)
        while True:
            # An unreachable scheduler is waited for up to the timeout, not retry_seconds.
            within = None if deadline is None else max(deadline - time.monotonic(), 0.01)
            try:
                answer = self._client.call("SuggestTrials", pb.SuggestTrialsRequest(
                    study=self.name, count=1, client_id=client_id, request_id=request_id),
                    within=within)
            except errors.ResourceExhausted:
                answer = None  # Many asks wait on this study's next suggestion: ask again.
            if answer is not None and answer.trials:
                return Trial(self, answer.trials[0], client_id,
                             lease_seconds=answer.lease_ms / 1000 or None)
            state = common_pb.Study.State.Name(answer.study_state) if answer else "RUNNING"
            if state in _ENDED:
                self.refresh()
                raise errors.StudyEnded(
                    f"study {self.name!r} has ended ({state}"
                    f"{': ' + self._pb.state_reason if self._pb.state_reason else ''}): "
                    f"no more trials")
            if deadline is not None and time.monotonic() + wait > deadline:
                raise errors.DeadlineExceeded(
                    f"no trial of study {self.name!r} was free within {timeout} s (others "
                    f"hold them all; parallel_trials caps the trials leased at once)")
            time.sleep(wait)  # Every trial is leased to another client: ask again shortly.
            wait = min(wait * 2, _ASK_MAX_WAIT)

    def _report(self, trial, step=None, value=None, hand_back=False):
        request = pb.ReportProgressRequest(study=self.name, trial=trial.number,
                                           client_id=trial.client_id, hand_back=hand_back)
        if step is not None:
            try:
                # operator.index: an int (numpy's too), never 2.7, "3" or True read as a step.
                if isinstance(step, bool):
                    raise TypeError("a bool is not a step")
                request.step, request.value = operator.index(step), float(value)
            except (TypeError, ValueError, OverflowError):
                raise errors.InvalidArgument(
                    f"report: step {step!r} must be an integer from 0 to 2^63-1 and value "
                    f"{value!r} a number") from None
        return self._client.call("ReportProgress", request)

    def tell(self, trial, value=None, values=None, state=None, metrics=None, reason=None,
             client_id=None):
        """The result of a trial from ask() (or its number): `value` (one objective), `values`
        (each objective's, in spec order), or state=FAILED (with a `reason`) or PRUNED (stopped
        early). `metrics` adds any other metrics to keep. Returns the stored FrozenTrial."""
        if not isinstance(trial, int):
            # A trial carries its study (a Study from ask(), a name in a FrozenTrial): another
            # study's trial would otherwise complete this study's trial of the same number.
            owner = getattr(trial, "study", None)
            owner = getattr(owner, "name", owner)
            if owner and owner != self.name:
                raise errors.InvalidArgument(
                    f"tell: trial {trial.number} is study {owner!r}'s, not {self.name!r}'s: "
                    f"tell it through its own study")
        number = trial if isinstance(trial, int) else trial.number
        # A Trial from ask() is told as the client that asked for it; a FrozenTrial from a
        # listing names whoever holds it, which is not who is telling now.
        own = trial.client_id if isinstance(trial, Trial) else None
        client_id = client_id or own or self._client.client_id
        state = TrialState(state.value if isinstance(state, TrialState) else state) \
            if state is not None else TrialState.COMPLETED
        request = pb.CompleteTrialRequest(study=self.name, trial=number, client_id=client_id)
        if state == TrialState.PRUNED:
            # Stopped early: by the study's rule (the scheduler pruned it already, and says so
            # again) or by the client itself (raise TrialPruned without being told to).
            request.pruned = True
        elif state == TrialState.FAILED:
            if value is not None or values is not None:
                # A failed trial has no value; dropping one the caller gave would hide a mistake.
                raise errors.InvalidArgument(
                    "tell: a FAILED trial takes a reason, not a value: give one or the other")
            request.infeasible_reason = reason or "failed"  # The scheduler cuts a long one.
        elif state == TrialState.COMPLETED:
            given = self._metrics(value, values)
            given.update(self._numbers("metric", metrics or {}))
            for name, v in given.items():
                request.metrics[name] = v
        else:
            raise errors.InvalidArgument(
                f"tell: state {state.value}: give COMPLETED (the default), FAILED or PRUNED")
        try:
            return FrozenTrial(self._client.call("CompleteTrial", request))
        except errors.ResourceExhausted as e:
            refusal = oversized_result(e, request)
            if refusal is None:
                raise  # The scheduler's own RESOURCE_EXHAUSTED (a limit it names) is its word.
        # Refused before the scheduler read it: failed with the reason (and a cut of the
        # caller's own), as it would otherwise stay RUNNING until its lease ran out.
        failed = pb.CompleteTrialRequest(study=self.name, trial=number, client_id=client_id,
                                         infeasible_reason=failure_reason(refusal, request))
        try:
            self._client.call("CompleteTrial", failed)
        except errors.DhptError as e:
            refusal = errors.ResourceExhausted(
                f"{refusal.reason}; the trial could not be marked FAILED either ({e.reason})")
        raise refusal

    def _metrics(self, value, values):
        names = self.metric_names
        if values is None and value is not None:
            values = [value] if not isinstance(value, (list, tuple)) else list(value)
        if values is None:
            return {}
        if len(values) != len(names):
            raise errors.InvalidArgument(
                f"tell: {len(values)} value(s) for {len(names)} objective(s) ({', '.join(names)})")
        return self._numbers("objective", dict(zip(names, values)))

    @staticmethod
    def _numbers(what, given):
        return {name: finite_number(f"tell: {what} {name}", v) for name, v in given.items()}

    # --- Warm starts ---
    def enqueue_trial(self, params):
        """A point to evaluate before the algorithm's own; returns its trial number."""
        request = pb.EnqueueTrialRequest(study=self.name)
        for name, value in params.items():
            if value is not None:  # None: an inactive (conditional) parameter, absent.
                request.params[name].CopyFrom(parameter_value(value, name))
        return self._client.call("EnqueueTrial", request, retry=False).number

    def add_trial(self, trial):
        return self.add_trials([trial])

    def add_trials(self, trials):
        """Results from elsewhere: FrozenTrials or dicts {"params", "value"|"values"|"metrics",
        "state"}. Returns (added, skipped): points the study already had are skipped."""
        request = pb.AddTrialsRequest(study=self.name)
        for t in trials:
            if isinstance(t, FrozenTrial):
                t = {"params": t.params, "values": t.values, "metrics": t.metrics,
                     "state": t.state}
            if not isinstance(t, dict) or not isinstance(t.get("params"), dict):
                raise errors.InvalidArgument(
                    f"add_trials: trial {len(request.trials)} is {_shown(t)}; give a FrozenTrial "
                    f"or a dict with \"params\" (a dict of parameter values) and \"value\", "
                    f"\"values\" or \"metrics\"")
            added = request.trials.add()
            for name, value in t["params"].items():
                if value is not None:  # An inactive (conditional) parameter, absent.
                    added.params[name].CopyFrom(parameter_value(value, name))
            state = _state(t.get("state") or TrialState.COMPLETED, "add_trials")
            added.state = common_pb.Trial.State.Value(state.value)
            valued = [k for k in ("value", "values") if t.get(k) is not None]
            if len(valued) > 1:
                raise errors.InvalidArgument(
                    f"add_trials: trial {len(request.trials) - 1} gives both \"value\" and "
                    f"\"values\"; give one")
            if valued and state != TrialState.COMPLETED:
                raise errors.InvalidArgument(
                    f"add_trials: trial {len(request.trials) - 1} is {state.value} and gives "
                    f"\"{valued[0]}\"; only a COMPLETED trial has a value")
            if state == TrialState.COMPLETED:
                given = dict(t.get("metrics") or {})
                given.update(self._metrics(t.get("value"), t.get("values")))
                for name, value in given.items():
                    added.metrics[name] = finite_number(f"add_trials: metric {name}", value)
        answer = self._client.call("AddTrials", request)
        return answer.added, answer.skipped

    # --- Watching ---
    def watch(self, after_position=0, summaries_only=False):
        """The study's changes as WatchEvents, from now (or after `after_position`) until the
        study ends. A dropped stream (a scheduler restart) is resumed after the last event
        seen, so no change is lost; gives up after the client's retry_seconds without one."""
        position = after_position
        last_progress = time.monotonic()
        while True:
            stream = self._client.stream("WatchStudy", pb.WatchStudyRequest(
                name=self.name, after_position=position, summaries_only=summaries_only))
            try:
                for response in stream:
                    last_progress = time.monotonic()
                    for event in response.events:
                        position = max(position, event.position)
                        if event.HasField("study"):
                            self._pb = event.study
                            yield WatchEvent(event.position, study=Study(self._client, event.study))
                        else:
                            yield WatchEvent(event.position, trial=FrozenTrial(event.trial))
                return
            except Exception as e:  # noqa: BLE001 - only gRPC's errors are handled here
                if not self._client.is_unavailable(e):
                    if hasattr(e, "code"):
                        raise self._client.error(e) from None
                    raise
                if time.monotonic() - last_progress > self._client.retry_seconds:
                    raise self._client.error(e) from None
                time.sleep(0.1)  # Backoff before resuming; wait_for_ready does the rest.
            finally:
                stream.cancel()

    # --- Running trials here ---
    def optimize(self, fn, n_trials=None, timeout=None, n_jobs=1, catch=(), processes=False):
        """Runs fn(trial) on this machine for up to n_trials trials (None: until the study
        ends) or `timeout` seconds, in n_jobs threads (or processes), each with its own
        client id. See dhpt.agent for the rules."""
        from .agent import run_trials
        return run_trials(self, fn, n_trials=n_trials, timeout=timeout, n_jobs=n_jobs,
                          catch=catch, processes=processes)


def _one_or_many(states, what):
    """A state or a list of them: get_trials(states="COMPLETED") means one state, not nine
    one-letter ones."""
    if isinstance(states, (str, bytes, TrialState)) or hasattr(states, "name"):
        return [states]
    try:
        return list(states)
    except TypeError:
        raise errors.InvalidArgument(f"{what}: states={_shown(states)}: give a trial state or "
                                     f"a list of them") from None


def _state(given, what):
    """A TrialState from one or its name (the scheduler's or Optuna's), else InvalidArgument
    listing the names."""
    if isinstance(given, TrialState):
        return given
    name = getattr(given, "name", given)  # Optuna's own TrialState enum, by name.
    try:
        return TrialState[name] if isinstance(name, str) and name in TrialState.__members__ \
            else TrialState(name)
    except (TypeError, ValueError):  # TypeError: not even hashable (a list).
        names = ", ".join(TrialState.__members__)
        raise errors.InvalidArgument(f"{what}: {_shown(given)} is not a trial state; one of "
                                     f"{names}") from None


def _shown(value):
    return shortened(value, 60)
