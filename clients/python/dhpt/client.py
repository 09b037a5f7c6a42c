"""The connection to a scheduler: endpoint, TLS, mutual TLS and bearer token as the CLI takes them.

Every other module calls the scheduler through Client.call, the only place that touches gRPC:
it rides out an unreachable scheduler (a restart) for `retry_seconds` on calls that are safe to
repeat, and turns every refusal into a dhpt.errors exception carrying the scheduler's reason.
"""

import os
import random
import re
import socket
import time

import grpc

from . import errors

try:
    from .v1 import study_service_pb2 as pb
    from .v1 import study_service_pb2_grpc as pb_grpc
    from .v1 import common_pb2 as common_pb
except ImportError as e:  # The stubs are built, not checked in.
    raise ImportError(
        "dhpt's gRPC stubs (dhpt/v1/*_pb2.py) are missing: build them with "
        "`cmake --build build --target dhpt_python` before installing clients/python "
        f"(docs/python.md) [{e}]") from None

# As the CLI: --scheduler, else DHPT_SCHEDULER, else this.
DEFAULT_SCHEDULER = "localhost:50051"
# How long a call that is safe to repeat keeps trying an unreachable scheduler (a restart, a
# rolling upgrade) before it raises dhpt.Unavailable.
DEFAULT_RETRY_SECONDS = 60.0
# The longest host a scheduler address may name, as the CLI's --scheduler
# (FlagRange::kMaxAddressHostBytes in services/common/flag_ranges.h).
MAX_ADDRESS_HOST_CHARS = 255
# The scheduler's tokens are at least this long (services/common/transport_security.h).
MIN_TOKEN_CHARS = 16
# As large as the scheduler may answer (a long study's ListTrials page; kMaxReplyBytes).
MAX_REPLY_BYTES = 256 << 20
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._\-@:]{1,128}$")


def default_client_id():
    """One id per process (host:pid), so that evaluators on one machine never share leases."""
    host = re.sub(r"[^A-Za-z0-9._\-]", "-", socket.gethostname())[:64] or "host"
    return f"{host}:{os.getpid()}"


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.InvalidArgument(f"{what}: cannot read {path} ({e.strerror})") from None


