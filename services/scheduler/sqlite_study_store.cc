#include "services/scheduler/sqlite_study_store.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "services/common/logging.h"
#include "services/common/status_macros.h"

namespace dhpt::scheduler {
namespace {

// Schema migrations: kMigrations[v] takes a database from user_version v to v + 1.
constexpr const char* kMigrations[] = {
    // 1: studies and trials as protobuf bytes, intermediate values as rows.
    R"sql(
      CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
      CREATE TABLE studies (name TEXT PRIMARY KEY, study BLOB NOT NULL);
      CREATE TABLE trials (
        id INTEGER PRIMARY KEY,
        study TEXT NOT NULL,
        number INTEGER NOT NULL,
        trial BLOB NOT NULL);
      CREATE INDEX trials_by_study ON trials (study, number);
      CREATE TABLE intermediate_values (
        trial_id INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        step INTEGER NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (trial_id, attempt, step)) WITHOUT ROWID;
    )sql",
};
static_assert(std::size(kMigrations) == kStoreSchemaVersion);

// Whether the file system holding `path` has no block left for the scheduler.
bool FileSystemIsFull(const std::string& path) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  struct statvfs info;
  return statvfs(directory.empty() ? "." : directory.c_str(), &info) == 0 && info.f_bavail == 0;
}

// What went wrong, in words an operator can act on.
absl::Status StoreError(sqlite3* db, int code, absl::string_view doing, const std::string& path,
                        bool opening) {
  // SQLite's own message when it raised this code; the code's text when the caller did.
  const char* detail = db != nullptr && sqlite3_extended_errcode(db) == code ? sqlite3_errmsg(db)
                                                                             : sqlite3_errstr(code);
  const std::string what = absl::StrCat(doing, " ", path, ": ", detail);
  switch (code & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return absl::DataLossError(absl::StrCat(
          what, "; the file is not a DHPT database or is damaged: restore it from a backup or "
                "move it aside to start with an empty one (docs/storage.md)"));
    case SQLITE_FULL:
      return absl::UnavailableError(absl::StrCat(
          what, FileSystemIsFull(path) ? "; the file system holding it is full: free disk space"
                                       : "; free disk space or raise --max_db_bytes",
          " (nothing stored is lost)"));
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      return absl::FailedPreconditionError(absl::StrCat(
          what, "; the scheduler needs to write the file, its -wal and -shm files and their "
                "directory"));
    case SQLITE_IOERR:
      // SQLite says "disk I/O error" when it cannot grow its shared-memory or log file.
      if (FileSystemIsFull(path)) {
        return absl::UnavailableError(absl::StrCat(
            what, "; the file system holding it is full: free disk space (nothing stored is "
                  "lost)"));
      }
      return absl::UnavailableError(absl::StrCat(what, "; the disk failed to read or write"));
    default:
      return opening ? absl::FailedPreconditionError(what) : absl::UnavailableError(what);
  }
}

// Why the database file cannot be opened for writing, with what to do about it.
absl::Status CannotOpenError(const std::string& path, int error) {
  std::string advice = "; its directory must exist and be writable by the scheduler";
  struct stat info;
  if (error == EISDIR) {
    advice = "; give the path of a database file, not a directory";
  } else if ((error == EACCES || error == EPERM || error == EROFS) &&
             stat(path.c_str(), &info) == 0) {
    advice = error == EROFS ? "; its file system is read-only: put the database on a writable one"
                            : "; the file exists but is read-only for the scheduler: make it "
                              "writable (chmod u+w) or run the scheduler as its owner";
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot open ", path, " for writing: ", std::strerror(error), advice));
}

// The database must be a regular file with one name. SQLite keeps the write-ahead log beside
// the name it was opened by (NAME-wal), so a second name (a hard link) has a log of its own: a
// scheduler started under one name does not see what was committed to the other's log, and
// the other name later replays its stale log over newer writes. Hence one name only.
absl::Status CheckDatabaseFile(const std::string& path, int fd) {
  struct stat info;
  if (fstat(fd, &info) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not a regular file (a device, a FIFO or a socket): give the path of a "
              "database file, or :memory: to keep nothing"));
  }
  if (info.st_nlink > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has ", info.st_nlink, " names (hard links); SQLite keeps each name's "
        "write-ahead log apart, so another name can hide or later undo acknowledged writes. "
        "Remove the other names (find / -xdev -samefile ", path, ") or copy the database with "
        "sqlite3's .backup (docs/storage.md)"));
  }
  return absl::OkStatus();
}

}  // namespace

