// TLS, mutual TLS and bearer tokens with the real binaries: dhpt-scheduler serving TLS with a
// certificate made here by openssl, dhpt-cpu-worker and the dhpt CLI connecting with (and
// without) the right CA, certificate and token.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dhpt/v1/study_service.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "services/cli/child_process.h"
#include "services/cli/study_client.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     absl::StrCat("dhpt-security-test-", getpid()));
    std::filesystem::create_directories(*dir_);
    // A CA, a server certificate for localhost and 127.0.0.1, a client certificate, and a
    // second CA that signed neither.
    const std::string script = absl::StrCat(
        "set -e; cd ", dir_->string(), "; ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1';",
        "for ca in ca other-ca; do openssl req -x509 $ec -nodes -days 2 -keyout $ca.key",
        " -out $ca.crt -subj /CN=$ca 2>/dev/null; done;",
        "for who in server client; do openssl req $ec -nodes -keyout $who.key -out $who.csr",
        " -subj /CN=dhpt-$who 2>/dev/null; done;",
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > server.ext;",
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext;",
        "for who in server client; do openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key",
        " -CAcreateserial -days 2 -out $who.crt -extfile $who.ext 2>/dev/null; done;",
        "echo s3cret-user-token-0001 > token; echo s3cret-worker-token-002 > worker-token; echo wrong-token-of-nobody-3 > wrong-token");
    const auto [code, output] = RunCommandLine(script);
    ASSERT_EQ(code, 0) << output;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string File(const std::string& name) { return (*dir_ / name).string(); }

  // Starts dhpt-scheduler with `flags` and returns its address.
  std::string StartScheduler(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {DHPT_BIN_DIR "/dhpt-scheduler", "--listen=127.0.0.1:0", "--db=:memory:",
                                     "--heartbeat_interval=200ms"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    auto child = cli::ChildProcess::Start("scheduler", argv, fds[1], -1);
    close(fds[1]);
    EXPECT_TRUE(child.ok());
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    children_.push_back(std::move(*child));
    EXPECT_TRUE(absl::StartsWith(line, "listening on ")) << line;
    return line.substr(13);
  }
  // With its stdout and stderr to `output_fd` (-1: inherited).
  void StartWorker(const std::string& address, const std::string& id,
                   const std::vector<std::string>& flags, int output_fd = -1) {
    std::vector<std::string> argv = {DHPT_BIN_DIR "/dhpt-cpu-worker", "--scheduler=" + address,
                                     "--worker_id=" + id, "--threads_per_trial=1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto child = cli::ChildProcess::Start(id, argv, output_fd, output_fd);
    ASSERT_TRUE(child.ok());
    children_.push_back(std::move(*child));
  }
  static ChannelSecurity Security(ClientSecurityOptions options) {
    absl::StatusOr<ChannelSecurity> security = MakeChannelSecurity(options);
    EXPECT_TRUE(security.ok()) << security.status();
    return *security;
  }
  void TearDown() override {
    for (auto& child : children_) child->Signal(SIGTERM);
    children_.clear();  // Each is killed if still running, and reaped.
  }

  static std::filesystem::path* dir_;
  // What a worker the test starts writes (its end closes when TearDown kills it).
  OutputReader impostor_log_;
  std::vector<std::unique_ptr<cli::ChildProcess>> children_;
};

std::filesystem::path* SecurityTest::dir_ = nullptr;

TEST_F(SecurityTest, ATokenShortEnoughToGuessIsRefusedAtStart) {
  std::ofstream(File("short-token")) << "x\n";
  const auto [code, output] = RunCommandLine(absl::StrCat(
      "timeout 30 " DHPT_BIN_DIR "/dhpt-scheduler --listen=127.0.0.1:0 --db=:memory: --tls_cert=",
      File("server.crt"), " --tls_key=", File("server.key"), " --auth_token_file=",
      File("short-token"), " --worker_token_file=", File("worker-token")));
  EXPECT_EQ(code, 2) << output;  // A usage error, as every other refused flag.
  EXPECT_THAT(output, HasSubstr("is 1 characters; a token must have at least 16"));
}

TEST_F(SecurityTest, TlsAndATokenGuardEveryCall) {
  const std::string address = StartScheduler(
      {"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key"),
       "--auth_token_file=" + File("token"), "--worker_token_file=" + File("worker-token")});

  absl::StatusOr<std::vector<v1::Study>> plaintext = cli::StudyClient(address).ListStudies();
  EXPECT_EQ(plaintext.status().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<std::vector<v1::Study>> untrusted =
      cli::StudyClient(address, Security({.tls_ca_file = File("other-ca.crt")})).ListStudies();
  EXPECT_EQ(untrusted.status().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<std::vector<v1::Study>> no_token =
      cli::StudyClient(address, Security({.tls_ca_file = File("ca.crt")})).ListStudies();
  EXPECT_EQ(no_token.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(no_token.status().message(), HasSubstr("requires a bearer token"));
  absl::StatusOr<std::vector<v1::Study>> wrong_token =
      cli::StudyClient(address, Security({.tls_ca_file = File("ca.crt"),
                                          .token_file = File("wrong-token")}))
          .ListStudies();
  EXPECT_EQ(wrong_token.status().code(), absl::StatusCode::kUnauthenticated);
  cli::StudyClient client(address, Security({.tls_ca_file = File("ca.crt"),
                                             .token_file = File("token")}));
  EXPECT_TRUE(client.ListStudies().ok());
  // gRPC's own services are behind the token too: health answers only with it.
  for (const char* token : {"", "token"}) {
    ClientSecurityOptions options{.tls_ca_file = File("ca.crt")};
    if (*token) options.token_file = File(token);
    auto health = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(address, Security(options).credentials));
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status =
        health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
    EXPECT_EQ(status.error_code(),
              *token ? grpc::StatusCode::OK : grpc::StatusCode::UNAUTHENTICATED);
  }

  // Two authorization headers, the right token in one of them: refused as unauthenticated,
  // never an internal error.
  {
    auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        address, Security({.tls_ca_file = File("ca.crt")}).credentials));
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer s3cret-user-token-0001");
    context.AddMetadata("authorization", "Bearer wrong-token-of-nobody-3");
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status =
        health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("give one authorization header, not 2"));
  }

  // A worker's token reads nothing of the studies.
  absl::StatusOr<std::vector<v1::Study>> as_worker =
      cli::StudyClient(address, Security({.tls_ca_file = File("ca.crt"),
                                          .token_file = File("worker-token")}))
          .ListStudies();
  EXPECT_EQ(as_worker.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(as_worker.status().message(), HasSubstr("worker's token"));
  // Nor changes one (UpdateStudy, as CreateStudy, is for users).
  v1::UpdateStudyRequest update;
  update.set_name("secure");
  update.mutable_spec()->set_max_trials(10);
  update.mutable_update_mask()->add_paths("max_trials");
  EXPECT_EQ(cli::StudyClient(address, Security({.tls_ca_file = File("ca.crt"),
                                                .token_file = File("worker-token")}))
                .UpdateStudy(update)
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);

  // Workers: only the one with the workers' token gets in; the users' token is not enough.
  StartWorker(address, "good",
              {"--tls_ca=" + File("ca.crt"), "--auth_token_file=" + File("worker-token")});
  StartWorker(address, "bad", {"--tls_ca=" + File("ca.crt"),
                               "--auth_token_file=" + File("wrong-token")});
  StartWorker(address, "user", {"--tls_ca=" + File("ca.crt"),
                                "--auth_token_file=" + File("token")});
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
    return workers.ok() && workers->size() == 1;
  }));
  // The CLI with the same flags runs a study to its end on the good worker.
  const std::string flags = absl::StrCat(" --scheduler=", address, " --tls_ca=", File("ca.crt"),
                                         " --auth_token_file=", File("token"));
  const std::string study = File("study.yaml");
  std::ofstream(study) << "name: secure\nmodel: {kind: FUNCTION, function: branin}\n"
                          "max_trials: 6\nparameters:\n"
                          "  - {name: x1, double_range: {min: -5, max: 10}}\n"
                          "  - {name: x2, double_range: {min: 0, max: 15}}\n";
  const auto [code, output] = RunBinary("dhpt", "submit " + study + " --watch" + flags);
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("COMPLETED"));
  absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].worker_id(), "good");
  // And says what is wrong without the token.
  const auto [denied_code, denied] = RunBinary(
      "dhpt", absl::StrCat("studies --scheduler=", address, " --tls_ca=", File("ca.crt")));
  EXPECT_EQ(denied_code, 1);
  EXPECT_THAT(denied, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(denied, HasSubstr("--auth_token_file"));
}

