"""Running objectives here: Study.optimize and dhpt.agent.

Each evaluator (a thread, or a process) asks with its own client id, runs fn(trial) and tells
the result, until its share of n_trials is taken, `timeout` passed, or the study has ended:
- fn returns a number (one objective), a sequence (each objective's value) or a dict of
  metrics (the objectives' and any others to keep);
- TrialPruned ends the trial PRUNED; any other exception fails it with the traceback's last
  line as the reason, then stops optimize() and is raised again, unless it is one of `catch`;
- Ctrl-C (KeyboardInterrupt), sys.exit() or any other BaseException stops taking trials,
  hands the trials being evaluated back to the scheduler (pending again for any client, no
  attempt charged, no lease left to run out) and is raised again;
- a result the scheduler no longer takes (the study was stopped or ended meanwhile) is dropped
  with a warning, and the next ask ends the run when the study has ended;
- with processes, an evaluator process that dies (killed, out of memory) stops the others,
  its trial is handed back, and optimize() raises dhpt.DhptError naming it.
"""

import multiprocessing
import queue
import signal
import threading
import time
import traceback
import warnings

from . import errors
from .client import Client, default_client_id
from .study import clip as _clip
from .trial import TrialState


class _Budget:
    """How many trials may still be started (None: no limit), shared by the evaluators."""

    def __init__(self, n_trials, shared=None):
        self._left = shared if shared is not None else n_trials
        self._lock = threading.Lock()
        self._shared = shared is not None

    def take(self):
        if self._shared:
            with self._left.get_lock():
                if self._left.value == 0:
                    return False
                if self._left.value > 0:
                    self._left.value -= 1
                return True
        with self._lock:
            if self._left is None:
                return True
            if self._left == 0:
                return False
            self._left -= 1
            return True


class _KeepLease:
    """Renews a trial's lease while its objective runs (a third of the lease apart), so that
    an objective that never calls report() keeps its trial however long it takes."""

    def __init__(self, trial):
        self._trial = trial
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True)

    def _renew(self):
        interval = max((self._trial.lease_seconds or 60.0) / 3, 0.1)
        while not self._done.wait(interval):
            try:
                self._trial.renew()
            except errors.DhptError:
                pass  # The scheduler is away: the next renewal, or the tell, says what holds.

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()  # Not joined: a renewal in flight may not delay the tell.


def _last_line(exc):
    lines = traceback.format_exception_only(type(exc), exc)
    return _clip(lines[-1].strip() if lines else type(exc).__name__)


def _tell(study, trial, **result):
    """study.tell(), or None for a trial the scheduler took back meanwhile (its study stopped
    or ended): the result is dropped with a warning, and the next ask says if the study ended."""
    try:
        return study.tell(trial, **result)
    except errors.FailedPrecondition as e:
        warnings.warn(f"trial {trial.number} of study {study.name!r}: result not kept "
                      f"({e.reason})", stacklevel=2)
        return None


def _tell_result(study, trial, result):
    if result is None:
        # Told as it is, the trial would carry no metric and the scheduler's refusal ("give the
        # trial's metrics") would not say that the objective forgot to return its value.
        names = study.metric_names
        number = "a number" if len(names) == 1 else f"{len(names)} numbers"
        raise errors.InvalidArgument(
            f"trial {trial.number}: the objective returned None; it must return {number} (or a "
            f"dict of the study's objectives: {', '.join(names)})")
    if isinstance(result, dict):
        return _tell(study, trial, metrics=result)
    if isinstance(result, (list, tuple)):
        return _tell(study, trial, values=list(result))
    return _tell(study, trial, value=result)


def _evaluate(study, fn, client_id, budget, deadline, catch, stop, held):
    """One evaluator's loop; returns the trials it finished."""
    done = 0
    while not stop.is_set() and budget.take():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        try:
            trial = study.ask(timeout=left, client_id=client_id)
        except (errors.StudyEnded, errors.DeadlineExceeded):
            break
        held[client_id] = trial  # Until told: what Ctrl-C hands back.
        try:
            with _KeepLease(trial):
                result = fn(trial)
        except errors.TrialPruned:
            told = _tell(study, trial, state=TrialState.PRUNED)
        except catch as e:  # A tuple of exception types, as Optuna's.
            told = _tell(study, trial, state=TrialState.FAILED, reason=_last_line(e))
        except Exception as e:
            held.pop(client_id, None)
            _tell(study, trial, state=TrialState.FAILED, reason=_last_line(e))
            stop.set()
            raise
        except BaseException:
            # Ctrl-C or sys.exit() in fn: the trial was not evaluated. Handed back, not left
            # RUNNING until its lease runs out.
            stop.set()
            _hand_back({client_id: held.pop(client_id, trial)})
            raise
        else:
            try:
                told = _tell_result(study, trial, result)
            except (errors.InvalidArgument, errors.ResourceExhausted) as e:
                # NaN, a missing objective, a result over the scheduler's message limit: the
                # trial fails with the reason, rather than waiting for its lease to run out.
                # Over the limit, tell() has failed it already (ResultOverMessageLimit).
                held.pop(client_id, None)
                if not isinstance(e, errors.ResultOverMessageLimit):
                    _tell(study, trial, state=TrialState.FAILED,
                          reason=_clip(f"bad result: {e.reason}"))
                if not isinstance(e, catch):
                    stop.set()
                    raise
                told = trial  # Finished: FAILED with the reason.
        held.pop(client_id, None)
        if told is not None:
            done += 1
    return done