// Not in the anonymous namespace: SqliteStudyStore::Statements, a member type of an exported
// class, holds these.
namespace sqlite_internal {

// A prepared statement, reset after each use.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &statement_, nullptr) !=
        SQLITE_OK) {
      error_ = sqlite3_errmsg(db);
      statement_ = nullptr;
    }
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return statement_ != nullptr; }
  // Why it could not be prepared.
  const std::string& error() const { return error_; }
  Statement& Bind(int index, int64_t value) {
    sqlite3_bind_int64(statement_, index, value);
    return *this;
  }
  Statement& Bind(int index, double value) {
    sqlite3_bind_double(statement_, index, value);
    return *this;
  }
  Statement& Bind(int index, absl::string_view text) {
    sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                      SQLITE_STATIC);
    return *this;
  }
  Statement& BindBlob(int index, absl::string_view bytes) {
    sqlite3_bind_blob(statement_, index, bytes.data(), static_cast<int>(bytes.size()),
                      SQLITE_STATIC);
    return *this;
  }
  // Runs a statement that returns no rows; the SQLite result code.
  int Run() {
    const int code = sqlite3_step(statement_);
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
    return code == SQLITE_DONE ? SQLITE_OK : code;
  }
  sqlite3_stmt* get() { return statement_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
  std::string error_;
};

}  // namespace sqlite_internal

using sqlite_internal::Statement;

namespace {

int Exec(sqlite3* db, const char* sql) { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); }

// The single value of a one-row query (a PRAGMA); nullopt with `code` set on failure.
std::optional<std::string> QueryText(sqlite3* db, const std::string& sql, int& code) {
  sqlite3_stmt* statement = nullptr;
  code = sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr);
  if (code != SQLITE_OK) return std::nullopt;
  std::optional<std::string> value;
  code = sqlite3_step(statement);
  if (code == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(statement, 0);
    value = text != nullptr ? reinterpret_cast<const char*>(text) : "";
    code = SQLITE_OK;
  } else if (code == SQLITE_DONE) {
    value = "";
    code = SQLITE_OK;
  }
  sqlite3_finalize(statement);
  return value;
}

constexpr int64_t kMaxIdleWalBytes = 16 << 20;

}  // namespace

struct SqliteStudyStore::Statements {
  explicit Statements(sqlite3* db)
      : begin(db, "BEGIN IMMEDIATE"),
        commit(db, "COMMIT"),
        rollback(db, "ROLLBACK"),
        delete_values(db,
                      "DELETE FROM intermediate_values WHERE trial_id IN "
                      "(SELECT id FROM trials WHERE study = ?1)"),
        delete_trials(db, "DELETE FROM trials WHERE study = ?1"),
        delete_study(db, "DELETE FROM studies WHERE name = ?1"),
        put_study(db,
                  "INSERT INTO studies (name, study) VALUES (?1, ?2) "
                  "ON CONFLICT (name) DO UPDATE SET study = excluded.study"),
        put_trial(db,
                  "INSERT INTO trials (id, study, number, trial) VALUES (?1, ?2, ?3, ?4) "
                  "ON CONFLICT (id) DO UPDATE SET trial = excluded.trial"),
        put_value(db,
                  "INSERT OR REPLACE INTO intermediate_values (trial_id, attempt, step, value) "
                  "VALUES (?1, ?2, ?3, ?4)"),
        put_next_trial_id(db,
                          "INSERT INTO meta (key, value) VALUES ('next_trial_id', ?1) "
                          "ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)") {}

  bool ok() const { return first_error().empty(); }
  std::string first_error() const {
    for (const Statement* s : {&begin, &commit, &rollback, &delete_values, &delete_trials,
                               &delete_study, &put_study, &put_trial, &put_value,
                               &put_next_trial_id}) {
      if (!s->ok()) return s->error();
    }
    return "";
  }

  Statement begin, commit, rollback;
  Statement delete_values, delete_trials, delete_study;
  Statement put_study, put_trial, put_value, put_next_trial_id;
};

// ---------------------------------------------------------------------------------------------
// Batch

bool SqliteStudyStore::Batch::empty() const {
  return deleted_studies.empty() && studies.empty() && trials.empty() &&
         intermediate_values.empty() && next_trial_id == 0;
}