// The role is each call's own: on one connection (a shared channel, an HTTP/2 proxy that
// multiplexes several clients), a worker's token after a user's call is still a worker's, and a
// user's after a worker's still a user's. gRPC gives every call of a connection the
// connection's one AuthContext, and the role used to be recorded there: the first token used
// on a connection decided every later call's role (a worker's token created and deleted
// studies).
TEST_F(SecurityTest, EachCallOnOneConnectionHasItsOwnTokensRole) {
  const std::string address = StartScheduler(
      {"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key"),
       "--auth_token_file=" + File("token"), "--worker_token_file=" + File("worker-token")});
  const std::string user = "Bearer s3cret-user-token-0001";
  const std::string worker = "Bearer s3cret-worker-token-002";
  for (const bool user_first : {true, false}) {
    SCOPED_TRACE(user_first ? "the user's token first" : "the worker's token first");
    // One channel, so one connection; each call carries its own header.
    std::unique_ptr<v1::StudyService::Stub> stub = v1::StudyService::NewStub(grpc::CreateChannel(
        address, Security({.tls_ca_file = File("ca.crt")}).credentials));
    auto list = [&](const std::string& authorization) {
      grpc::ClientContext context;
      context.AddMetadata("authorization", authorization);
      v1::ListStudiesResponse response;
      return stub->ListStudies(&context, v1::ListStudiesRequest(), &response).error_code();
    };
    if (!user_first) EXPECT_EQ(list(worker), grpc::StatusCode::PERMISSION_DENIED);
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(list(user), grpc::StatusCode::OK) << round;
      EXPECT_EQ(list(worker), grpc::StatusCode::PERMISSION_DENIED) << round;
    }
    // Nor a write: the worker's token creates nothing after a user's call on the connection.
    grpc::ClientContext context;
    context.AddMetadata("authorization", worker);
    v1::StudySpec spec;
    spec.set_name("made-with-a-workers-token");
    v1::Study study;
    EXPECT_EQ(stub->CreateStudy(&context, spec, &study).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
}

