// What grpcurl does with no .proto files at hand: it asks the scheduler's reflection service
// for the file that defines a symbol, builds a descriptor pool from the answer (fetching
// imports by file name), finds the method, builds the request as a dynamic message and calls
// the method. This binary links the scheduler library and nothing else that defines
// grpc.health.v1, so what reflection can describe here is what dhpt-scheduler can describe.
// The last tests ask a started dhpt-scheduler, which links the gRPC stack from its static
// archives (DHPT_STATIC_SCHEDULER), unlike this binary.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/json_util.h"
#include "services/scheduler/scheduler_server.h"
#include "services/scheduler/study_store.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptorProto;
using google::protobuf::Message;

// A reflection v1alpha client made of dynamic messages. libgrpc++_reflection registers the
// v1alpha types in the generated pool but installs no headers for them, and generating them
// again from grpc-proto would define the same C++ classes twice.
class ReflectionClient {
 public:
  explicit ReflectionClient(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)),
        request_type_(DescriptorPool::generated_pool()->FindMessageTypeByName(
            "grpc.reflection.v1alpha.ServerReflectionRequest")),
        response_type_(DescriptorPool::generated_pool()->FindMessageTypeByName(
            "grpc.reflection.v1alpha.ServerReflectionResponse")) {}

  bool ready() const { return request_type_ != nullptr && response_type_ != nullptr; }

  // The file descriptors reflection returns for one request (`field` is
  // file_containing_symbol or file_by_filename).
  absl::StatusOr<std::vector<FileDescriptorProto>> Ask(const std::string& field,
                                                       const std::string& value) {
    std::unique_ptr<Message> request(factory_.GetPrototype(request_type_)->New());
    request->GetReflection()->SetString(request.get(), request_type_->FindFieldByName(field),
                                        value);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::internal::RpcMethod method(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        grpc::internal::RpcMethod::BIDI_STREAMING, channel_);
    std::unique_ptr<grpc::ClientReaderWriter<Message, Message>> stream(
        grpc::internal::ClientReaderWriterFactory<Message, Message>::Create(channel_.get(), method,
                                                                           &context));
    if (!stream->Write(*request)) return absl::UnavailableError("reflection: write failed");
    stream->WritesDone();
    std::unique_ptr<Message> response(factory_.GetPrototype(response_type_)->New());
    const bool read = stream->Read(response.get());
    const grpc::Status finished = stream->Finish();
    if (!read) return absl::UnavailableError(finished.error_message());

    const google::protobuf::Reflection* reflection = response->GetReflection();
    const auto* error_field = response_type_->FindFieldByName("error_response");
    if (reflection->HasField(*response, error_field)) {
      const Message& error = reflection->GetMessage(*response, error_field);
      return absl::NotFoundError(absl::StrCat(field, " ", value, ": ", error.DebugString()));
    }
    const auto* files_field = response_type_->FindFieldByName("file_descriptor_response");
    const Message& files = reflection->GetMessage(*response, files_field);
    const auto* bytes_field = files.GetDescriptor()->FindFieldByName("file_descriptor_proto");
    std::vector<FileDescriptorProto> out;
    for (int i = 0; i < files.GetReflection()->FieldSize(files, bytes_field); ++i) {
      FileDescriptorProto file;
      if (!file.ParseFromString(files.GetReflection()->GetRepeatedString(files, bytes_field, i))) {
        return absl::DataLossError("reflection: unparsable FileDescriptorProto");
      }
      out.push_back(std::move(file));
    }
    return out;
  }

  // Builds `pool` from the file defining `symbol` and every file it imports, as grpcurl does.
  absl::Status Resolve(const std::string& symbol, DescriptorPool& pool) {
    absl::StatusOr<std::vector<FileDescriptorProto>> files = Ask("file_containing_symbol", symbol);
    if (!files.ok()) return files.status();
    return AddAll(*files, pool);
  }

 private:
  absl::Status AddAll(const std::vector<FileDescriptorProto>& files, DescriptorPool& pool) {
    // Reflection may send a file's imports with it, in any order: add a file once all of its
    // imports are in, asking for the ones that are missing.
    for (const FileDescriptorProto& file : files) {
      if (pool.FindFileByName(file.name()) != nullptr) continue;
      for (const std::string& dependency : file.dependency()) {
        if (pool.FindFileByName(dependency) != nullptr) continue;
        const FileDescriptorProto* sent = nullptr;
        for (const FileDescriptorProto& other : files) {
          if (other.name() == dependency) sent = &other;
        }
        if (sent != nullptr) {
          if (absl::Status s = AddAll({*sent}, pool); !s.ok()) return s;
          continue;
        }
        absl::StatusOr<std::vector<FileDescriptorProto>> fetched =
            Ask("file_by_filename", dependency);
        if (!fetched.ok()) return fetched.status();
        if (absl::Status s = AddAll(*fetched, pool); !s.ok()) return s;
      }
      if (pool.BuildFile(file) == nullptr) {
        return absl::InternalError(absl::StrCat("cannot build ", file.name()));
      }
    }
    return absl::OkStatus();
  }

  std::shared_ptr<grpc::Channel> channel_;
  const google::protobuf::Descriptor* request_type_;
  const google::protobuf::Descriptor* response_type_;
  google::protobuf::DynamicMessageFactory factory_;
};

class ReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
        SchedulerServer::Start({.listen_address = "127.0.0.1:0"}, db_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  // What `grpcurl -d JSON ADDRESS SERVICE/METHOD` does: a request built from JSON against the
  // reflected descriptors, the answer printed as JSON.
  absl::StatusOr<std::string> CallJson(const DescriptorPool& pool, const std::string& service_name,
                                       const std::string& method_name, const std::string& json) {
    const google::protobuf::ServiceDescriptor* service = pool.FindServiceByName(service_name);
    if (service == nullptr) return absl::NotFoundError(service_name);
    const google::protobuf::MethodDescriptor* method = service->FindMethodByName(method_name);
    if (method == nullptr) return absl::NotFoundError(method_name);
    google::protobuf::DynamicMessageFactory factory(&pool);
    std::unique_ptr<Message> request(factory.GetPrototype(method->input_type())->New());
    if (auto parsed = google::protobuf::util::JsonStringToMessage(json, request.get());
        !parsed.ok()) {
      return absl::InvalidArgumentError(parsed.ToString());
    }
    grpc::ByteBuffer request_bytes;
    bool own = false;
    if (!grpc::SerializationTraits<Message>::Serialize(*request, &request_bytes, &own).ok()) {
      return absl::InternalError("serialize");
    }
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::ByteBuffer response_bytes;
    grpc::Status status;
    absl::Notification done;
    stub.UnaryCall(&context, absl::StrCat("/", service->full_name(), "/", method->name()), {},
                   &request_bytes, &response_bytes, [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();  // The context's deadline bounds the wait.
    if (!status.ok()) return absl::UnknownError(status.error_message());
    std::unique_ptr<Message> response(factory.GetPrototype(method->output_type())->New());
    if (!grpc::SerializationTraits<Message>::Deserialize(&response_bytes, response.get()).ok()) {
      return absl::InternalError("deserialize");
    }
    std::string out;
    if (!google::protobuf::util::MessageToJsonString(*response, &out).ok()) {
      return absl::InternalError("to JSON");
    }
    return out;
  }

  testing::TempDatabase db_;
  std::unique_ptr<SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// The README's `grpcurl -plaintext localhost:50051 grpc.health.v1.Health/Check`.
TEST_F(ReflectionTest, HealthCheckCanBeBuiltFromReflectionAlone) {
  ReflectionClient reflection(channel_);
  ASSERT_TRUE(reflection.ready());
  DescriptorPool pool;
  absl::Status resolved = reflection.Resolve("grpc.health.v1.Health", pool);
  ASSERT_TRUE(resolved.ok()) << resolved;
  absl::StatusOr<std::string> health =
      CallJson(pool, "grpc.health.v1.Health", "Check", R"({"service": ""})");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, R"({"status":"SERVING"})");
}

TEST_F(ReflectionTest, StudyServiceAndItsImportsResolve) {
  ReflectionClient reflection(channel_);
  ASSERT_TRUE(reflection.ready());
  DescriptorPool pool;
  absl::Status resolved = reflection.Resolve("dhpt.v1.StudyService", pool);
  ASSERT_TRUE(resolved.ok()) << resolved;
  const google::protobuf::ServiceDescriptor* service =
      pool.FindServiceByName("dhpt.v1.StudyService");
  ASSERT_NE(service, nullptr);
  const google::protobuf::MethodDescriptor* create = service->FindMethodByName("CreateStudy");
  ASSERT_NE(create, nullptr);
  // The spec lives in common.proto, which reflection had to deliver as an import.
  EXPECT_NE(pool.FindMessageTypeByName("dhpt.v1.StudySpec"), nullptr);
}

// The README's ask-and-tell session with grpcurl: an EXTERNAL study created, a trial asked
// for and its result told, every message built from JSON through reflection alone.
TEST_F(ReflectionTest, AskAndTellWorkFromJsonThroughReflection) {
  ReflectionClient reflection(channel_);
  ASSERT_TRUE(reflection.ready());
  DescriptorPool pool;
  ASSERT_TRUE(reflection.Resolve("dhpt.v1.StudyService", pool).ok());
  const std::string service = "dhpt.v1.StudyService";
  ASSERT_TRUE(CallJson(pool, service, "CreateStudy", R"({"name": "shell",
      "model": {"kind": "EXTERNAL"}, "objective": {"metric": "loss", "goal": "MINIMIZE"},
      "parameters": [{"name": "x", "doubleRange": {"min": 0, "max": 1}}], "maxTrials": 2})")
                  .ok());
  absl::StatusOr<std::string> asked = CallJson(pool, service, "SuggestTrials",
                                               R"({"study": "shell", "clientId": "sh"})");
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_THAT(*asked, ::testing::HasSubstr(R"("clientId":"sh")"));
  EXPECT_THAT(*asked, ::testing::HasSubstr(R"("doubleValue":)"));
  absl::StatusOr<std::string> told = CallJson(
      pool, service, "CompleteTrial",
      R"({"study": "shell", "trial": 0, "clientId": "sh", "metrics": {"loss": 0.5}})");
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_THAT(*told, ::testing::HasSubstr(R"("state":"COMPLETED")"));
  absl::StatusOr<std::string> enqueued = CallJson(
      pool, service, "EnqueueTrial", R"({"study": "shell", "params": {"x": 0.25}})");
  ASSERT_TRUE(enqueued.ok()) << enqueued.status();
  EXPECT_THAT(*enqueued, ::testing::HasSubstr(R"("origin":"ENQUEUED")"));
}

// docs/api.md's UpdateStudy with grpcurl: the field mask as proto JSON writes it (one string,
// camelCase paths), its descriptor delivered by reflection as an import.
TEST_F(ReflectionTest, UpdateStudyTakesItsFieldMaskFromJson) {
  ReflectionClient reflection(channel_);
  ASSERT_TRUE(reflection.ready());
  DescriptorPool pool;
  ASSERT_TRUE(reflection.Resolve("dhpt.v1.StudyService", pool).ok());
  const std::string service = "dhpt.v1.StudyService";
  ASSERT_TRUE(CallJson(pool, service, "CreateStudy", R"({"name": "xgb-friedman",
      "model": {"kind": "EXTERNAL"}, "objective": {"metric": "loss", "goal": "MINIMIZE"},
      "parameters": [{"name": "x", "doubleRange": {"min": 0, "max": 1}}], "maxTrials": 20})")
                  .ok());
  absl::StatusOr<std::string> updated = CallJson(
      pool, service, "UpdateStudy",
      R"({"name": "xgb-friedman", "spec": {"maxTrials": 40, "parallelTrials": 4}, "updateMask": "maxTrials,parallelTrials"})");
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_THAT(*updated, ::testing::HasSubstr(R"("maxTrials":40)"));
  EXPECT_THAT(*updated, ::testing::HasSubstr(R"("parallelTrials":4)"));
}

