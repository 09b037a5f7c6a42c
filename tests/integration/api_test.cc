// The user-facing API over real gRPC: validation, error codes, health and reflection.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "services/cli/study_file.h"
#include "services/scheduler/scheduler_metrics.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

TEST(ApiTest, BadSpecsAreRejectedWithTheField) {
  TestCluster cluster(0);
  struct Case {
    const char* yaml;
    const char* words;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"name: a\nmodel: {kind: XGBOOST}\nmax_trials: 3", "dataset"},
           {"name: a\nmodel: {kind: FUNCTION, function: branin}\nmax_trials: 3\nparameters:\n"
            "  - {name: x1, double_range: {min: 2, max: 1}}\n"
            "  - {name: x2, double_range: {min: 0, max: 1}}",
            "parameters[0].double_range: min (2) must be less than max (1)"},
           {"name: a\nmodel: {kind: FUNCTION, function: branin}\nmax_trials: 3\nparameters:\n"
            "  - {name: x1, double_range: {min: 0, max: 1, log: true}}\n"
            "  - {name: x2, double_range: {min: 0, max: 1}}",
            "log needs min > 0"},
           {"name: a\nmodel: {kind: XGBOOST}\ndataset: {friedman1: {samples: 100, features: 5}}\n"
            "max_trials: 3\nparameters:\n  - {name: hidden_units, int_range: {min: 1, max: 5}}",
            "not a hyperparameter of XGBOOST"},
       }) {
    absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(c.yaml);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<v1::Study> created = cluster.client().CreateStudy(*spec);
    EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(std::string(created.status().message()), HasSubstr(c.words));
  }
  EXPECT_TRUE(cluster.client().ListStudies()->empty());  // Nothing half-created.
  EXPECT_EQ(cluster.client().GetStudy("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cluster.client().GetStudy("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster.client().StopStudy("nope").status().code(), absl::StatusCode::kNotFound);
}

// An enum number no version of the API defines is refused with the field and its values, not
// read as the default (evaluator 99 as PED-ANOVA) or as a filter nothing matches (state 99).
TEST(ApiTest, UndefinedEnumNumbersInRequestsAreRefusedWithTheField) {
  TestCluster cluster(0);
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(
      "name: e\nmodel: {kind: EXTERNAL}\nobjective: {metric: value, goal: MINIMIZE}\n"
      "max_trials: 3\nparameters:\n  - {name: x, double_range: {min: 0, max: 1}}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(cluster.client().CreateStudy(*spec).ok());

  v1::GetParamImportancesRequest importances;
  importances.set_study("e");
  importances.set_evaluator(static_cast<v1::GetParamImportancesRequest::Evaluator>(99));
  absl::Status refused = cluster.client().GetParamImportances(importances).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("evaluator: 99 is no value of Evaluator; one of"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("PED_ANOVA"));

  v1::ListTrialsRequest trials;
  trials.set_study("e");
  trials.set_state(static_cast<v1::Trial::State>(99));
  refused = cluster.client().EachTrialPage(trials, [](v1::ListTrialsResponse&) { return true; });
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("state: 99 is no value of State; one of"));

  trials.set_state(v1::Trial::STATE_UNSPECIFIED);  // The same request with a defined state: OK.
  EXPECT_TRUE(cluster.client().EachTrialPage(trials, [](v1::ListTrialsResponse&) { return true; }).ok());
}

TEST(ApiTest, BestTrialIsNotFoundUntilOneCompletes) {
  TestCluster cluster(0);
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(
      "name: waiting\nmodel: {kind: FUNCTION, function: levy}\nmax_trials: 3\nparameters:\n"
      "  - {name: x1, double_range: {min: -10, max: 10}}");
  ASSERT_TRUE(cluster.client().CreateStudy(*spec).ok());
  EXPECT_EQ(cluster.client().GetBestTrial("waiting").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(cluster.client().GetStudy("waiting")->state_reason(),
              HasSubstr("waiting for a worker that runs FUNCTION"));
  cluster.AddWorker("late");
  cluster.WaitForEnd("waiting");
  EXPECT_TRUE(cluster.client().GetBestTrial("waiting").ok());
}

TEST(ApiTest, ListWorkersShowsWhatEachWorkerAnnouncedAndRuns) {
  TestCluster cluster(0);
  cluster.AddWorker("worker-b", 2);
  cluster.AddWorker("worker-a", 1);
  ASSERT_TRUE(WaitFor([&] { return cluster.core().connected_workers() == 2; }));
  absl::StatusOr<std::vector<v1::Worker>> workers = cluster.client().ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 2u);
  EXPECT_EQ((*workers)[0].worker_id(), "worker-a");  // Sorted by id.
  EXPECT_EQ((*workers)[1].capabilities().slots(), 2);
  EXPECT_EQ((*workers)[1].running_trials_size(), 0);
  const auto [code, output] = RunBinary("dhpt", "workers --scheduler=" + cluster.address());
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("worker-a"));
  EXPECT_THAT(output, HasSubstr("worker-b"));
}

