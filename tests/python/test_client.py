"""Connections as the CLI makes them: DHPT_SCHEDULER, TLS, mutual TLS and the bearer token
(the same files and variables), and clear errors instead of gRPC tracebacks."""

import subprocess
import time
from concurrent import futures

import grpc
import pytest

import dhpt
from conftest import Scheduler
from dhpt.client import common_pb, pb, pb_grpc

CERTS = """set -e; ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1'
for ca in ca other-ca; do openssl req -x509 $ec -nodes -days 2 -keyout $ca.key -out $ca.crt -subj /CN=$ca 2>/dev/null; done
for who in server client; do openssl req $ec -nodes -keyout $who.key -out $who.csr -subj /CN=dhpt-$who 2>/dev/null; done
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > server.ext
printf 'extendedKeyUsage=clientAuth\\n' > client.ext
for who in server client; do openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out $who.crt -extfile $who.ext 2>/dev/null; done
echo s3cret-user-token-0001 > token; echo s3cret-worker-token-002 > worker-token; echo wrong-token-of-nobody-3 > wrong-token
"""


@pytest.fixture
def certs(tmp_path):
    subprocess.run(["sh", "-c", CERTS], cwd=tmp_path, check=True)
    return lambda name: str(tmp_path / name)


def test_scheduler_from_the_environment(scheduler, monkeypatch):
    monkeypatch.setenv("DHPT_SCHEDULER", scheduler.address)
    monkeypatch.setenv("DHPT_CLIENT_ID", "from-env")
    client = dhpt.Client()
    assert client.scheduler == scheduler.address and client.client_id == "from-env"
    study = dhpt.create_study("env", space={"x": (0.0, 1.0)}, max_trials=1)
    assert study.ask().client_id == "from-env"


def test_unreachable_scheduler_is_a_clear_error(scheduler):
    address = scheduler.address
    scheduler.kill()
    client = dhpt.Client(address, retry_seconds=0.3)
    with pytest.raises(dhpt.Unavailable, match="cannot reach the scheduler at 127.0.0.1"):
        dhpt.get_all_studies(client=client)


def test_an_address_the_cli_refuses_is_refused(scheduler):
    # gRPC would wrap the port onto 56101 and wait out its retries for a port-less name.
    for address in ("127.0.0.1:121637", "localhost", "localhost:", ":50051", "a b:1", "::1:5"):
        with pytest.raises(dhpt.InvalidArgument, match="HOST:PORT"):
            dhpt.Client(address)
    assert dhpt.Client("[::1]:50051").scheduler == "[::1]:50051"


def test_ask_waits_for_an_unreachable_scheduler_only_until_its_timeout(scheduler):
    address = scheduler.address
    study = dhpt.create_study("s", space={"x": (0.0, 1.0)}, max_trials=5,
                              client=dhpt.Client(address))
    scheduler.kill()
    client = dhpt.Client(address, retry_seconds=120)
    started = time.monotonic()
    with pytest.raises(dhpt.Unavailable, match="within 1 s"):
        dhpt.Study(client, study._pb).ask(timeout=1)
    assert time.monotonic() - started < 60  # Not retry_seconds (120 s).


def test_a_refusing_scheduler_is_quoted_not_called_unreachable(tmp_path):
    # The database's cap reached: the scheduler answers UNAVAILABLE with its reason on every
    # try; the client says what it said, not that it could not reach it.
    full = Scheduler(tmp_path, flags=["--max_db_bytes=150000"])
    try:
        client = dhpt.Client(full.address, retry_seconds=0.5)
        study = dhpt.create_study("full", client=client, space={"x": dhpt.float_range(0, 1)},
                                  objective="value", max_trials=100000)
        with pytest.raises(dhpt.Unavailable) as refused:
            for _ in range(100000):
                trial = study.ask()
                study.tell(trial, trial.params["x"])
        message = str(refused.value)
        assert "cannot reach" not in message, message
        assert f"the scheduler at {full.address} kept refusing for 0.5 s: " in message, message
        assert "--max_db_bytes" in message, message
    finally:
        full.kill()


def test_settings_the_cli_refuses_are_refused(certs):
    with pytest.raises(dhpt.InvalidArgument, match="needs TLS"):
        dhpt.Client("127.0.0.1:1", auth_token_file=certs("token"))
    with pytest.raises(dhpt.InvalidArgument, match="need TLS"):
        dhpt.Client("127.0.0.1:1", tls_cert=certs("client.crt"), tls_key=certs("client.key"))
    with pytest.raises(dhpt.InvalidArgument, match="go together"):
        dhpt.Client("127.0.0.1:1", tls_ca=certs("ca.crt"), tls_cert=certs("client.crt"))
    with pytest.raises(dhpt.InvalidArgument, match="cannot read"):
        dhpt.Client("127.0.0.1:1", tls_ca=certs("absent.crt"))
    with pytest.raises(dhpt.InvalidArgument, match="client_id"):
        dhpt.Client("127.0.0.1:1", client_id="no spaces")