class Client:
    """A connection to one scheduler. Thread-safe; share one per process.

    Each argument falls back to the environment variable the CLI reads: scheduler
    (DHPT_SCHEDULER), tls_ca (DHPT_TLS_CA), tls_cert (DHPT_TLS_CERT), tls_key (DHPT_TLS_KEY),
    tls_server_name (DHPT_TLS_SERVER_NAME), auth_token_file (DHPT_AUTH_TOKEN_FILE), client_id
    (DHPT_CLIENT_ID, else host:pid): the id the scheduler leases ask-and-tell trials to, so an
    evaluator restarted with the same id gets its unfinished trials back.
    """

    def __init__(self, scheduler=None, *, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None, auth_token_file=None, client_id=None,
                 retry_seconds=DEFAULT_RETRY_SECONDS):
        env = os.environ.get
        self.scheduler = scheduler or env("DHPT_SCHEDULER") or DEFAULT_SCHEDULER
        check_scheduler_address(self.scheduler)
        tls_ca = tls_ca or env("DHPT_TLS_CA")
        tls_cert = tls_cert or env("DHPT_TLS_CERT")
        tls_key = tls_key or env("DHPT_TLS_KEY")
        tls_server_name = tls_server_name or env("DHPT_TLS_SERVER_NAME")
        auth_token_file = auth_token_file or env("DHPT_AUTH_TOKEN_FILE")
        self.client_id = client_id or env("DHPT_CLIENT_ID") or default_client_id()
        check_client_id(self.client_id)
        self.retry_seconds = retry_seconds
        # What a process started by optimize(processes=True) connects with (its own channel).
        self.settings = dict(scheduler=self.scheduler, tls_ca=tls_ca, tls_cert=tls_cert,
                             tls_key=tls_key, tls_server_name=tls_server_name,
                             auth_token_file=auth_token_file, retry_seconds=retry_seconds)
        options = [("grpc.max_receive_message_length", MAX_REPLY_BYTES),
                   ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 2000)]
        # The same rules, and words, as the CLI's (services/common/transport_security.cc).
        if not tls_ca:
            if tls_cert or tls_key or tls_server_name:
                raise errors.InvalidArgument(
                    "tls_cert, tls_key and tls_server_name need TLS: give tls_ca, the CA that "
                    "signed the scheduler's certificate")
            if auth_token_file:
                raise errors.InvalidArgument(
                    "auth_token_file needs TLS: give tls_ca (a token is never sent in plaintext)")
            self._channel = grpc.insecure_channel(self.scheduler, options=options)
        else:
            if bool(tls_cert) != bool(tls_key):
                raise errors.InvalidArgument("tls_cert and tls_key go together: give both")
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca, "tls_ca"),
                private_key=_read(tls_key, "tls_key") if tls_key else None,
                certificate_chain=_read(tls_cert, "tls_cert") if tls_cert else None)
            if auth_token_file:
                token = _read(auth_token_file, "auth_token_file").decode().strip()
                if len(token) < MIN_TOKEN_CHARS:
                    raise errors.InvalidArgument(
                        f"auth_token_file: the token in {auth_token_file} is {len(token)} "
                        f"characters; a token has at least {MIN_TOKEN_CHARS}")
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(token))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self._channel = grpc.secure_channel(self.scheduler, credentials, options=options)
        self._stub = pb_grpc.StudyServiceStub(self._channel)
        self._closed = False

    def close(self):
        self._closed = True
        self._channel.close()

    def _check_open(self):
        # gRPC's own answer is a bare ValueError ("Cannot invoke RPC on closed channel!").
        if self._closed:
            raise errors.FailedPrecondition(
                f"this Client of {self.scheduler} is closed (close(), or the end of its `with` "
                f"block): make a new dhpt.Client to call the scheduler again")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, method, request, *, retry=True, timeout=None, within=None):
        """StudyService.<method>(request). With `retry` (calls safe to repeat), UNAVAILABLE and
        CANCELLED are retried with backoff for retry_seconds, or `within` seconds when that is
        sooner (a caller's own timeout); any refusal raises a dhpt.errors exception."""
        self._check_open()
        patience = self.retry_seconds if within is None else min(within, self.retry_seconds)
        deadline = time.monotonic() + patience
        backoff = 0.05
        while True:
            left = deadline - time.monotonic()
            try:
                # wait_for_ready: a call made while the scheduler restarts waits for it to be
                # back (within its timeout) rather than failing at once.
                return getattr(self._stub, method)(
                    request, timeout=timeout or max(left, 1.0), wait_for_ready=retry)
            except grpc.RpcError as e:
                code = e.code()
                # CANCELLED too: this client never cancels a call, but a scheduler that stops
                # (SIGTERM) cancels the calls that reached it as it shut down (the CLI's watch
                # reads it the same way): as a restart, not a refusal.
                if retry and code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                                      grpc.StatusCode.DEADLINE_EXCEEDED) and left > 0:
                    time.sleep(min(backoff, max(left, 0)) * (0.5 + random.random() / 2))
                    backoff = min(backoff * 2, 1.0)
                    continue
                if retry and code == grpc.StatusCode.UNAVAILABLE and _answered(e):
                    # The scheduler is there and keeps saying why it cannot serve (its database
                    # refuses writes, it is shutting down): its words, not "cannot reach".
                    raise errors.Unavailable(
                        f"the scheduler at {self.scheduler} kept refusing for "
                        f"{patience:.3g} s: {e.details()}") from None
                if retry and code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                    # wait_for_ready waited all this time for a connection that never came.
                    raise errors.Unavailable(
                        f"cannot reach the scheduler at {self.scheduler} within "
                        f"{patience:.3g} s ({e.details()})") from None
                raise self.error(e) from None

    def stream(self, method, request):
        """A server stream (WatchStudy); iterate it inside `translate`."""
        self._check_open()
        return getattr(self._stub, method)(request, wait_for_ready=True)

    def error(self, rpc_error):
        """The dhpt.errors exception for a gRPC error, with the scheduler's reason."""
        code = rpc_error.code()
        reason = rpc_error.details() or code.name
        if code == grpc.StatusCode.UNAVAILABLE:
            reason = (f"the scheduler at {self.scheduler} refused: {reason}"
                      if _answered(rpc_error) else
                      f"cannot reach the scheduler at {self.scheduler}: {reason}")
        return errors.error_for(code.name, reason)

    def is_unavailable(self, exc):
        return isinstance(exc, grpc.RpcError) and exc.code() in (
            grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.INTERNAL)


def _answered(rpc_error):
    """Whether the scheduler itself gave this error: it marks each one in the trailing metadata
    (gRPC gives UNAVAILABLE both for its refusals and for no connection)."""
    metadata = rpc_error.trailing_metadata() or ()
    return any(key == "dhpt-refused-by" for key, _ in metadata)


def check_scheduler_address(address):
    """HOST:PORT, as the CLI's --scheduler takes it: gRPC would otherwise wrap a port over
    65535 onto another port, and wait for a port-less name until its retries ran out."""
    host, colon, port = address.rpartition(":")
    ipv6 = host.startswith("[") and host.endswith("]")
    good = (colon and host and len(host) <= MAX_ADDRESS_HOST_CHARS
            and (":" not in host or ipv6) and all("!" <= c <= "~" for c in host)
            and 0 < len(port) <= 5 and all("0" <= c <= "9" for c in port)
            and 1 <= int(port) <= 65535)
    if not good:
        raise errors.InvalidArgument(
            f"scheduler {address!r}: give HOST:PORT with PORT between 1 and 65535 and HOST at "
            f"most {MAX_ADDRESS_HOST_CHARS} characters (for example localhost:50051)")


def check_client_id(client_id):
    if not _CLIENT_ID.match(client_id):
        raise errors.InvalidArgument(
            f"client_id {client_id!r}: 1-128 letters, digits, '.', '_', '-', '@' or ':'")


__all__ = ["Client", "DEFAULT_SCHEDULER", "DEFAULT_RETRY_SECONDS", "pb", "common_pb",
           "default_client_id"]
