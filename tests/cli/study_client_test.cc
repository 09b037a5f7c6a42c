#include "services/cli/study_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"

namespace dhpt::cli {
namespace {

// A fault, not a scheduler: answers GetStudy and StopStudy CANCELLED `times` times each, as a
// stopping scheduler answers the calls that reach it while gRPC's Shutdown begins, then as one
// would.
class CancelsFirst final : public v1::StudyService::Service {
 public:
  explicit CancelsFirst(int times) : get_left_(times), stop_left_(times) {}

  grpc::Status GetStudy(grpc::ServerContext*, const v1::GetStudyRequest* request,
                        v1::Study* response) override {
    ++get_calls;
    if (get_left_-- > 0) return grpc::Status(grpc::StatusCode::CANCELLED, "Cancelled");
    response->mutable_spec()->set_name(request->name());
    return grpc::Status::OK;
  }
  grpc::Status StopStudy(grpc::ServerContext*, const v1::StopStudyRequest* request,
                         v1::Study* response) override {
    ++stop_calls;
    if (stop_left_-- > 0) return grpc::Status(grpc::StatusCode::CANCELLED, "Cancelled");
    response->mutable_spec()->set_name(request->name());
    return grpc::Status::OK;
  }

  std::atomic<int> get_calls = 0;
  std::atomic<int> stop_calls = 0;

 private:
  std::atomic<int> get_left_;
  std::atomic<int> stop_left_;
};

class FaultServer {
 public:
  explicit FaultServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
  }
  ~FaultServer() { server_->Shutdown(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(StudyClientTest, AReadAnsweredCancelledIsAskedAgainAWriteIsNot) {
  CancelsFirst service(2);
  FaultServer server(&service);
  StudyClient client(server.address());
  absl::StatusOr<v1::Study> study = client.GetStudy("s");
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ(study->spec().name(), "s");
  EXPECT_EQ(service.get_calls.load(), 3);  // Two cut, the third answered.
  EXPECT_TRUE(absl::IsCancelled(client.StopStudy("s").status()));
  EXPECT_EQ(service.stop_calls.load(), 1);  // A write is never sent twice for a CANCELLED.
}

// A read that is cut every time ends CANCELLED after kCancelledReadTries: not asked forever.
TEST(StudyClientTest, AReadCutEveryTimeEndsCancelledAfterItsTries) {
  CancelsFirst service(1000);
  FaultServer server(&service);
  StudyClient client(server.address());
  EXPECT_TRUE(absl::IsCancelled(client.GetStudy("s").status()));
  EXPECT_EQ(service.get_calls.load(), StudyClient::kCancelledReadTries);
}

}  // namespace
}  // namespace dhpt::cli