void SqliteStudyStore::Batch::Delete(const std::string& study) {
  deleted_studies.insert(study);
  studies.erase(study);
  std::erase_if(trials, [&](const auto& entry) { return entry.second.study == study; });
  std::erase_if(intermediate_values,
                [&](const IntermediateRow& row) { return row.study == study; });
}

void SqliteStudyStore::Batch::Merge(Batch newer) {
  for (const std::string& study : newer.deleted_studies) Delete(study);
  for (auto& [name, bytes] : newer.studies) studies[name] = std::move(bytes);
  for (auto& [id, row] : newer.trials) trials[id] = std::move(row);
  intermediate_values.insert(intermediate_values.end(),
                             std::make_move_iterator(newer.intermediate_values.begin()),
                             std::make_move_iterator(newer.intermediate_values.end()));
  next_trial_id = std::max(next_trial_id, newer.next_trial_id);
  last = std::max(last, newer.last);
}

// ---------------------------------------------------------------------------------------------
// Opening

absl::StatusOr<std::unique_ptr<SqliteStudyStore>> SqliteStudyStore::Open(
    SqliteStoreOptions options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("--db: give the database's path (or :memory:)");
  }
  if (options.max_bytes < 0) return absl::InvalidArgumentError("--max_db_bytes: must be >= 0");
  const bool in_memory = options.path == ":memory:";
  int lock_fd = -1;
  if (!in_memory) {
    // The lock is on the file itself, so no other name for it (a symlink, a hard link, a bind
    // mount) gets around it. flock, unlike SQLite's own fcntl locks, is held for the
    // process's life and released when it dies, however it dies; the two kinds do not meet.
    lock_fd = open(options.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
    if (lock_fd < 0) return CannotOpenError(options.path, errno);
    if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
      close(lock_fd);
      return absl::FailedPreconditionError(absl::StrCat(
          options.path, " is in use by another scheduler (it holds the file's lock); one "
                        "database belongs to one scheduler at a time"));
    }
    if (absl::Status file = CheckDatabaseFile(options.path, lock_fd); !file.ok()) {
      close(lock_fd);
      return file;
    }
  }
  sqlite3* db = nullptr;
  const int code = sqlite3_open_v2(options.path.c_str(), &db,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                       SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                                   nullptr);
  std::unique_ptr<SqliteStudyStore> store(new SqliteStudyStore(std::move(options), db, lock_fd));
  if (code != SQLITE_OK) return StoreError(db, code, "cannot open", store->options_.path, true);
  RETURN_IF_ERROR(store->Configure());
  store->statements_ = std::make_unique<Statements>(db);
  if (!store->statements_->ok()) {
    return absl::DataLossError(absl::StrCat(
        store->options_.path, " lacks part of the schema its version promises (",
        store->statements_->first_error(), "): restore it from a backup"));
  }
  store->writer_ = std::thread([s = store.get()] {
    pthread_setname_np(pthread_self(), "dhpt-store");  // For `top -H` and scale_bench.
    s->WriteUntilStopped();
  });
  return store;
}

SqliteStudyStore::SqliteStudyStore(SqliteStoreOptions options, sqlite3* db, int lock_fd)
    : options_(std::move(options)), db_(db), lock_fd_(lock_fd) {}

SqliteStudyStore::~SqliteStudyStore() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
  statements_.reset();
  sqlite3_close(db_);
  if (lock_fd_ >= 0) close(lock_fd_);  // Releases the lock.
}

