"""Trials as plain Python values: a live Trial from ask(), and FrozenTrial for the study's record.

The scheduler's protobuf types stay inside this module: ints are ints, categoricals strings,
unset values None, times datetimes (the proto JSON mapping's strings for int64, wrapped
parameters and missing zero fields never reach the user).
"""

import datetime
import enum
import math
import warnings

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from . import errors
from .client import common_pb


# The last progress step the scheduler keeps (study::kMaxProgressStep: exact as a double).
MAX_PROGRESS_STEP = 2**53


class TrialState(enum.Enum):
    """A trial's state, by the scheduler's names; Optuna's names are aliases of them."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    PRUNED = "PRUNED"
    WAITING = "PENDING"  # Optuna's names for the same states.
    COMPLETE = "COMPLETED"
    FAIL = "FAILED"

    def is_finished(self):
        return self not in (TrialState.PENDING, TrialState.RUNNING)


def plain_value(value):
    """A ParameterValue as a Python int, float or str."""
    kind = value.WhichOneof("kind")
    return getattr(value, kind) if kind else None


def shortened(value, limit):
    """repr(value) in at most `limit` characters, for an error message."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def finite_number(what, value):
    """float(value) for a number the scheduler takes as a double: dhpt.InvalidArgument naming
    `what` and the value for one that is not a number, is NaN or infinite, or is an int too
    large for a double (past about 1.8e308), rather than Python's ValueError or OverflowError."""
    shown = shortened(value, 40)
    try:
        number = float(value)
    except OverflowError:
        raise errors.InvalidArgument(
            f"{what}={shown} is too large for a double (at most about 1.8e308)") from None
    except (TypeError, ValueError):
        raise errors.InvalidArgument(f"{what}={shown} is not a number") from None
    if not math.isfinite(number):
        raise errors.InvalidArgument(f"{what}={shown} is not a finite number")
    return number


def parameter_value(value, name="value"):
    """A Python int, float or str as a google.protobuf.Value (EnqueueTrial, AddTrials)."""
    from google.protobuf import struct_pb2
    out = struct_pb2.Value()
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise errors.InvalidArgument(
            f"parameter {name}={value!r}: give an int, a float or a str")
    if isinstance(value, str):
        out.string_value = value
    else:
        out.number_value = finite_number(f"parameter {name}", value)
    return out


_INT64_TYPES = frozenset((FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64,
                          FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_FIXED64,
                          FieldDescriptor.TYPE_SFIXED64))


def plain_message(message):
    """A message as a dict of plain values that json_format.ParseDict takes back: proto field
    names, int64 as ints (the JSON mapping writes them as strings), the zero values of set
    messages' scalars shown (a range's min of 0), enums by name, well-known types as in JSON."""
    data = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     including_default_value_fields=True)
    _int64_as_ints(message.DESCRIPTOR, data)
    return data


def _int64_as_ints(descriptor, data):
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
        if field.message_type is None:
            if field.type in _INT64_TYPES:
                data[field.name] = [int(v) for v in value] if repeated else int(value)
            continue
        if field.message_type.full_name.startswith("google.protobuf."):
            continue  # A well-known type keeps its JSON form (a Duration's "30s").
        if field.message_type.GetOptions().map_entry:
            mapped = field.message_type.fields_by_name["value"]
            for key in value:
                if mapped.message_type is not None:
                    if not mapped.message_type.full_name.startswith("google.protobuf."):
                        _int64_as_ints(mapped.message_type, value[key])
                elif mapped.type in _INT64_TYPES:
                    value[key] = int(value[key])
        elif repeated:
            for item in value:
                _int64_as_ints(field.message_type, item)
        else:
            _int64_as_ints(field.message_type, value)


def _time(timestamp):
    if timestamp.seconds == 0 and timestamp.nanos == 0:
        return None
    return timestamp.ToDatetime(tzinfo=datetime.timezone.utc)


class FrozenTrial:
    """A trial as the scheduler holds it. `value` is the objective's value (None until the trial
    completed), `values` each objective's in spec order (multi-objective studies), `metrics`
    every metric the trial reported."""

    def __init__(self, trial, curves=()):
        self.id = trial.id
        self.study = trial.study
        self.number = trial.number
        self.state = TrialState(common_pb.Trial.State.Name(trial.state))
        self.params = {name: plain_value(v) for name, v in sorted(trial.params.items())}
        self.metrics = dict(sorted(trial.metrics.items()))
        self.value = trial.objective_value if trial.HasField("objective_value") else None
        self.values = list(trial.objective_values) or None
        if self.values is None and self.value is not None:
            self.values = [self.value]
        self.datetime_start = _time(trial.start_time)
        self.datetime_complete = _time(trial.end_time)
        self.datetime_created = _time(trial.create_time)
        self.error = trial.error or None
        self.worker_id = trial.worker_id or None
        self.client_id = trial.client_id or None
        self.attempt = trial.attempt
        self.lost_attempts = trial.lost_attempts
        self.infeasible = trial.infeasible
        self.constraint_violation = trial.constraint_violation if trial.infeasible else 0.0
        self.origin = common_pb.Trial.Origin.Name(trial.origin)
        # {step: value} of the latest attempt, when the listing asked for them.
        self.intermediate_values = {}
        for curve in sorted(curves, key=lambda c: c.attempt):
            self.intermediate_values = dict(zip(curve.steps, curve.values))

    @property
    def duration(self):
        if self.datetime_start and self.datetime_complete:
            return self.datetime_complete - self.datetime_start
        return None

    def __repr__(self):
        return (f"FrozenTrial(number={self.number}, state={self.state.value}, "
                f"values={self.values}, params={self.params})")


