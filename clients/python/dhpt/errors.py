"""The client's exceptions: one class per scheduler status code, each carrying its reason.

The scheduler's reason is the message a user acts on ("study \"x\" not found"); `code` is the
gRPC status code's name. No gRPC type leaks out of the client: callers catch these.
"""


class DhptError(Exception):
    """A call the scheduler (or the client, before sending it) refused."""

    code = "UNKNOWN"

    def __init__(self, reason, code=None):
        super().__init__(reason)
        self.reason = reason
        if code is not None:
            self.code = code

    def __str__(self):
        return f"{self.code}: {self.reason}"


class InvalidArgument(DhptError, ValueError):
    code = "INVALID_ARGUMENT"


class NotFound(DhptError, LookupError):
    code = "NOT_FOUND"


class AlreadyExists(DhptError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(DhptError):
    code = "FAILED_PRECONDITION"


class PermissionDenied(DhptError):
    code = "PERMISSION_DENIED"


class Unauthenticated(DhptError):
    code = "UNAUTHENTICATED"


class Unavailable(DhptError):
    code = "UNAVAILABLE"


class ResourceExhausted(DhptError):
    code = "RESOURCE_EXHAUSTED"


class ResultOverMessageLimit(ResourceExhausted):
    """tell() of a result gRPC refused for its size (over dhpt-scheduler --max_message_bytes):
    the trial is already marked FAILED with this reason, so that it does not wait for its lease."""


class DeadlineExceeded(DhptError):
    code = "DEADLINE_EXCEEDED"


class StudyEnded(DhptError):
    """ask() on a study that has ended: it has no more trials to give."""

    code = "STUDY_ENDED"


class TrialPruned(Exception):
    """Raised by an objective (after trial.should_prune()) to end its trial PRUNED, as Optuna's."""


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, PermissionDenied,
    Unauthenticated, Unavailable, ResourceExhausted, DeadlineExceeded)}


def error_for(code, reason):
    """The exception for a status code's name ("NOT_FOUND") and the scheduler's reason."""
    return _BY_CODE.get(code, DhptError)(reason, code)
