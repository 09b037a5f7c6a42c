// A full disk under a real scheduler process: on a small tmpfs of the test's own, a result is
// acknowledged only once it is stored (its retry too), no lease starts while the disk is full,
// every acknowledged result survives a kill -9, and a study that paused resumes by itself once
// space returns. Also the database files the scheduler refuses at start.

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A tmpfs of `bytes` mounted on a directory of the test's own, unmounted when it goes.
class SmallDisk {
 public:
  explicit SmallDisk(int64_t bytes) {
    mounted_ = mount("tmpfs", directory_.path().c_str(), "tmpfs", 0,
                     absl::StrCat("size=", bytes).c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) umount2(directory_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  std::string Path(const std::string& name) const { return directory_.path() + "/" + name; }
  // Takes every free byte (in shrinking chunks, so that what others write meanwhile does not
  // matter); Free gives them back.
  void Fill() {
    const int fd = open(Path("filler").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ASSERT_GE(fd, 0);
    const std::string chunk(64 << 10, 'f');
    for (size_t size = chunk.size(); size >= 1; size /= 16) {
      while (write(fd, chunk.data(), size) == static_cast<ssize_t>(size)) {
      }
    }
    close(fd);
  }
  void Free() { std::filesystem::remove(Path("filler")); }

 private:
  TempDirectory directory_;
  bool mounted_ = false;
};

// A study whose spec alone takes 2 MB: creating it on a full disk makes the database refuse
// writes (its log must grow), which is what a long run of results would do.
v1::StudySpec Ballast(const std::string& name) {
  v1::StudySpec spec = Spec("model: {kind: EXTERNAL}\nobjective: {metric: loss, goal: MINIMIZE}\n"
                            "max_trials: 1\n");
  spec.set_name(name);
  for (int p = 0; p < 2; ++p) {
    v1::Parameter& parameter = *spec.add_parameters();
    parameter.set_name(absl::StrCat("p", p));
    for (int v = 0; v < 1000; ++v) {
      parameter.mutable_categorical()->add_values(absl::StrCat(v, std::string(1000, 'b')));
    }
  }
  return spec;
}

v1::CompleteTrialRequest Tell(int64_t trial, double loss) {
  v1::CompleteTrialRequest tell;
  tell.set_study("ext");
  tell.set_trial(trial);
  tell.set_client_id("a");
  (*tell.mutable_metrics())["loss"] = loss;
  return tell;
}

TEST(StorageFaultsTest, AFullDiskAcknowledgesNothingUnstoredAndLosesNothingAcknowledged) {
  SmallDisk disk(16 << 20);
  if (!disk.mounted()) GTEST_SKIP() << "mounting a tmpfs needs root";
  const std::string db = "--db=" + disk.Path("scheduler.db");
  auto scheduler = std::make_unique<SchedulerProcess>(std::vector<std::string>{db});
  auto client = std::make_unique<cli::StudyClient>(scheduler->address());
  ASSERT_TRUE(client->CreateStudy(Spec(R"(
name: ext
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
max_trials: 20
parameters: [{name: lr, double_range: {min: 0.001, max: 0.1}}]
)")).ok());
  auto restart = [&] {
    scheduler->Kill();
    scheduler = std::make_unique<SchedulerProcess>(std::vector<std::string>{db});
    ASSERT_FALSE(scheduler->address().empty());
    client = std::make_unique<cli::StudyClient>(scheduler->address());
  };
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    v1::SuggestTrialsRequest ask;
    ask.set_study("ext");
    ask.set_client_id("a");
    absl::StatusOr<v1::SuggestTrialsResponse> asked = client->SuggestTrials(ask);
    ASSERT_TRUE(asked.ok() && asked->trials_size() == 1) << asked.status();
    const int64_t number = asked->trials(0).number();

    disk.Fill();
    absl::StatusOr<v1::Study> ballast = client->CreateStudy(Ballast(absl::StrCat("ballast", round)));
    ASSERT_EQ(ballast.status().code(), absl::StatusCode::kUnavailable) << ballast.status();
    v1::SuggestTrialsRequest other = ask;
    other.set_client_id("b");
    EXPECT_EQ(client->SuggestTrials(other).status().code(), absl::StatusCode::kUnavailable);
    for (int call = 0; call < 2; ++call) {  // The call, then the retry its error recommends.
      absl::StatusOr<v1::Trial> told = client->CompleteTrial(Tell(number, round + 0.5));
      EXPECT_EQ(told.status().code(), absl::StatusCode::kUnavailable) << call;
    }
    scheduler->Kill();
    disk.Free();
    restart();
    // Nothing was acknowledged, and nothing is there: the trial is still the client's to finish.
    absl::StatusOr<std::vector<v1::Trial>> before = client->ListTrials("ext");
    ASSERT_TRUE(before.ok()) << before.status();
    ASSERT_GT(before->size(), static_cast<size_t>(number));
    EXPECT_NE((*before)[number].state(), v1::Trial::COMPLETED);
    absl::StatusOr<v1::Trial> told = client->CompleteTrial(Tell(number, round + 0.5));
    ASSERT_TRUE(told.ok()) << told.status();
    restart();  // Killed right after the acknowledgement: the result is there.
    absl::StatusOr<std::vector<v1::Trial>> trials = client->ListTrials("ext");
    ASSERT_TRUE(trials.ok()) << trials.status();
    for (int64_t settled = 0; settled <= round; ++settled) {
      ASSERT_GT(trials->size(), static_cast<size_t>(settled));
      EXPECT_EQ((*trials)[settled].state(), v1::Trial::COMPLETED) << settled;
      EXPECT_EQ((*trials)[settled].metrics().at("loss"), settled + 0.5) << settled;
    }
  }
}

TEST(StorageFaultsTest, AStudyPausedByAFullDiskResumesByItselfWhenSpaceReturns) {
  SmallDisk disk(16 << 20);
  if (!disk.mounted()) GTEST_SKIP() << "mounting a tmpfs needs root";
  SchedulerProcess scheduler({"--db=" + disk.Path("scheduler.db")});
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: paused
model: {kind: FUNCTION, function: branin, fixed: {seconds: 0.02}}
max_trials: 60
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)")).ok());
  const std::unique_ptr<cli::ChildProcess> worker = StartWorkerProcess(scheduler.address(), "w");
  auto completed = [&] {
    absl::StatusOr<v1::Study> study = client.GetStudy("paused");
    return study.ok() ? study->trials_completed() : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return completed() >= 5; }));
  disk.Fill();
  EXPECT_EQ(client.CreateStudy(Ballast("ballast")).status().code(),
            absl::StatusCode::kUnavailable);
  // Paused: what runs finishes, nothing new starts.
  ASSERT_TRUE(WaitFor([&] { return client.GetStudy("paused")->trials_running() == 0; },
                      absl::Seconds(10)));
  const int paused_at = completed();
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(completed(), paused_at);
  EXPECT_LT(paused_at, 60);
  disk.Free();
  // Only reads from here on: no user write may be what wakes it.
  EXPECT_TRUE(WaitFor([&] { return client.GetStudy("paused")->state() == v1::Study::COMPLETED; },
                      absl::Seconds(30)))
      << completed() << " completed";
}

// Files the scheduler must not run on, each refused at start with what to do.
TEST(StorageFaultsTest, DatabaseFilesThatCouldLoseWritesAreRefusedAtStart) {
  TempDirectory directory;
  auto start_on = [](const std::string& db) {
    return RunCommandLine(
        absl::StrCat("timeout 30 " DHPT_BIN_DIR "/dhpt-scheduler --listen=127.0.0.1:0 --db=", db));
  };
  const std::string db = directory.path() + "/scheduler.db";
  { SchedulerProcess creator({"--db=" + db}); }
  // A second name: each name has a log of its own, so one name's acknowledged writes would be
  // missing under the other, and replayed later over newer ones.
  std::filesystem::create_hard_link(db, directory.path() + "/other-name.db");
  for (const std::string& name : {db, directory.path() + "/other-name.db"}) {
    auto [code, output] = start_on(name);
    EXPECT_EQ(code, 1) << name;
    EXPECT_THAT(output, HasSubstr("2 names (hard links)")) << name;
  }
  std::filesystem::remove(directory.path() + "/other-name.db");
  {
    SchedulerProcess again({"--db=" + db});
    EXPECT_FALSE(again.address().empty());
  }
  // Not a regular file.
  ASSERT_EQ(mkfifo((directory.path() + "/fifo").c_str(), 0600), 0);
  for (const std::string& special : {std::string("/dev/null"), directory.path() + "/fifo"}) {
    auto [code, output] = start_on(special);
    EXPECT_EQ(code, 1) << special;
    EXPECT_THAT(output, HasSubstr("is not a regular file")) << special;
  }
  // A schema version no DHPT writes.
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(handle, "PRAGMA user_version = -1", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(handle);
  auto [code, output] = start_on(db);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("schema version -1, which no DHPT writes"));
  EXPECT_THAT(output, Not(HasSubstr("table meta already exists")));
}

// A read-only file in a writable directory: the file is what to fix, and the error says so.
TEST(StorageFaultsTest, AReadOnlyFileInAWritableDirectoryNamesTheFile) {
  if (geteuid() != 0) GTEST_SKIP() << "runs the scheduler as nobody, which needs root";
  TempDirectory directory;
  std::filesystem::permissions(directory.path(), std::filesystem::perms::all);
  const std::string db = directory.path() + "/read-only.db";
  std::ofstream(db).close();
  ASSERT_EQ(chown(db.c_str(), 65534, 65534), 0);
  std::filesystem::permissions(db, std::filesystem::perms::owner_read |
                                       std::filesystem::perms::group_read |
                                       std::filesystem::perms::others_read);
  auto [code, output] = RunCommandLine(absl::StrCat(
      "setpriv --reuid=65534 --regid=65534 --clear-groups timeout 30 " DHPT_BIN_DIR
      "/dhpt-scheduler --listen=127.0.0.1:0 --db=", db));
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("the file exists but is read-only for the scheduler"));
  EXPECT_THAT(output, Not(HasSubstr("directory must exist")));
}

}  // namespace
}  // namespace dhpt::testing
