"""Fixtures of the Python client's tests: real dhpt-scheduler (and dhpt-cpu-worker) processes
on 127.0.0.1, started from the build's bin folder (DHPT_BIN_DIR, else build/bin) and always
killed. The scheduler listens on port 0 and the fixture reads the port it prints
("listening on HOST:PORT"), as tests/integration/test_cluster.h does."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
BIN = os.environ.get("DHPT_BIN_DIR", os.path.join(ROOT, "build", "bin"))
DEADLINE = 60  # seconds for a process to start or a condition to hold

import dhpt  # noqa: E402


def wait_until(condition, what, timeout=DEADLINE):
    """Polls `condition` until it is true: a wait on a condition with a deadline, not a sleep."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Scheduler:
    """A dhpt-scheduler process; restart() starts it again on the same port and database."""

    def __init__(self, tmp_path, flags=()):
        self.db = str(tmp_path / "dhpt.db")
        self.log = str(tmp_path / "scheduler.log")
        self.flags = list(flags)
        self.port = 0
        self.process = None
        self.start()

    def start(self):
        self.process = subprocess.Popen(
            [os.path.join(BIN, "dhpt-scheduler"), f"--listen=127.0.0.1:{self.port}",
             f"--db={self.db}", "--heartbeat_interval=200ms", *self.flags],
            stdout=subprocess.PIPE, stderr=open(self.log, "a"), text=True)
        for line in self.process.stdout:
            if line.startswith("listening on "):
                self.port = int(line.strip().rsplit(":", 1)[1])
                break
        else:
            raise AssertionError(f"dhpt-scheduler exited ({self.process.wait()}) before listening: "
                                 f"{open(self.log).read()}")
        # Keep reading, so that the scheduler never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self):
        self.kill()
        self.start()


@pytest.fixture
def scheduler(tmp_path):
    s = Scheduler(tmp_path)
    yield s
    s.kill()


@pytest.fixture
def client(scheduler):
    c = dhpt.Client(scheduler.address, client_id="test-client", retry_seconds=30)
    yield c
    c.close()


@pytest.fixture
def cpu_worker(scheduler):
    """One dhpt-cpu-worker connected to the scheduler (it shows up in ListWorkers)."""
    process = subprocess.Popen(
        [os.path.join(BIN, "dhpt-cpu-worker"), f"--scheduler={scheduler.address}",
         "--slots=2", "--worker_id=py-worker"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = dhpt.Client(scheduler.address)
    from dhpt.client import pb
    wait_until(lambda: c.call("ListWorkers", pb.ListWorkersRequest()).workers, "the worker")
    yield process
    process.kill()
    process.wait()


class Child:
    """A Python process running `code` with the client on its path; killed at the end. Its
    stdin is a pipe the test holds open, so a child that reads it waits until it is killed
    (ctest's own stdin may be /dev/null, where a read returns at once)."""

    def __init__(self, code, env=None):
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "clients", "python"),
                            **(env or {})})

    def line(self):
        """The child's next line of output (what it has done so far)."""
        return self.process.stdout.readline().strip()

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def children():
    started = []

    def start(code, env=None):
        child = Child(code, env)
        started.append(child)
        return child
    yield start
    for child in started:
        child.kill()