absl::Status SqliteStudyStore::Configure() {
  const std::string& path = options_.path;
  int code = SQLITE_OK;
  // The first read of the file: a damaged or foreign file shows here.
  std::optional<std::string> mode = QueryText(db_, "PRAGMA journal_mode = WAL", code);
  if (!mode) return StoreError(db_, code, "cannot read", path, true);
  if (sqlite3_db_readonly(db_, "main") == 1) {
    return StoreError(db_, SQLITE_READONLY, "cannot write", path, true);
  }
  if (path != ":memory:" && *mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot use write-ahead logging on ", path, " (journal mode is ", *mode,
        "); put the database on a local file system"));
  }
  const std::string synchronous =
      absl::StrCat("PRAGMA synchronous = ", options_.sync_to_disk ? "FULL" : "NORMAL");
  if (!QueryText(db_, synchronous, code)) return StoreError(db_, code, "cannot configure", path, true);
  // The log is cut back to this after each checkpoint instead of keeping its largest size:
  // SD cards and small volumes. Under a cap it is a quarter of the cap, and checkpointed
  // when it reaches that, so that file and log together stay near the cap.
  int64_t wal_bytes = kMaxIdleWalBytes;
  if (options_.max_bytes > 0) wal_bytes = std::min(wal_bytes, options_.max_bytes / 4);
  if (!QueryText(db_, absl::StrCat("PRAGMA journal_size_limit = ", wal_bytes), code)) {
    return StoreError(db_, code, "cannot configure", path, true);
  }
  if (options_.max_bytes > 0) {
    std::optional<std::string> page_size_text = QueryText(db_, "PRAGMA page_size", code);
    if (!page_size_text) return StoreError(db_, code, "cannot configure", path, true);
    const int64_t page_size = std::stoll(*page_size_text);
    const int64_t wal_pages = std::max<int64_t>(8, wal_bytes / page_size);
    if (!QueryText(db_, absl::StrCat("PRAGMA wal_autocheckpoint = ", wal_pages), code)) {
      return StoreError(db_, code, "cannot configure", path, true);
    }
    const int64_t pages = std::max<int64_t>(1, options_.max_bytes / page_size);
    std::optional<std::string> used = QueryText(db_, "PRAGMA page_count", code);
    if (!used) return StoreError(db_, code, "cannot read", path, true);
    if (std::stoll(*used) > pages) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " already takes ", std::stoll(*used) * page_size,
          " bytes, more than --max_db_bytes=", options_.max_bytes,
          "; raise the cap (every write would fail under it)"));
    }
    if (!QueryText(db_, absl::StrCat("PRAGMA max_page_count = ", pages), code)) {
      return StoreError(db_, code, "cannot configure", path, true);
    }
  }
  std::optional<std::string> check = QueryText(db_, "PRAGMA quick_check", code);
  if (!check) return StoreError(db_, code, "cannot check", path, true);
  if (*check != "ok") {
    return StoreError(db_, SQLITE_CORRUPT, absl::StrCat("integrity check (", *check, ") failed on"),
                      path, true);
  }
  return Migrate();
}