TEST_F(SecurityTest, MutualTlsWantsAClientCertificateFromTheCa) {
  const std::string address = StartScheduler(
      {"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key"),
       "--tls_client_ca=" + File("ca.crt")});
  EXPECT_FALSE(
      cli::StudyClient(address, Security({.tls_ca_file = File("ca.crt")})).ListStudies().ok());
  EXPECT_TRUE(cli::StudyClient(address, Security({.tls_ca_file = File("ca.crt"),
                                                  .tls_cert_file = File("client.crt"),
                                                  .tls_key_file = File("client.key")}))
                  .ListStudies()
                  .ok());
  // A name the certificate carries, when the address is not one of them.
  EXPECT_TRUE(cli::StudyClient(absl::StrCat("127.0.0.1:", address.substr(address.rfind(':') + 1)),
                               Security({.tls_ca_file = File("ca.crt"),
                                         .tls_cert_file = File("client.crt"),
                                         .tls_key_file = File("client.key"),
                                         .tls_server_name = "localhost"}))
                  .ListStudies()
                  .ok());

  // A worker is who its certificate says: the id must be one of the certificate's names.
  const std::vector<std::string> certified = {"--tls_ca=" + File("ca.crt"),
                                              "--tls_cert=" + File("client.crt"),
                                              "--tls_key=" + File("client.key"),
                                              "--tls_server_name=localhost"};
  StartWorker(address, "dhpt-client", certified);
  StartWorker(address, "claims-another-name", certified, impostor_log_.write_fd());
  impostor_log_.Started();
  cli::StudyClient client(address, Security({.tls_ca_file = File("ca.crt"),
                                             .tls_cert_file = File("client.crt"),
                                             .tls_key_file = File("client.key")}));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
    return workers.ok() && workers->size() == 1;
  }));
  // The other keeps retrying, and keeps being refused: twice, as its log says.
  ASSERT_TRUE(WaitFor([&] {
    const std::string log = impostor_log_.text();
    return absl::StrContains(log, "PERMISSION_DENIED") &&
           log.find("ended: ", log.find("ended: ") + 1) != std::string::npos;
  })) << impostor_log_.text();
  absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ(workers->at(0).worker_id(), "dhpt-client");
}