def _hand_back(held):
    """Hands back what the evaluators still hold, so that no lease waits to run out."""
    for client_id, trial in list(held.items()):
        try:
            trial.hand_back()
        except errors.DhptError:
            pass  # Finished meanwhile, or the scheduler is gone: its lease runs out.
        held.pop(client_id, None)


def run_trials(study, fn, n_trials=None, timeout=None, n_jobs=1, catch=(), processes=False):
    if n_jobs == -1:
        n_jobs = multiprocessing.cpu_count()
    if n_jobs < 1:
        raise errors.InvalidArgument(f"n_jobs={n_jobs}: give 1 or more (-1: one per core)")
    catch = tuple(catch)
    deadline = None if timeout is None else time.monotonic() + timeout
    if processes:
        return _run_processes(study, fn, n_trials, timeout, n_jobs, catch)
    base = study.client.client_id
    ids = [base] if n_jobs == 1 else [f"{base}-{i}" for i in range(n_jobs)]
    budget, stop, held = _Budget(n_trials), threading.Event(), {}
    if n_jobs == 1:  # In this thread, so that Ctrl-C interrupts fn itself.
        try:
            return _evaluate(study, fn, ids[0], budget, deadline, catch, stop, held)
        except KeyboardInterrupt:
            _hand_back(held)
            raise
    results, failures = [0] * n_jobs, []

    def evaluator(i):
        try:
            results[i] = _evaluate(study, fn, ids[i], budget, deadline, catch, stop, held)
        except BaseException as e:  # noqa: BLE001 - raised again in the calling thread
            failures.append(e)
            stop.set()  # _evaluate handed its own trial back; the others finish theirs.

    threads = [threading.Thread(target=evaluator, args=(i,), daemon=True) for i in range(n_jobs)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)  # A bounded join, so that Ctrl-C reaches this thread.
    except KeyboardInterrupt:
        stop.set()
        _hand_back(held)
        raise
    if failures:
        raise failures[0]
    return sum(results)


def _process_main(settings, client_id, name, fn, left, deadline_s, catch, answer, stop):
    held = {}
    try:
        client = Client(client_id=client_id, **settings)
        from .study import load_study
        study = load_study(name, client=client)
        deadline = None if deadline_s is None else time.monotonic() + deadline_s
        done = _evaluate(study, fn, client_id, _Budget(None, left), deadline, catch, stop, held)
        answer.put((client_id, done, None))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group.
        _hand_back(held)
        answer.put((client_id, 0, "interrupted"))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        answer.put((client_id, 0, _last_line(e)))


def _run_processes(study, fn, n_trials, timeout, n_jobs, catch):
    # Spawned, not forked: a forked child would share the parent's gRPC state. fn must be
    # importable (a module-level function), as for multiprocessing.
    context = multiprocessing.get_context("spawn")
    left = context.Value("q", -1 if n_trials is None else n_trials)
    answer, stop = context.Queue(), context.Event()  # One failure stops them all, as threads.
    base = default_client_id()
    ids = [f"{base}-p{i}" for i in range(n_jobs)]
    children = {client_id: context.Process(target=_process_main, daemon=True, args=(
        study.client.settings, client_id, study.name, fn, left, timeout, catch, answer, stop))
        for client_id in ids}
    for child in children.values():
        child.start()
    done, failures, answered = 0, [], set()

    def read(wait):
        nonlocal done
        client_id, count, failure = answer.get(timeout=wait)
        answered.add(client_id)
        done += count
        if failure:
            failures.append(failure)
            stop.set()

    try:
        while len(answered) < len(children):
            try:
                read(0.5)
                continue
            except queue.Empty:
                pass
            # A process that died answers nothing (SIGKILL, the OOM killer, os._exit): read
            # what the exited ones sent before they went, then name the ones that sent nothing.
            exited = [i for i, c in children.items() if i not in answered and c.exitcode is not None]
            try:
                while exited:
                    read(0.2)
            except queue.Empty:
                pass
            for client_id in exited:
                if client_id not in answered:
                    answered.add(client_id)
                    failures.append(f"process {client_id} died ({_exit_reason(children[client_id])})")
                    stop.set()
                    _hand_back_held_by(study, client_id)
    finally:
        for child in children.values():
            child.join(5)
            if child.is_alive():
                child.terminate()
    if failures:
        raise errors.DhptError(f"an evaluator process failed: {failures[0]}", "EVALUATOR_FAILED")
    return done


def _exit_reason(process):
    if process.exitcode < 0:
        return f"killed by {signal.Signals(-process.exitcode).name}"
    return f"exit status {process.exitcode}"


def _hand_back_held_by(study, client_id):
    """Hands back the trials a dead evaluator process held, so that none waits for its lease."""
    try:
        held = [t for t in study.get_trials(states=[TrialState.RUNNING])
                if t.client_id == client_id]
        for trial in held:
            study._report(trial, hand_back=True)
    except errors.DhptError:
        pass  # Finished meanwhile, or the scheduler is away: its lease runs out.


def agent(study_name, fn, count=None, *, n_jobs=1, client=None, **connection):
    """Joins an existing study from this machine: takes trials and runs fn(trial) until the
    study ends (or `count` trials here). Start it on as many machines as you like."""
    from .study import load_study
    study = load_study(study_name, client=client, **connection)
    return study.optimize(fn, n_trials=count, n_jobs=n_jobs)