absl::Status SqliteStudyStore::Migrate() {
  const std::string& path = options_.path;
  int code = SQLITE_OK;
  std::optional<std::string> version_text = QueryText(db_, "PRAGMA user_version", code);
  if (!version_text) return StoreError(db_, code, "cannot read", path, true);
  const int version = std::stoi(*version_text);
  if (version > kStoreSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " was written by a newer DHPT (schema ", version, "); this scheduler reads "
        "schemas up to ", kStoreSchemaVersion, ": run the newer scheduler, or restore a backup "
        "this version wrote"));
  }
  if (version < 0) {
    return absl::DataLossError(absl::StrCat(
        path, " has schema version ", version, ", which no DHPT writes: the file is damaged or "
        "another program's; restore it from a backup or move it aside"));
  }
  if (version == 0) {
    std::optional<std::string> tables = QueryText(db_, "SELECT count(*) FROM sqlite_schema", code);
    if (!tables) return StoreError(db_, code, "cannot read", path, true);
    if (*tables != "0") {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is another program's SQLite database (it has tables but no DHPT schema); "
                "give the scheduler a file of its own"));
    }
  }
  for (int from = version; from < kStoreSchemaVersion; ++from) {
    // Each step is one transaction: a crash mid-migration leaves the old version whole.
    const std::string step = absl::StrCat("BEGIN IMMEDIATE;", kMigrations[from],
                                          "PRAGMA user_version = ", from + 1, "; COMMIT;");
    if ((code = Exec(db_, step.c_str())) != SQLITE_OK) {
      absl::Status status =
          StoreError(db_, code, absl::StrCat("cannot migrate to schema ", from + 1), path, true);
      Exec(db_, "ROLLBACK");
      return status;
    }
    DHPT_LOG_INFO("%s: schema %d", path, from + 1);
  }
  // A write now, so that a file the scheduler cannot write fails at start, not at the first
  // study.
  if ((code = Exec(db_, "INSERT INTO meta (key, value) VALUES ('opened', unixepoch()) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value")) != SQLITE_OK) {
    return StoreError(db_, code, "cannot write", path, true);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Reading

absl::StatusOr<StoredState> SqliteStudyStore::Load() { return LoadState(true); }

absl::StatusOr<StoredState> SqliteStudyStore::LoadActive() { return LoadState(false); }

absl::StatusOr<StoredState> SqliteStudyStore::LoadState(bool ended_trials) {
  StoredState state;
  const std::string& path = options_.path;
  auto read_all = [&](const char* sql, auto&& row) -> absl::Status {
    Statement statement(db_, sql);
    if (!statement.ok()) return StoreError(db_, sqlite3_errcode(db_), "cannot read", path, true);
    int code;
    while ((code = sqlite3_step(statement.get())) == SQLITE_ROW) RETURN_IF_ERROR(row(statement.get()));
    if (code != SQLITE_DONE) return StoreError(db_, code, "cannot read", path, true);
    return absl::OkStatus();
  };
  auto parse = [&](sqlite3_stmt* row, int column, google::protobuf::Message& message,
                   absl::string_view what) -> absl::Status {
    const void* bytes = sqlite3_column_blob(row, column);
    const int size = sqlite3_column_bytes(row, column);
    if (!message.ParseFromArray(bytes, size)) {
      return absl::DataLossError(absl::StrCat(path, ": a stored ", what,
                                              " cannot be read; restore a backup"));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(read_all("SELECT study FROM studies ORDER BY rowid", [&](sqlite3_stmt* row) {
    return parse(row, 0, state.studies.emplace_back(), "study");
  }));
  if (ended_trials) {
    RETURN_IF_ERROR(read_all("SELECT trial FROM trials ORDER BY id", [&](sqlite3_stmt* row) {
      return parse(row, 0, state.trials.emplace_back(), "trial");
    }));
  } else {
    // Through the (study, number) index, one active study at a time: an ended study's rows
    // are not read at all, so a start costs what is in progress, not the history.
    Statement by_study(db_, "SELECT trial FROM trials WHERE study = ?1 ORDER BY number");
    if (!by_study.ok()) return StoreError(db_, sqlite3_errcode(db_), "cannot read", path, true);
    for (const v1::Study& study : state.studies) {
      if (study.state() == v1::Study::COMPLETED || study.state() == v1::Study::STOPPED ||
          study.state() == v1::Study::FAILED) {
        continue;
      }
      sqlite3_reset(by_study.get());
      by_study.Bind(1, study.spec().name());
      int code;
      while ((code = sqlite3_step(by_study.get())) == SQLITE_ROW) {
        RETURN_IF_ERROR(parse(by_study.get(), 0, state.trials.emplace_back(), "trial"));
      }
      if (code != SQLITE_DONE) return StoreError(db_, code, "cannot read", path, true);
    }
    std::sort(state.trials.begin(), state.trials.end(),
              [](const v1::Trial& a, const v1::Trial& b) { return a.id() < b.id(); });
  }
  RETURN_IF_ERROR(read_all("SELECT value FROM meta WHERE key = 'next_trial_id'",
                           [&](sqlite3_stmt* row) {
                             state.next_trial_id =
                                 static_cast<uint64_t>(sqlite3_column_int64(row, 0));
                             return absl::OkStatus();
                           }));
  // Above every stored id, read or not (the rowid's maximum is one lookup).
  RETURN_IF_ERROR(read_all("SELECT max(id) FROM trials", [&](sqlite3_stmt* row) {
    if (sqlite3_column_type(row, 0) != SQLITE_NULL) {
      state.next_trial_id = std::max(state.next_trial_id,
                                     static_cast<uint64_t>(sqlite3_column_int64(row, 0)) + 1);
    }
    return absl::OkStatus();
  }));
  state.next_trial_id = std::max<uint64_t>(state.next_trial_id, 1);
  return state;
}

absl::StatusOr<std::vector<StoredIntermediateValue>> SqliteStudyStore::LoadIntermediateValues(
    const std::string& study) {
  Statement statement(db_,
                      "SELECT v.trial_id, v.attempt, v.step, v.value FROM intermediate_values v "
                      "JOIN trials t ON t.id = v.trial_id WHERE t.study = ?1 "
                      "ORDER BY v.trial_id, v.attempt, v.step");
  if (!statement.ok()) {
    return StoreError(db_, sqlite3_extended_errcode(db_), "cannot read", options_.path, true);
  }
  statement.Bind(1, study);
  std::vector<StoredIntermediateValue> values;
  int code;
  while ((code = sqlite3_step(statement.get())) == SQLITE_ROW) {
    values.push_back({static_cast<uint64_t>(sqlite3_column_int64(statement.get(), 0)),
                      sqlite3_column_int(statement.get(), 1),
                      sqlite3_column_int64(statement.get(), 2),
                      sqlite3_column_double(statement.get(), 3)});
  }
  if (code != SQLITE_DONE) return StoreError(db_, code, "cannot read", options_.path, true);
  return values;
}

int64_t SqliteStudyStore::size_bytes() const {
  if (options_.path == ":memory:") return 0;
  int64_t total = 0;
  for (const std::string& file : {options_.path, options_.path + "-wal"}) {
    struct stat info;
    if (stat(file.c_str(), &info) == 0) total += info.st_size;
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// Writing

WriteSequence SqliteStudyStore::PutStudy(const v1::Study& study) {
  std::string bytes = study.SerializeAsString();
  absl::MutexLock lock(&mutex_);
  queued_.studies[study.spec().name()] = std::move(bytes);
  return queued_.last = next_sequence_++;
}

WriteSequence SqliteStudyStore::PutTrial(const v1::Trial& trial) {
  Batch::TrialRow row{trial.study(), trial.number(), trial.SerializeAsString()};
  absl::MutexLock lock(&mutex_);
  queued_.trials[trial.id()] = std::move(row);
  queued_.next_trial_id = std::max(queued_.next_trial_id, trial.id() + 1);
  return queued_.last = next_sequence_++;
}

WriteSequence SqliteStudyStore::PutIntermediateValue(const std::string& study, uint64_t trial_id,
                                                     int attempt, int64_t step, double value) {
  absl::MutexLock lock(&mutex_);
  // SQLite binds a NaN as NULL, which the column refuses: one such row would fail every batch
  // queued with it, for ever. A NaN measures nothing; it is not kept.
  if (!std::isnan(value)) {
    queued_.intermediate_values.push_back({study, trial_id, attempt, step, value});
  }
  return queued_.last = next_sequence_++;
}

WriteSequence SqliteStudyStore::PutImportedStudy(
    const v1::Study& study, const std::vector<v1::Trial>& trials,
    const std::vector<StoredIntermediateValue>& values) {
  std::string study_bytes = study.SerializeAsString();
  std::vector<Batch::TrialRow> rows;
  rows.reserve(trials.size());
  for (const v1::Trial& trial : trials) {
    rows.push_back({trial.study(), trial.number(), trial.SerializeAsString()});
  }
  // One lock hold: the writer takes the whole import into one batch, one transaction.
  absl::MutexLock lock(&mutex_);
  queued_.studies[study.spec().name()] = std::move(study_bytes);
  for (size_t i = 0; i < trials.size(); ++i) {
    queued_.trials[trials[i].id()] = std::move(rows[i]);
    queued_.next_trial_id = std::max(queued_.next_trial_id, trials[i].id() + 1);
  }
  for (const StoredIntermediateValue& value : values) {
    if (std::isnan(value.value)) continue;  // As PutIntermediateValue.
    queued_.intermediate_values.push_back(
        {study.spec().name(), value.trial_id, value.attempt, value.step, value.value});
  }
  return queued_.last = next_sequence_++;
}

namespace {

// A read-only connection of its own (WAL readers never wait for the writer), closed on every
// path; statements on it must be finalised first (declared after it).
using Reader = std::unique_ptr<sqlite3, int (*)(sqlite3*)>;
absl::StatusOr<Reader> OpenReader(const std::string& path) {
  sqlite3* reader = nullptr;
  int code = sqlite3_open_v2(path.c_str(), &reader,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                             nullptr);
  Reader owned(reader, sqlite3_close);
  if (code != SQLITE_OK) return StoreError(reader, code, "cannot read", path, true);
  sqlite3_busy_timeout(reader, 5000);
  return owned;
}

}  // namespace

absl::StatusOr<std::vector<v1::Trial>> SqliteStudyStore::ReadStudyTrials(
    const std::string& study) const {
  if (!reads_back()) return absl::UnimplementedError("an in-memory store cannot read a study back");
  ASSIGN_OR_RETURN(Reader owned, OpenReader(options_.path));
  sqlite3* reader = owned.get();
  Statement statement(reader, "SELECT trial FROM trials WHERE study = ?1 ORDER BY number");
  if (!statement.ok()) {
    return StoreError(reader, sqlite3_extended_errcode(reader), "cannot read", options_.path, true);
  }
  statement.Bind(1, study);
  std::vector<v1::Trial> trials;
  int code;
  while ((code = sqlite3_step(statement.get())) == SQLITE_ROW) {
    if (!trials.emplace_back().ParseFromArray(sqlite3_column_blob(statement.get(), 0),
                                              sqlite3_column_bytes(statement.get(), 0))) {
      return absl::DataLossError(absl::StrCat(options_.path, ": a stored trial of study \"", study,
                                              "\" cannot be read; restore a backup"));
    }
  }
  if (code != SQLITE_DONE) return StoreError(reader, code, "cannot read", options_.path, true);
  if (options_.after_read_back) options_.after_read_back(study);
  return trials;
}

absl::StatusOr<std::vector<std::string>> SqliteStudyStore::ReadTrialPage(
    const std::string& study, int64_t from_number, int limit) const {
  if (!reads_back()) return absl::UnimplementedError("an in-memory store cannot read a study back");
  ASSIGN_OR_RETURN(Reader owned, OpenReader(options_.path));
  sqlite3* reader = owned.get();
  // trials_by_study (study, number) finds the page's first row: no scan of the rows before it.
  Statement statement(reader,
                      "SELECT trial FROM trials WHERE study = ?1 AND number >= ?2 "
                      "ORDER BY number LIMIT ?3");
  if (!statement.ok()) {
    return StoreError(reader, sqlite3_extended_errcode(reader), "cannot read", options_.path, true);
  }
  statement.Bind(1, study).Bind(2, from_number).Bind(3, int64_t{limit});
  std::vector<std::string> trials;
  int code;
  while ((code = sqlite3_step(statement.get())) == SQLITE_ROW) {
    trials.emplace_back(static_cast<const char*>(sqlite3_column_blob(statement.get(), 0)),
                        static_cast<size_t>(sqlite3_column_bytes(statement.get(), 0)));
  }
  if (code != SQLITE_DONE) return StoreError(reader, code, "cannot read", options_.path, true);
  if (options_.after_read_back) options_.after_read_back(study);
  return trials;
}

absl::StatusOr<std::vector<StoredIntermediateValue>> SqliteStudyStore::ReadIntermediateValues(
    const std::vector<uint64_t>& trial_ids) const {
  // Only the writer's connection sees an in-memory database: a scheduler without a file
  // (tests, demos) exports no curves.
  if (options_.path == ":memory:") return std::vector<StoredIntermediateValue>();
  ASSIGN_OR_RETURN(Reader owned, OpenReader(options_.path));
  sqlite3* reader = owned.get();
  int code;
  Statement statement(reader,
                      "SELECT attempt, step, value FROM intermediate_values WHERE trial_id = ?1 "
                      "ORDER BY attempt, step");
  if (!statement.ok()) {
    return StoreError(reader, sqlite3_extended_errcode(reader), "cannot read", options_.path, true);
  }
  std::vector<StoredIntermediateValue> values;
  // One snapshot for every trial of the call.
  if ((code = sqlite3_exec(reader, "BEGIN", nullptr, nullptr, nullptr)) != SQLITE_OK) {
    return StoreError(reader, code, "cannot read", options_.path, true);
  }
  for (uint64_t id : trial_ids) {
    sqlite3_reset(statement.get());
    statement.Bind(1, static_cast<int64_t>(id));
    while ((code = sqlite3_step(statement.get())) == SQLITE_ROW) {
      values.push_back({id, sqlite3_column_int(statement.get(), 0),
                        sqlite3_column_int64(statement.get(), 1),
                        sqlite3_column_double(statement.get(), 2)});
    }
    if (code != SQLITE_DONE) return StoreError(reader, code, "cannot read", options_.path, true);
  }
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  return values;
}

WriteSequence SqliteStudyStore::DeleteStudy(const std::string& study) {
  absl::MutexLock lock(&mutex_);
  queued_.Delete(study);
  return queued_.last = next_sequence_++;
}

WriteSequence SqliteStudyStore::last_sequence() const {
  absl::MutexLock lock(&mutex_);
  return next_sequence_ - 1;
}

absl::Status SqliteStudyStore::Sync(WriteSequence sequence) {
  absl::MutexLock lock(&mutex_);
  auto settled = [this, sequence]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return committed_ >= sequence || (failed_through_ >= sequence && !last_error_.ok());
  };
  mutex_.Await(absl::Condition(&settled));
  if (committed_ >= sequence) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("not stored yet: ", last_error_.message(),
                                             " (kept in memory and retried)"));
}

void SqliteStudyStore::SetCommitListener(std::function<void(WriteSequence)> listener) {
  absl::MutexLock lock(&listener_mutex_);
  listener_ = std::move(listener);
}

absl::Status SqliteStudyStore::health() const {
  absl::MutexLock lock(&mutex_);
  return last_error_;
}

void SqliteStudyStore::WriteUntilStopped() {
  absl::Duration delay = options_.retry_delay;
  Batch batch;  // What the last failed commit held, retried with the writes queued since.
  while (true) {
    bool stopping;
    {
      absl::MutexLock lock(&mutex_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return stopping_ || !queued_.empty();
      };
      if (batch.empty()) mutex_.Await(absl::Condition(&ready));
      stopping = stopping_;
      batch.Merge(std::exchange(queued_, Batch()));
    }
    if (batch.empty()) return;  // Stopping with nothing left.
    const absl::Status status = Commit(batch);
    if (status.ok()) {
      const WriteSequence last = batch.last;
      batch = Batch();
      delay = options_.retry_delay;
      {
        // Healthy before the listener runs: it resumes what paused while writes failed
        // (dispatch, leases), and that work asks health() first.
        absl::MutexLock lock(&mutex_);
        if (!last_error_.ok()) DHPT_LOG_INFO("the database accepts writes again");
        last_error_ = absl::OkStatus();
      }
      {
        absl::MutexLock lock(&listener_mutex_);
        if (listener_) listener_(last);
      }
      // Published after the listener returns, so whoever Syncs also knows it has been told.
      absl::MutexLock lock(&mutex_);
      committed_ = last;
      continue;
    }
    absl::MutexLock lock(&mutex_);
    if (last_error_.ok()) DHPT_LOG_ERROR("the database refuses writes: %s", status.ToString());
    failed_through_ = batch.last;
    last_error_ = status;
    if (stopping) {
      DHPT_LOG_ERROR("%d studies and %d trials could not be stored before exit: %s",
                     batch.studies.size(), batch.trials.size(), status.ToString());
      return;
    }
    mutex_.AwaitWithTimeout(absl::Condition(&stopping_), delay);
    delay = std::min(delay * 2, options_.max_retry_delay);
  }
}

absl::Status SqliteStudyStore::Commit(Batch& batch) {
  if (!batch.deleted_studies.empty()) {
    // Deletions commit on their own first: on a full disk they are what makes room for the
    // rest. Once done they are not repeated.
    RETURN_IF_ERROR(InTransaction([&]() -> int {
      for (const std::string& study : batch.deleted_studies) {
        for (Statement* statement : {&statements_->delete_values, &statements_->delete_trials,
                                     &statements_->delete_study}) {
          if (int code = statement->Bind(1, study).Run(); code != SQLITE_OK) return code;
        }
      }
      return SQLITE_OK;
    }));
    batch.deleted_studies.clear();
  }
  return InTransaction([&] { return WriteRows(batch); });
}

absl::Status SqliteStudyStore::InTransaction(absl::FunctionRef<int()> body) {
  Statements& s = *statements_;
  int code = s.begin.Run();
  if (code == SQLITE_OK) code = body();
  if (code == SQLITE_OK) code = s.commit.Run();
  if (code == SQLITE_OK) return absl::OkStatus();
  absl::Status status = StoreError(db_, code, "cannot write", options_.path, false);
  s.rollback.Run();
  return status;
}

int SqliteStudyStore::WriteRows(const Batch& batch) {
  Statements& s = *statements_;
  int code = SQLITE_OK;
  for (const auto& [name, bytes] : batch.studies) {
    if ((code = s.put_study.Bind(1, name).BindBlob(2, bytes).Run()) != SQLITE_OK) return code;
  }
  for (const auto& [id, row] : batch.trials) {
    code = s.put_trial.Bind(1, static_cast<int64_t>(id))
               .Bind(2, row.study)
               .Bind(3, row.number)
               .BindBlob(4, row.bytes)
               .Run();
    if (code != SQLITE_OK) return code;
  }
  for (const Batch::IntermediateRow& row : batch.intermediate_values) {
    code = s.put_value.Bind(1, static_cast<int64_t>(row.trial_id))
               .Bind(2, static_cast<int64_t>(row.attempt))
               .Bind(3, row.step)
               .Bind(4, row.value)
               .Run();
    if (code != SQLITE_OK) return code;
  }
  if (batch.next_trial_id != 0) {
    code = s.put_next_trial_id.Bind(1, static_cast<int64_t>(batch.next_trial_id)).Run();
    if (code != SQLITE_OK) return code;
  }
  return SQLITE_OK;
}

}  // namespace dhpt::scheduler