TEST_F(SecurityTest, HalfGivenOrUnsafeSettingsAreRefusedAtStart) {
  {
    const auto [code, output] = RunBinary(
        "dhpt-scheduler", "--listen=127.0.0.1:0 --db=:memory: --auth_token_file=" + File("token"));
    EXPECT_EQ(code, 2);
    EXPECT_THAT(output, HasSubstr("need TLS"));
  }
  {
    const std::string tls =
        " --tls_cert=" + File("server.crt") + " --tls_key=" + File("server.key");
    const auto [code, output] = RunBinary(
        "dhpt-scheduler", "--listen=127.0.0.1:0 --db=:memory: --auth_token_file=" + File("token") + tls);
    EXPECT_EQ(code, 2);
    EXPECT_THAT(output, HasSubstr("--worker_token_file"));
    const auto [same_code, same] =
        RunBinary("dhpt-scheduler", "--listen=127.0.0.1:0 --db=:memory: --auth_token_file=" + File("token") +
                                        " --worker_token_file=" + File("token") + tls);
    EXPECT_EQ(same_code, 2);
    EXPECT_THAT(same, HasSubstr("the same token"));
  }
  {
    const auto [code, output] =
        RunBinary("dhpt-scheduler", "--listen=127.0.0.1:0 --db=:memory: --tls_cert=" + File("server.crt"));
    EXPECT_EQ(code, 2);
    EXPECT_THAT(output, HasSubstr("--tls_cert and --tls_key go together"));
  }
  {
    const auto [code, output] = RunBinary(
        "dhpt-scheduler", "--listen=127.0.0.1:0 --db=:memory: --tls_cert=/nonexistent.crt --tls_key=" +
                              File("server.key"));
    EXPECT_EQ(code, 2);
    EXPECT_THAT(output, HasSubstr("cannot read /nonexistent.crt"));
  }
  {
    const auto [code, output] =
        RunBinary("dhpt-cpu-worker", "--scheduler=127.0.0.1:1 --auth_token_file=" + File("token"));
    EXPECT_EQ(code, 2);
    EXPECT_THAT(output, HasSubstr("a token is never sent in plaintext"));
  }
  {
    const auto [code, output] = RunBinary("dhpt", "studies --tls_cert=" + File("client.crt"));
    EXPECT_EQ(code, 1);
    EXPECT_THAT(output, HasSubstr("need TLS: give --tls_ca"));
  }
}

}  // namespace
}  // namespace dhpt::testing