def test_tls_and_token(tmp_path, certs):
    scheduler = Scheduler(tmp_path, [f"--tls_cert={certs('server.crt')}",
                                     f"--tls_key={certs('server.key')}",
                                     f"--auth_token_file={certs('token')}",
                                     f"--worker_token_file={certs('worker-token')}"])
    try:
        address = scheduler.address
        good = dhpt.Client(address, tls_ca=certs("ca.crt"), auth_token_file=certs("token"))
        study = dhpt.create_study("secure", space={"x": (0.0, 1.0)}, max_trials=1, client=good)
        study.tell(study.ask(), 0.5)
        assert study.refresh().state == "COMPLETED"
        for token, error, words in (
                (None, dhpt.Unauthenticated, "requires a bearer token"),
                (certs("wrong-token"), dhpt.Unauthenticated, "not this scheduler's"),
                (certs("worker-token"), dhpt.PermissionDenied, "worker's token")):
            client = dhpt.Client(address, tls_ca=certs("ca.crt"), auth_token_file=token)
            with pytest.raises(error, match=words):
                dhpt.load_study("secure", client=client)
        untrusted = dhpt.Client(address, tls_ca=certs("other-ca.crt"),
                                auth_token_file=certs("token"), retry_seconds=0.5)
        with pytest.raises(dhpt.Unavailable):
            dhpt.load_study("secure", client=untrusted)
        # The same settings from the variables the CLI reads, and a server name override.
        env = {"DHPT_TLS_CA": certs("ca.crt"), "DHPT_AUTH_TOKEN_FILE": certs("token"),
               "DHPT_TLS_SERVER_NAME": "localhost"}
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            assert dhpt.load_study("secure", client=dhpt.Client(address)).state == "COMPLETED"
    finally:
        scheduler.kill()


def test_mutual_tls(tmp_path, certs):
    scheduler = Scheduler(tmp_path, [f"--tls_cert={certs('server.crt')}",
                                     f"--tls_key={certs('server.key')}",
                                     f"--tls_client_ca={certs('ca.crt')}"])
    try:
        with_cert = dhpt.Client(scheduler.address, tls_ca=certs("ca.crt"),
                                tls_cert=certs("client.crt"), tls_key=certs("client.key"))
        assert dhpt.get_all_studies(client=with_cert) == []
        without = dhpt.Client(scheduler.address, tls_ca=certs("ca.crt"), retry_seconds=0.5)
        with pytest.raises(dhpt.Unavailable):
            dhpt.get_all_studies(client=without)
    finally:
        scheduler.kill()


class CancelsFirst(pb_grpc.StudyServiceServicer):
    """A fault, not a scheduler: answers each method CANCELLED `times` times, as a stopping
    scheduler answers the calls that reach it while gRPC's Shutdown begins, then as one would."""

    def __init__(self, times):
        self.left = {"GetStudy": times, "EnqueueTrial": times}
        self.calls = {"GetStudy": 0, "EnqueueTrial": 0}

    def _cut(self, method, context):
        self.calls[method] += 1
        if self.left[method] > 0:
            self.left[method] -= 1
            context.abort(grpc.StatusCode.CANCELLED, "Cancelled")

    def GetStudy(self, request, context):
        self._cut("GetStudy", context)
        return common_pb.Study(spec=common_pb.StudySpec(name=request.name))

    def EnqueueTrial(self, request, context):
        self._cut("EnqueueTrial", context)
        return common_pb.Trial(number=7)


@pytest.fixture
def cancelling_server():
    servicer = CancelsFirst(times=2)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_StudyServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(None)


def test_a_call_answered_cancelled_is_asked_again_unless_unsafe_to_repeat(cancelling_server):
    servicer, address = cancelling_server
    client = dhpt.Client(address, retry_seconds=10)
    assert client.call("GetStudy", pb.GetStudyRequest(name="s")).spec.name == "s"
    assert servicer.calls["GetStudy"] == 3  # Two cut, the third answered.
    with pytest.raises(dhpt.DhptError) as refused:
        client.call("EnqueueTrial", pb.EnqueueTrialRequest(study="s"), retry=False)
    assert refused.value.code == "CANCELLED"
    assert servicer.calls["EnqueueTrial"] == 1  # A call unsafe to repeat is sent once.