def _same(a, b):
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


class Trial:
    """A trial leased to this client by ask(): evaluate `params`, report, then study.tell().

    suggest_float/int/categorical return the scheduler's value for a parameter, after checking
    that the name and range agree with the study's space, so Optuna objectives port unchanged.
    """

    def __init__(self, study, trial, client_id, lease_seconds=None):
        self.study = study
        # How long the lease lasts without a report() or renew() (the scheduler's
        # --client_lease); optimize() renews it in the background while the objective runs.
        self.lease_seconds = lease_seconds
        self.number = trial.number
        self.params = {name: plain_value(v) for name, v in sorted(trial.params.items())}
        self.client_id = client_id
        self._should_stop = False
        self.prune_reason = None
        self._last_step = None  # The last step report() sent that the scheduler keeps.

    def __repr__(self):
        return f"Trial(study={self.study.name!r}, number={self.number}, params={self.params})"

    def _parameter(self, name, kind):
        spec = self.study._parameters().get(name)
        if spec is None:
            raise errors.InvalidArgument(
                f"parameter {name!r} is not in study {self.study.name!r}'s space (it has: "
                f"{', '.join(sorted(self.study._parameters())) or 'none'})")
        have = spec.WhichOneof("domain")
        if have != kind:
            raise errors.InvalidArgument(
                f"parameter {name!r} of study {self.study.name!r} is a {have}, not a {kind}")
        if name not in self.params:
            condition = spec.condition
            shown = (json_format.MessageToDict(v) for v in condition.values)
            values = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in shown)
            raise errors.InvalidArgument(
                f"parameter {name!r} is inactive in trial {self.number}: it applies only when "
                f"{condition.parent} is one of [{values}], and this trial has {condition.parent}="
                f"{self.params.get(condition.parent)!r}; suggest it only under its condition, as "
                f"a define-by-run objective does")
        return getattr(spec, kind)

    def suggest_float(self, name, low, high, *, step=None, log=False):
        domain = self._parameter(name, "double_range")
        if not (_same(domain.min, low) and _same(domain.max, high) and domain.log == log
                and _same(domain.step, step or 0)):
            raise errors.InvalidArgument(
                f"suggest_float({name!r}, {low}, {high}, step={step}, log={log}) disagrees with "
                f"the study's space: [{domain.min}, {domain.max}], step={domain.step or None}, "
                f"log={domain.log}")
        return float(self.params[name])

    def suggest_int(self, name, low, high, *, step=1, log=False):
        domain = self._parameter(name, "int_range")
        if not (domain.min == low and domain.max == high and domain.log == log
                and max(domain.step, 1) == step):
            raise errors.InvalidArgument(
                f"suggest_int({name!r}, {low}, {high}, step={step}, log={log}) disagrees with "
                f"the study's space: [{domain.min}, {domain.max}], step={max(domain.step, 1)}, "
                f"log={domain.log}")
        return int(self.params[name])

    def suggest_categorical(self, name, choices):
        domain = self._parameter(name, "categorical")
        if [str(c) for c in choices] != list(domain.values):
            raise errors.InvalidArgument(
                f"suggest_categorical({name!r}, {list(choices)}) disagrees with the study's "
                f"space: {list(domain.values)}")
        # The choice itself (an int, a bool, None), as Optuna returns it.
        return next(c for c in choices if str(c) == self.params[name])

    def report(self, value, step):
        """An intermediate value at `step`; renews this client's lease on the trial.

        The scheduler keeps a trial's values at increasing steps up to 2**53 only (what its
        early-stopping rule judges, alike after a restart): another step is ignored with a
        UserWarning, as Optuna warns for a step reported twice."""
        answer = self.study._report(self, step=step, value=value)
        step = int(step)
        if self._last_step is not None and step <= self._last_step:
            warnings.warn(f"report: step {step} of trial {self.number} is not after its last "
                          f"reported step {self._last_step}; this value is ignored (the "
                          f"scheduler keeps increasing steps only)", UserWarning, stacklevel=2)
        elif step > MAX_PROGRESS_STEP:
            warnings.warn(f"report: step {step} of trial {self.number} is past 2**53, the last "
                          f"step the scheduler keeps; this value is ignored", UserWarning,
                          stacklevel=2)
        else:
            self._last_step = step
        self._should_stop = self._should_stop or answer.should_stop
        if answer.should_stop:
            self.prune_reason = answer.reason
        return answer.should_stop

    def renew(self):
        """Renews the lease without a value (a long evaluation that reports nothing)."""
        answer = self.study._report(self)
        self._should_stop = self._should_stop or answer.should_stop
        return answer.should_stop

    def hand_back(self):
        """Gives the trial up unevaluated: it is pending again for the next ask (this client's
        or another's), and costs no attempt. What Ctrl-C in optimize() does."""
        self.study._report(self, hand_back=True)

    def should_prune(self):
        """Whether the study's early-stopping rule stopped this trial at its last report()."""
        return self._should_stop