TEST_F(ReflectionTest, UnknownSymbolIsNotFound) {
  ReflectionClient reflection(channel_);
  ASSERT_TRUE(reflection.ready());
  EXPECT_EQ(reflection.Ask("file_containing_symbol", "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

// A dhpt-scheduler process (the built binary) on 127.0.0.1:0 with an SQLite file in a
// temporary directory, SIGKILLed and reaped at the end of the test.
class SchedulerBinaryTest : public ReflectionTest {
 protected:
  void SetUp() override {
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    RemoveDatabase();
    std::string path = DHPT_BIN_DIR "/dhpt-scheduler", listen = "--listen=127.0.0.1:0",
                db_flag = "--db=" + db_path_;
    char* argv[] = {path.data(), listen.data(), db_flag.data(), nullptr};
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      execv(path.c_str(), argv);
      _exit(127);
    }
    close(out[1]);
    output_fd_ = out[0];  // Open until the end: a write to a closed pipe would kill it.
    // "listening on 127.0.0.1:PORT", within 60 s.
    std::string output;
    pollfd readable{.fd = output_fd_, .events = POLLIN};
    char buffer[256];
    while (!absl::StrContains(output, "\n") && poll(&readable, 1, 60000) == 1) {
      const ssize_t n = read(output_fd_, buffer, sizeof buffer);
      if (n <= 0) break;
      output.append(buffer, n);
    }
    const size_t at = output.find("listening on ");
    ASSERT_NE(at, std::string::npos) << output;
    const std::string address = output.substr(at + 13, output.find('\n', at) - at - 13);
    channel_ = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (output_fd_ >= 0) close(output_fd_);
    RemoveDatabase();
  }

  void RemoveDatabase() const {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db_path_ + suffix).c_str());
  }

  std::string ProcFile(const char* name) const {
    std::ifstream file(absl::StrCat("/proc/", pid_, "/", name));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

  const std::string db_path_ =
      absl::StrCat(::testing::TempDir(), "/scheduler-binary-", getpid(), ".sqlite");
  pid_t pid_ = 0;
  int output_fd_ = -1;
};

// Idle, the scheduler maps none of the gRPC stack's shared libraries (gRPC, protobuf, some 50
// Abseil libraries, OpenSSL, SQLite): each, mapped, counted about its whole size, 20 MiB of
// resident memory in all where the goal is 20 MB (docs/benchmarks.md, "Idle memory").
TEST_F(SchedulerBinaryTest, IdleItMapsNoSharedGrpcStackAndStaysUnder20Megabytes) {
  if (!DHPT_SCHEDULER_LINKS_GRPC_STATICALLY) {
    GTEST_SKIP() << "configured with DHPT_STATIC_SCHEDULER off or without the static archives";
  }
  const std::string maps = ProcFile("maps");
  ASSERT_THAT(maps, ::testing::HasSubstr("/dhpt-scheduler"));  // The maps were read.
  std::set<std::string> shared_stack;
  for (absl::string_view line : absl::StrSplit(maps, '\n')) {
    const absl::string_view file = line.substr(std::min(line.size(), line.rfind('/') + 1));
    for (const char* library : {"libgrpc", "libgpr", "libupb", "libre2", "libprotobuf",
                                "libabsl_", "libssl", "libcrypto", "libsqlite3"}) {
      if (absl::StartsWith(file, library)) shared_stack.emplace(file);
    }
  }
  EXPECT_THAT(shared_stack, ::testing::IsEmpty());
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  const std::string status = ProcFile("status");
  const size_t at = status.find("VmRSS:");
  ASSERT_NE(at, std::string::npos) << status;
  EXPECT_LT(std::stoll(status.substr(at + 6)) * 1024, 20'000'000)
      << status.substr(at, status.find('\n', at) - at);
#endif
}

// What it carries of them still serves: health and reflection as grpcurl asks them, and a study
// kept in its SQLite file, asked for and told through messages built from JSON.
TEST_F(SchedulerBinaryTest, ItAnswersHealthReflectionAndStudiesFromItsStaticGrpcStack) {
  ReflectionClient reflection(channel_);
  ASSERT_TRUE(reflection.ready());
  DescriptorPool health_pool;
  ASSERT_TRUE(reflection.Resolve("grpc.health.v1.Health", health_pool).ok());
  absl::StatusOr<std::string> health =
      CallJson(health_pool, "grpc.health.v1.Health", "Check", R"({"service": ""})");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, R"({"status":"SERVING"})");

  DescriptorPool pool;
  ASSERT_TRUE(reflection.Resolve("dhpt.v1.StudyService", pool).ok());
  const std::string service = "dhpt.v1.StudyService";
  absl::StatusOr<std::string> created = CallJson(pool, service, "CreateStudy", R"({"name": "binary",
      "model": {"kind": "EXTERNAL"}, "objective": {"metric": "loss", "goal": "MINIMIZE"},
      "parameters": [{"name": "x", "doubleRange": {"min": 0, "max": 1}}], "maxTrials": 2})");
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<std::string> asked = CallJson(pool, service, "SuggestTrials",
                                               R"({"study": "binary", "clientId": "sh"})");
  ASSERT_TRUE(asked.ok()) << asked.status();
  absl::StatusOr<std::string> told = CallJson(
      pool, service, "CompleteTrial",
      R"({"study": "binary", "trial": 0, "clientId": "sh", "metrics": {"loss": 0.5}})");
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_THAT(*told, ::testing::HasSubstr(R"("state":"COMPLETED")"));
  EXPECT_EQ(reflection.Ask("file_containing_symbol", "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dhpt::scheduler