// A real worker busy training reports, in its heartbeats, CPU and memory that ListWorkers and
// `dhpt workers` show.
TEST(ApiTest, ABusyWorkersUtilisationReachesListWorkers) {
  TestCluster cluster(0);
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(R"(
name: busy
model: {kind: XGBOOST, fixed: {num_boost_round: 300}}
dataset: {friedman1: {samples: 5000, features: 10, seed: 5}}
parameters:
  - {name: max_depth, int_range: {min: 6, max: 10}}
max_trials: 1000
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(cluster.client().CreateStudy(*spec).ok());
  const std::unique_ptr<cli::ChildProcess> worker =
      StartWorkerProcess(cluster.address(), "busy-1", 1, "dhpt-cpu-worker",
                         {"--threads_per_trial=1"});
  // Heartbeats every 200 ms; one measured while a trial trains shows a good share of a core.
  v1::Worker seen;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<std::vector<v1::Worker>> workers = cluster.client().ListWorkers();
    if (!workers.ok() || workers->size() != 1) return false;
    seen = (*workers)[0];
    return seen.running_trials_size() == 1 && seen.utilisation().cpu_cores() >= 0.25;
  })) << seen.ShortDebugString();
  EXPECT_GT(seen.utilisation().memory_bytes(), uint64_t{1} << 20);
  EXPECT_GT(seen.utilisation().interval_ms(), 0);
  EXPECT_FALSE(seen.utilisation().has_gpu_percent());  // A CPU worker observes no GPU.
  EXPECT_GT(seen.utilisation_time().seconds(), 0);
  // The scheduler's gauge of it, labelled with the worker and its node.
  int series = 0;
  for (const prometheus::MetricFamily& family :
       scheduler::SchedulerStateCollector(&cluster.core()).Collect()) {
    if (family.name != "dhpt_worker_recent_memory_bytes") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      ++series;
      EXPECT_EQ(metric.label[0].value, "busy-1");
      EXPECT_GT(metric.gauge.value, 1 << 20);
    }
  }
  EXPECT_EQ(series, 1);
  const auto [code, output] = RunBinary("dhpt", "workers --scheduler=" + cluster.address());
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("utilisation"));
  EXPECT_THAT(output, ::testing::ContainsRegex("busy-1 .* [0-9]+\\.[0-9][0-9] cpu [0-9]+MiB"));
  ASSERT_TRUE(cluster.client().StopStudy("busy").ok());
}

TEST(ApiTest, HealthReportsServingForEachService) {
  TestCluster cluster(0);
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));
  for (const char* service : {"", "dhpt.v1.StudyService", "dhpt.v1.WorkerService"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, request, &response).ok()) << service;
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
}

// What `grpcurl -plaintext HOST:PORT list` asks: the reflection service's list_services. The
// request and response types come from the descriptors gRPC's reflection library registers.
TEST(ApiTest, ReflectionListsTheServicesForGrpcurl) {
  TestCluster cluster(0);
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  const auto* request_type =
      pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionRequest");
  const auto* response_type =
      pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionResponse");
  ASSERT_NE(request_type, nullptr);
  ASSERT_NE(response_type, nullptr);
  google::protobuf::DynamicMessageFactory factory;
  std::unique_ptr<google::protobuf::Message> request(factory.GetPrototype(request_type)->New());
  request->GetReflection()->SetString(request.get(), request_type->FindFieldByName("list_services"),
                                      "*");
  std::string bytes = request->SerializeAsString();

  auto channel = grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  grpc::internal::RpcMethod method("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                   grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, &context));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer out(&slice, 1);
  ASSERT_TRUE(stream->Write(out));
  stream->WritesDone();
  grpc::ByteBuffer in;
  ASSERT_TRUE(stream->Read(&in));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(in.Dump(&slices).ok());
  std::string response_bytes;
  for (const grpc::Slice& s : slices) response_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  std::unique_ptr<google::protobuf::Message> response(factory.GetPrototype(response_type)->New());
  ASSERT_TRUE(response->ParseFromString(response_bytes));
  const std::string text = response->DebugString();
  EXPECT_THAT(text, HasSubstr("dhpt.v1.StudyService"));
  EXPECT_THAT(text, HasSubstr("dhpt.v1.WorkerService"));
  EXPECT_THAT(text, HasSubstr("grpc.health.v1.Health"));
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace dhpt::testing
