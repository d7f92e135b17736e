// control_plane_load: N simulated workers' control-plane traffic against a
// real shardline-coordinator, without training (issue 18). Each simulated
// worker registers with the job token, opens its heartbeat stream, reports
// at --hz with plausible steps, and follows the coordinator's commands:
// a new generation makes it register again, as a real worker does.
//
//   SHARDLINE_TOKEN=... control_plane_load --coordinator 127.0.0.1:7000 --coordinator_pid P \
//       --workers 4096 --hz 10 --heartbeat_timeout_ms 1000 --silences 20 --commands 10
//
// Phases, each measured and printed as one JSON object on stdout:
//   formation   every worker registers at once: time until the last is answered
//   steady      heartbeats for --steady_seconds: the coordinator's CPU (share
//               of one core), threads and RSS, read from /proc/<pid>
//   silence     (x --silences) one worker stops reporting but keeps its
//               stream: time from its last report's write (gRPC's write
//               done) until the world breaks (the first worker told of a new
//               generation), minus the heartbeat deadline; then the world
//               re-forms
//   (steady also gives report_write_ms: from the driver's Write to gRPC's
//   write done, this process's own queueing)
//   checkpoint  (x --checkpoints) SIGUSR2 to the coordinator ("checkpoint
//               now"): each worker, at the step it is told, writes a shard
//               file of --shard_bytes into the job's checkpoint directory and
//               reports it saved, as a real one does; the time until every
//               worker has the step, and until the COMMITTED file appears
//               (in all, and after the last worker's report was written)
//   death       one worker's stream is cancelled: time until the break
//   commands    (x --commands) SIGUSR1 to the coordinator ("eval now"): time
//               until every worker has its eval step
//   stop        SIGTERM: time until every worker has its stop step; then
//               every worker reports finished and the job ends
// Exit codes: 0 done, 2 bad flags, 3 a phase did not complete in time.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/platform/args.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/encoding/crc32c.h"
#include "common/platform/env.h"
#include "common/net/grpc_util.h"
#include "common/platform/mutex.h"
#include "common/platform/process_init.h"
#include "common/net/rpc_auth.h"
#include "grpcpp/grpcpp.h"
#include "proto/coordinator.grpc.pb.h"
#include "worker/control/coordinator_client.h"

namespace shardline {
namespace {

using coordinator::CoordinatorCommand;
using coordinator::WorkerReport;

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

// The coordinator process as /proc shows it.
struct ProcSample {
  double cpu_seconds = 0;  // user + system
  int threads = 0;
  int64_t rss_bytes = 0;
};

ProcSample Sample(int pid) {
  ProcSample s;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  // Fields after the command name (which may hold spaces) start past ')'.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::vector<std::string> f;
  for (std::string x; rest >> x;) f.push_back(x);
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (f.size() > 13) s.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;  // utime, stime
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) s.threads = std::stoi(line.substr(8));
    if (line.rfind("VmRSS:", 0) == 0) s.rss_bytes = std::stoll(line.substr(6)) * 1024;
  }
  return s;
}

class Load;
class SimWorker;

// Every RPC of this process runs on gRPC's asynchronous API on one
// completion queue, polled by one thread that also sends the reports due
// (the "io" thread): no callback threads, no hand-off per report. Each
// operation's tag is one of these, run and freed when it completes.
using Event = std::function<void(bool ok)>;
void* NewEvent(Event e) { return new Event(std::move(e)); }

// One heartbeat stream of a simulated worker; frees itself once its
// operations are over. Every operation starts on the io thread (Cancel may
// come from any).
class StreamCall {
 public:
  StreamCall(SimWorker* worker, coordinator::Coordinator::Stub* stub, const std::string& token,
             grpc::CompletionQueue* cq);
  void Write(const WorkerReport& r);
  void Cancel() { ctx_.TryCancel(); }

 private:
  void Read();
  void Release();

  SimWorker* const worker_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<WorkerReport, CoordinatorCommand>> rw_;
  CoordinatorCommand command_;
  WorkerReport out_;
  grpc::Status status_;
  int pending_ = 0;  // operations in flight (io thread only)
};

// One simulated worker: its registration and its current heartbeat stream.
class SimWorker {
 public:
  SimWorker(Load* load, int slot, coordinator::Coordinator::Stub* stub, grpc::CompletionQueue* cq)
      : load_(load), slot_(slot), stub_(stub), cq_(cq) {}

  void Register(uint64_t previous_generation);
  // The registration's answer (io thread).
  void Answered();
  // From the driver thread: sends a report if one is due and none is in flight.
  void Tick(int64_t now_us);
  // From the stream: a command arrived.
  void Command(StreamCall* call, const CoordinatorCommand& c);
  void WriteDone(StreamCall* call);
  // The stream's call started: reports may be written to it.
  void Started(StreamCall* call) {
    MutexLock lock(&mu_);
    if (call == call_) writing_ = false;
  }
  void StreamDone(StreamCall* call) {
    MutexLock lock(&mu_);
    if (call == call_) call_ = nullptr;
  }

  // Stops reporting; the stream stays open (a hung worker).
  void GoSilent() {
    MutexLock lock(&mu_);
    silent_ = true;
  }
  int64_t last_report_us() {
    MutexLock lock(&mu_);
    return last_report_us_;
  }
  // When gRPC finished writing its last report to the socket.
  int64_t last_written_us() {
    MutexLock lock(&mu_);
    return last_written_us_;
  }
  int slot() const { return slot_; }
  // Kills the stream (a dead worker's connection).
  void Die() {
    MutexLock lock(&mu_);
    if (call_ != nullptr) call_->Cancel();
  }
  void set_finished(int64_t step) {
    MutexLock lock(&mu_);
    finish_at_ = step;
  }

 private:
  void OpenStream(const coordinator::RegisterResponse& r);

  Load* const load_;
  const int slot_;
  coordinator::Coordinator::Stub* const stub_;
  grpc::CompletionQueue* const cq_;
  const uint64_t incarnation_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  // One registration at a time.
  Mutex register_mu_;  // before mu_
  bool registering_ ABSL_GUARDED_BY(register_mu_) = false;
  std::unique_ptr<grpc::ClientContext> register_ctx_ ABSL_GUARDED_BY(register_mu_);
  coordinator::RegisterRequest request_ ABSL_GUARDED_BY(register_mu_);
  coordinator::RegisterResponse response_ ABSL_GUARDED_BY(register_mu_);
  grpc::Status register_status_ ABSL_GUARDED_BY(register_mu_);
  std::unique_ptr<grpc::ClientAsyncResponseReader<coordinator::RegisterResponse>> register_call_
      ABSL_GUARDED_BY(register_mu_);

  Mutex mu_;
  StreamCall* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string secret_ ABSL_GUARDED_BY(mu_);
  int64_t started_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_due_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_report_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_written_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finish_at_ ABSL_GUARDED_BY(mu_) = 0;  // > 0: report finished at this step
  int world_ ABSL_GUARDED_BY(mu_) = 0;
  std::string checkpoint_root_ ABSL_GUARDED_BY(mu_);
  int64_t save_at_ ABSL_GUARDED_BY(mu_) = 0;  // > 0: a checkpoint step told and not yet saved
  int64_t saved_step_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_save_ ABSL_GUARDED_BY(mu_) = false;  // the report in flight carries a saved shard
  bool saving_ ABSL_GUARDED_BY(mu_) = false;  // the writer thread has its shard
  std::optional<coordinator::SavedShard> saved_ready_ ABSL_GUARDED_BY(mu_);  // written, not yet reported
};

// Waits until pred() holds (checked every 5 ms) or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// Everything the simulated workers share, and what the phases wait on.
class Load {
 public:
  // `client` (null: no token) makes the proof header each call carries.
  Load(CoordinatorClient* client, int hz, int64_t shard_bytes)
      : client_(client), period_us_(1000000 / std::max(1, hz)), shard_bytes_(shard_bytes) {}
  int64_t shard_bytes() const { return shard_bytes_; }
  // The proof header for one call of `method` (each is good once); "" for
  // none.
  std::string Proof(absl::string_view method) const {
    if (client_ == nullptr) return "";
    return client_->Proof(method, absl::Now() + absl::Seconds(30)).value_or("");
  }
  // Runs `write` on the writer thread, after those before it.
  void Write(std::function<void()> write) {
    MutexLock lock(&writes_mu_);
    if (!writer_.joinable()) writer_ = std::thread([this] { WriteLoop(); });
    writes_.push_back(std::move(write));
  }
  int64_t period_us() const { return period_us_; }

  void Registered() {
    MutexLock lock(&mu_);
    ++registered_;
  }
  void Refused(const grpc::Status& s) {
    MutexLock lock(&mu_);
    ++refused_;
    last_refusal_ = s.error_message();
  }
  void NewGeneration() {
    MutexLock lock(&mu_);
    if (first_break_us_ == 0) first_break_us_ = NowMicros();
  }
  void Eval(int64_t step) {
    MutexLock lock(&mu_);
    CountTold(step, &last_eval_, &evals_seen_, &eval_done_us_);
  }
  // A worker's report of its saved shard was written.
  void SaveWritten() {
    MutexLock lock(&mu_);
    last_save_written_us_ = NowMicros();
  }
  void SetCheckpointRoot(const std::string& root) {
    MutexLock lock(&mu_);
    checkpoint_root_ = root;
  }
  void CheckpointTold(int64_t step) {
    MutexLock lock(&mu_);
    CountTold(step, &checkpoint_step_, &checkpoints_told_, &checkpoint_told_us_);
  }
  void Stop(int64_t step) {
    MutexLock lock(&mu_);
    stop_at_ = step;
    if (++stops_seen_ == workers_) stop_done_us_ = NowMicros();
  }
  void JobDone() {
    MutexLock lock(&mu_);
    ++done_;
  }
  // How long reports took from the driver's Write to gRPC's write done (on
  // the socket), while recording.
  void Written(int64_t micros) {
    MutexLock lock(&mu_);
    if (recording_writes_) write_micros_.push_back(static_cast<double>(micros));
  }
  void RecordWrites(bool on) {
    MutexLock lock(&mu_);
    recording_writes_ = on;
  }

  // The phases' marks: when the first worker heard of a new generation, the
  // last heard the eval step, the last heard the stop step (unix micros;
  // 0: not yet).
  void ClearMark(int64_t Load::*mark) {
    MutexLock lock(&mu_);
    this->*mark = 0;
  }
  // Before a worker is made to fail: no break seen, nobody registered anew.
  void ExpectBreak() {
    MutexLock lock(&mu_);
    first_break_us_ = 0;
    registered_ = 0;
  }
  // The mark once set, or 0 if `timeout` passes first.
  int64_t AwaitMark(int64_t Load::*mark, absl::Duration timeout) {
    int64_t at = 0;
    WaitFor(
        [&] {
          MutexLock lock(&mu_);
          at = this->*mark;
          return at > 0;
        },
        timeout);
    return at;
  }

  Mutex mu_;
  int workers_ ABSL_GUARDED_BY(mu_) = 0;
  int registered_ ABSL_GUARDED_BY(mu_) = 0;
  int refused_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_refusal_ ABSL_GUARDED_BY(mu_);
  int64_t first_break_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_eval_ ABSL_GUARDED_BY(mu_) = 0;
  int evals_seen_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t eval_done_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stop_at_ ABSL_GUARDED_BY(mu_) = 0;
  int stops_seen_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stop_done_us_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t checkpoint_step_ ABSL_GUARDED_BY(mu_) = 0;
  int checkpoints_told_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t checkpoint_told_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_save_written_us_ ABSL_GUARDED_BY(mu_) = 0;
  std::string checkpoint_root_ ABSL_GUARDED_BY(mu_);
  bool recording_writes_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<double> write_micros_ ABSL_GUARDED_BY(mu_);

 private:
  // One more worker told of `step`: counted in *told (a later step than
  // *latest starts the count over); the last of all sets *all_us.
  void CountTold(int64_t step, int64_t* latest, int* told, int64_t* all_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (step > *latest) {
      *latest = step;
      *told = 0;
    }
    if (step == *latest && ++*told == workers_) *all_us = NowMicros();
  }

  void WriteLoop() {
    for (;;) {
      std::function<void()> next;
      {
        MutexLock lock(&writes_mu_);
        auto pending = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_mu_) { return !writes_.empty(); };
        writes_mu_.Await(absl::Condition(&pending));
        next = std::move(writes_.front());
        writes_.pop_front();
      }
      next();
    }
  }

  CoordinatorClient* const client_;
  const int64_t period_us_;
  const int64_t shard_bytes_;
  Mutex writes_mu_;
  std::deque<std::function<void()>> writes_ ABSL_GUARDED_BY(writes_mu_);
  std::thread writer_ ABSL_GUARDED_BY(writes_mu_);  // runs until the process exits (_exit)
};

void SimWorker::Register(uint64_t previous_generation) {
  // From the main thread (a phase) or the io thread (a new generation), at
  // most one at a time: one in flight stands for both.
  MutexLock lock(&register_mu_);
  if (registering_) return;
  registering_ = true;
  register_ctx_ = std::make_unique<grpc::ClientContext>();
  if (const std::string proof = load_->Proof(coordinator::RegisterRequest::descriptor()->full_name());
      !proof.empty()) {
    register_ctx_->AddMetadata(kProofMetadataKey, proof);
  }
  register_ctx_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  request_.Clear();
  request_.set_transport_address(absl::StrCat("10.9.", slot_ / 256, ".", slot_ % 256, ":7001"));
  request_.set_requested_rank(slot_);
  request_.set_incarnation(incarnation_);
  request_.set_previous_generation(previous_generation);
  if (previous_generation > 0) request_.set_reason("the world broke");
  register_call_ = stub_->PrepareAsyncRegister(register_ctx_.get(), request_, cq_);
  register_call_->StartCall();
  register_call_->Finish(&response_, &register_status_, NewEvent([this](bool) { Answered(); }));
}

void SimWorker::Answered() {
  MutexLock lock(&register_mu_);
  registering_ = false;
  if (!register_status_.ok()) {
    load_->Refused(register_status_);
  } else if (response_.job_over()) {  // as a real worker: the job ended meanwhile
    load_->JobDone();
  } else {
    OpenStream(response_);
    load_->Registered();
  }
}

void SimWorker::OpenStream(const coordinator::RegisterResponse& r) {
  MutexLock lock(&mu_);
  rank_ = r.rank();
  world_ = r.world_size();
  checkpoint_root_ = r.checkpoint_root();
  load_->SetCheckpointRoot(r.checkpoint_root());
  save_at_ = 0;
  generation_ = r.generation();
  secret_ = r.member_secret();
  started_us_ = NowMicros();
  next_due_us_ = started_us_;  // the first report at once: it attaches the stream
  silent_ = false;
  writing_ = true;  // until the call has started
  call_ = new StreamCall(this, stub_, load_->Proof(coordinator::WorkerReport::descriptor()->full_name()), cq_);
}

void SimWorker::WriteDone(StreamCall* call) {
  int64_t sent_us;
  bool with_save;
  {
    MutexLock lock(&mu_);
    if (call != call_) return;
    writing_ = false;
    sent_us = last_report_us_;
    last_written_us_ = NowMicros();
    with_save = writing_save_;
    writing_save_ = false;
  }
  load_->Written(NowMicros() - sent_us);
  if (with_save) load_->SaveWritten();
}

void SimWorker::Tick(int64_t now_us) {
  MutexLock lock(&mu_);
  if (call_ == nullptr || writing_ || silent_ || now_us < next_due_us_) return;
  next_due_us_ = now_us + load_->period_us();
  WorkerReport out;
  out.set_rank(rank_);
  out.set_generation(generation_);
  out.set_member_secret(secret_);
  // Ten steps a second since the stream opened: plausible, and increasing.
  int64_t steps = (now_us - started_us_) / 100000;
  if (finish_at_ > 0) {
    steps = finish_at_;
    out.set_finished(true);
  }
  if (save_at_ > 0 && steps >= save_at_ && !saving_) {
    // Saves its shard at the step told, as a real worker does, on the
    // writer thread (file writes would hold up the io thread), and reports
    // it once the file is durable.
    saving_ = true;
    load_->Write([this, step = save_at_, rank = rank_, world = world_, root = checkpoint_root_] {
      coordinator::SavedShard saved;
      saved.set_step(step);
      saved.set_world_size(world);
      saved.set_file(ShardFileName(rank, world));
      const std::string bytes(static_cast<size_t>(load_->shard_bytes()), static_cast<char>('a' + rank % 26));
      const std::string dir = StepDir(root, step);
      Env* env = Env::Default();
      if (!env->CreateDirs(dir).ok() || !WriteFileAtomically(env, dir + "/" + saved.file(), bytes).ok()) {
        fprintf(stderr, "control_plane_load: cannot write a shard into %s\n", dir.c_str());
      }
      saved.set_size(static_cast<int64_t>(bytes.size()));
      saved.set_crc32c(crc32c::Value(bytes.data(), bytes.size()));
      MutexLock lock(&mu_);
      saving_ = false;
      saved_ready_ = std::move(saved);
    });
  }
  if (saved_ready_.has_value()) {
    saved_step_ = saved_ready_->step();
    if (save_at_ == saved_step_) save_at_ = 0;
    *out.add_saved() = std::move(*saved_ready_);
    saved_ready_.reset();
    writing_save_ = true;
    steps = std::max(steps, saved_step_);
  }
  out.set_steps_done(steps);
  out.set_total_steps(1000000);
  out.set_sent_unix_micros(now_us);
  last_report_us_ = now_us;
  writing_ = true;
  call_->Write(out);
}

void SimWorker::Command(StreamCall* call, const CoordinatorCommand& c) {
  if (c.job_done()) {
    load_->JobDone();
    return;
  }
  if (c.new_generation() > 0) {
    load_->NewGeneration();
    uint64_t previous;
    {
      MutexLock lock(&mu_);
      if (call != call_) return;
      previous = generation_;
      call_->Cancel();  // as a worker leaving a broken world
      call_ = nullptr;
    }
    Register(previous);
    return;
  }
  if (c.checkpoint_at() > 0) {
    bool fresh = false;
    {
      MutexLock lock(&mu_);
      if (c.checkpoint_at() > saved_step_ && c.checkpoint_at() != save_at_) {
        save_at_ = c.checkpoint_at();
        fresh = true;
      }
    }
    if (fresh) load_->CheckpointTold(c.checkpoint_at());
  }
  if (c.eval_at() > 0) load_->Eval(c.eval_at());
  if (c.stop_at() > 0) load_->Stop(c.stop_at());
}

StreamCall::StreamCall(SimWorker* worker, coordinator::Coordinator::Stub* stub, const std::string& token,
                       grpc::CompletionQueue* cq)
    : worker_(worker) {
  if (!token.empty()) ctx_.AddMetadata(kProofMetadataKey, token);
  rw_ = stub->PrepareAsyncHeartbeat(&ctx_, cq);
  ++pending_;
  // StartCall's operation shares the write's slot: the first report waits
  // for it (Started).
  rw_->StartCall(NewEvent([this](bool) {
    worker_->Started(this);
    Release();
  }));
  Read();
}

void StreamCall::Read() {
  ++pending_;
  rw_->Read(&command_, NewEvent([this](bool ok) {
              if (ok) {
                // A command that made the worker leave cancelled this call:
                // the next read fails, and that ends it.
                worker_->Command(this, command_);
                Read();
              } else {
                worker_->StreamDone(this);  // no report is written to it after
                ++pending_;
                rw_->Finish(&status_, NewEvent([this](bool) { Release(); }));
              }
              Release();
            }));
}

void StreamCall::Write(const WorkerReport& r) {
  out_ = r;
  ++pending_;
  rw_->Write(out_, NewEvent([this](bool) {
               worker_->WriteDone(this);
               Release();
             }));
}

void StreamCall::Release() {
  if (--pending_ == 0) delete this;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// The run's phases, in order, against one coordinator: formation, steady
// heartbeats, silent workers, a dead worker, checkpoints, commands and the
// stop. Each prints its JSON line; a phase that fails ends the process
// (Finish) with 3 after naming what did not happen.
class Phases {
 public:
  struct Options {
    int n = 0;
    int pid = 0;
    int hz = 10;
    absl::Duration deadline;
    int silences = 0;
    int commands = 0;
    absl::Duration steady;
    int checkpoints = 0;
    int64_t shard_bytes = 0;
  };
  Phases(Load* load, std::vector<std::unique_ptr<SimWorker>>* workers, std::atomic<bool>* run, Options o)
      : load_(*load), workers_(*workers), run_(*run), o_(o), rng_(1) {}

  int All() {
    if (const int code = Formation(); code != 0) return code;
    Steady();
    if (const int code = Silences(); code != 0) return code;
    if (const int code = Death(); code != 0) return code;
    if (const int code = Checkpoints(); code != 0) return code;
    return Finish(CommandsAndStop());
  }

 private:
  int Registered() {
    MutexLock lock(&load_.mu_);
    return load_.registered_;
  }
  int Fail(const std::string& what) {
    MutexLock lock(&load_.mu_);
    fprintf(stderr, "control_plane_load: %s (registered %d of %d, refused %d, told the job is done %d%s%s)\n",
            what.c_str(), load_.registered_, o_.n, load_.refused_, load_.done_, load_.refused_ > 0 ? ": " : "",
            load_.last_refusal_.c_str());
    return 3;
  }
  int Finish(int code) {
    run_ = false;
    for (auto& w : workers_) w->Die();
    absl::SleepFor(absl::Milliseconds(200));
    _exit(code);  // streams may still be closing; the process is done
    return code;
  }
  bool Reformed() {
    return WaitFor([&] { return Registered() == o_.n; }, absl::Seconds(120));
  }

  int Formation() {
    const ProcSample idle = Sample(o_.pid);
    const absl::Time t0 = absl::Now();
    for (auto& w : workers_) w->Register(0);
    if (!Reformed()) return Finish(Fail("the world did not form"));
    const double formation = absl::ToDoubleSeconds(absl::Now() - t0);
    printf("{\"phase\":\"formation\",\"workers\":%d,\"seconds\":%.4f,\"threads_idle\":%d}\n", o_.n, formation,
           idle.threads);
    fflush(stdout);
    return 0;
  }

  void Steady() {
    absl::SleepFor(absl::Seconds(1));
    const ProcSample a = Sample(o_.pid);
    const absl::Time ta = absl::Now();
    load_.RecordWrites(true);
    int max_threads = a.threads;
    int64_t max_rss = a.rss_bytes;
    while (absl::Now() - ta < o_.steady) {
      absl::SleepFor(absl::Milliseconds(250));
      const ProcSample s = Sample(o_.pid);
      max_threads = std::max(max_threads, s.threads);
      max_rss = std::max(max_rss, s.rss_bytes);
    }
    const ProcSample b = Sample(o_.pid);
    const double cpu = (b.cpu_seconds - a.cpu_seconds) / absl::ToDoubleSeconds(absl::Now() - ta);
    load_.RecordWrites(false);
    std::vector<double> writes;
    {
      MutexLock lock(&load_.mu_);
      writes.swap(load_.write_micros_);
    }
    printf("{\"phase\":\"steady\",\"workers\":%d,\"hz\":%d,\"coordinator_cpu_cores\":%.4f,\"threads\":%d,"
           "\"rss_bytes\":%ld,\"reports_per_second\":%.0f,\"report_write_ms_p50\":%.1f,\"report_write_ms_p99\":%.1f}\n",
           o_.n, o_.hz, cpu, max_threads, static_cast<long>(max_rss),
           static_cast<double>(writes.size()) / absl::ToDoubleSeconds(o_.steady), Percentile(writes, 0.5) / 1e3,
           Percentile(writes, 0.99) / 1e3);
    fflush(stdout);
  }

  // Silent workers: detection latency past the deadline.
  int Silences() {
    std::vector<double> over_ms;
    for (int i = 0; i < o_.silences; ++i) {
      SimWorker* w = workers_[rng_() % static_cast<unsigned>(o_.n)].get();
      load_.ExpectBreak();
      w->GoSilent();
      const int64_t broke = load_.AwaitMark(&Load::first_break_us_, o_.deadline + absl::Seconds(30));
      if (broke == 0) return Finish(Fail("a silent worker was never declared lost"));
      // From when its last report left for the coordinator: with thousands
      // of simulated workers on shared cores, this process's own queue can
      // hold a report back (the steady phase's report_write_ms).
      const int64_t last = w->last_written_us();
      over_ms.push_back(static_cast<double>(broke - last) / 1e3 - absl::ToDoubleMilliseconds(o_.deadline));
      // For lining up with the coordinator's log ("was lost" and its time).
      fprintf(stderr, "silence %d: worker %d's last report queued at %.6f, written at %.6f, first worker told at %.6f\n",
              i, w->slot(), static_cast<double>(w->last_report_us()) / 1e6, static_cast<double>(last) / 1e6,
              static_cast<double>(broke) / 1e6);
      // The silent one comes back with everyone else: it registers again too.
      w->Register(0);
      if (!Reformed()) return Finish(Fail("the world did not re-form"));
      absl::SleepFor(absl::Milliseconds(500));
    }
    if (o_.silences > 0) {
      printf("{\"phase\":\"silence\",\"workers\":%d,\"deadline_ms\":%.0f,\"trials\":%d,\"over_deadline_ms_p50\":%.1f,"
             "\"over_deadline_ms_p99\":%.1f,\"over_deadline_ms_max\":%.1f}\n",
             o_.n, absl::ToDoubleMilliseconds(o_.deadline), o_.silences, Percentile(over_ms, 0.5),
             Percentile(over_ms, 0.99), Percentile(over_ms, 1.0));
      fflush(stdout);
    }
    return 0;
  }

  // A worker that dies: its stream breaks.
  int Death() {
    SimWorker* w = workers_[rng_() % static_cast<unsigned>(o_.n)].get();
    // Its stream must have said who it is (a report read) before it dies:
    // a stream that breaks before its first report names no member, and
    // the coordinator then finds the member by its silence, not the break.
    const int64_t since = NowMicros();
    if (!WaitFor([&] { return w->last_written_us() > since; }, absl::Seconds(30))) {
      return Finish(Fail("the worker to kill never reported"));
    }
    absl::SleepFor(absl::Milliseconds(100));
    load_.ExpectBreak();
    const int64_t died = NowMicros();
    w->Die();
    const int64_t broke = load_.AwaitMark(&Load::first_break_us_, absl::Seconds(30));
    if (broke == 0) return Finish(Fail("a dead worker was never declared lost"));
    w->Register(0);
    if (!Reformed()) return Finish(Fail("the world did not re-form"));
    printf("{\"phase\":\"death\",\"workers\":%d,\"detected_ms\":%.1f}\n", o_.n,
           static_cast<double>(broke - died) / 1e3);
    fflush(stdout);
    absl::SleepFor(absl::Milliseconds(500));
    return 0;
  }

  // Checkpoints: SIGUSR2, every worker saves its shard, the coordinator
  // checks N files and commits.
  int Checkpoints() {
    std::vector<double> told_ms, committed_ms, commit_ms;
    for (int i = 0; i < o_.checkpoints; ++i) {
      load_.ClearMark(&Load::checkpoint_told_us_);
      load_.ClearMark(&Load::last_save_written_us_);
      const int64_t sent = NowMicros();
      kill(o_.pid, SIGUSR2);
      const int64_t told = load_.AwaitMark(&Load::checkpoint_told_us_, absl::Seconds(30));
      if (told == 0) return Finish(Fail("a checkpoint request did not reach every worker"));
      int64_t step;
      std::string root;
      {
        MutexLock lock(&load_.mu_);
        step = load_.checkpoint_step_;
        root = load_.checkpoint_root_;
      }
      if (root.empty()) return Finish(Fail("the coordinator handed out no checkpoint directory"));
      const std::string committed_file = StepDir(root, step) + "/" + kCommittedFile;
      int64_t committed = 0;
      WaitFor(
          [&] {
            if (access(committed_file.c_str(), F_OK) != 0) return false;
            committed = NowMicros();
            return true;
          },
          absl::Seconds(60));
      if (committed == 0) return Finish(Fail("checkpoint at step " + std::to_string(step) + " was not committed"));
      const int64_t last_written = load_.AwaitMark(&Load::last_save_written_us_, absl::Seconds(1));
      told_ms.push_back(static_cast<double>(told - sent) / 1e3);
      committed_ms.push_back(static_cast<double>(committed - sent) / 1e3);
      if (last_written > 0) commit_ms.push_back(static_cast<double>(committed - last_written) / 1e3);
      absl::SleepFor(absl::Milliseconds(300));
    }
    if (o_.checkpoints > 0) {
      printf("{\"phase\":\"checkpoint\",\"workers\":%d,\"shard_bytes\":%ld,\"trials\":%d,\"told_all_ms_p50\":%.1f,"
             "\"committed_ms_p50\":%.1f,\"committed_ms_max\":%.1f,\"after_last_report_ms_p50\":%.1f}\n",
             o_.n, static_cast<long>(o_.shard_bytes), o_.checkpoints, Percentile(told_ms, 0.5),
             Percentile(committed_ms, 0.5), Percentile(committed_ms, 1.0), Percentile(commit_ms, 0.5));
      fflush(stdout);
    }
    return 0;
  }

  // Commands: "eval now" to every worker; then the stop: SIGTERM, and
  // every worker reports finished at the stop step. Returns the exit code.
  int CommandsAndStop() {
    std::vector<double> command_ms;
    for (int i = 0; i < o_.commands; ++i) {
      load_.ClearMark(&Load::eval_done_us_);
      const int64_t sent = NowMicros();
      kill(o_.pid, SIGUSR1);
      const int64_t reached = load_.AwaitMark(&Load::eval_done_us_, absl::Seconds(30));
      if (reached == 0) return Fail("an eval command did not reach every worker");
      command_ms.push_back(static_cast<double>(reached - sent) / 1e3);
      absl::SleepFor(absl::Milliseconds(300));  // the workers' steps move on: the next eval step is new
    }
    const int64_t sent = NowMicros();
    kill(o_.pid, SIGTERM);
    const int64_t stop_done = load_.AwaitMark(&Load::stop_done_us_, absl::Seconds(30));
    if (stop_done == 0) return Fail("the stop command did not reach every worker");
    int64_t stop_at;
    {
      MutexLock lock(&load_.mu_);
      stop_at = load_.stop_at_;
    }
    printf("{\"phase\":\"commands\",\"workers\":%d,\"eval_to_all_ms_p50\":%.1f,\"eval_to_all_ms_max\":%.1f,"
           "\"stop_to_all_ms\":%.1f}\n",
           o_.n, Percentile(command_ms, 0.5), Percentile(command_ms, 1.0),
           static_cast<double>(stop_done - sent) / 1e3);
    fflush(stdout);
    for (auto& w : workers_) w->set_finished(stop_at);
    if (!WaitFor([&] {
          MutexLock lock(&load_.mu_);
          return load_.done_ == o_.n;
        },
                 absl::Seconds(60))) {
      return Fail("the job did not end");
    }
    return 0;
  }

  Load& load_;
  std::vector<std::unique_ptr<SimWorker>>& workers_;
  std::atomic<bool>& run_;
  const Options o_;
  std::mt19937 rng_;
};

// `connections` stubs to the coordinator at `address`, each on a
// connection of its own.
std::vector<std::unique_ptr<coordinator::Coordinator::Stub>> OpenStubs(const std::string& address, int connections) {
  std::vector<std::unique_ptr<coordinator::Coordinator::Stub>> stubs;
  for (int c = 0; c < connections; ++c) {
    grpc::ChannelArguments ca = DefaultChannelArguments();
    ca.SetInt("shardline.load_channel", c);  // a connection of its own
    ca.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs.push_back(coordinator::Coordinator::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), ca)));
  }
  return stubs;
}

// The io thread: every 5 ms the reports due (while `run`), between them the
// queue's events. It runs until the process exits.
void StartIoThread(std::vector<std::unique_ptr<SimWorker>>* workers, grpc::CompletionQueue* cq,
                   std::atomic<bool>* run) {
  std::thread io([workers, cq, run] {
    int64_t next_tick = 0;
    for (;;) {
      const int64_t now = NowMicros();
      if (now >= next_tick) {
        if (run->load()) {
          for (auto& w : *workers) w->Tick(now);
        }
        next_tick = now + 5000;
      }
      void* tag;
      bool ok;
      if (cq->AsyncNext(&tag, &ok, absl::ToChronoTime(absl::FromUnixMicros(next_tick))) ==
          grpc::CompletionQueue::GOT_EVENT) {
        auto* e = static_cast<Event*>(tag);
        (*e)(ok);
        delete e;
      }
    }
  });
  io.detach();
}

int Main(int argc, char** argv) {
  InitProcess(argv[0]);
  Args args;
  absl::Status parsed =
      ParseArgs(argc, argv, 1,
                {{"coordinator", "coordinator_pid", "workers", "hz", "heartbeat_timeout_ms", "silences", "commands",
                 "steady_seconds", "connections", "checkpoints", "shard_bytes"}, {}}, "control_plane_load", &args);
  if (!parsed.ok() || !args.Has("coordinator") || !args.Has("coordinator_pid") || !args.Has("workers")) {
    fprintf(stderr, "usage: control_plane_load --coordinator HOST:PORT --coordinator_pid P --workers N [--hz 10]\n"
                    "  [--heartbeat_timeout_ms T] [--silences K] [--commands K] [--steady_seconds S]\n"
                    "  [--checkpoints K] [--shard_bytes B] [--connections C]   (job token from $SHARDLINE_TOKEN)\n");
    return 2;
  }
  const int n = static_cast<int>(IntFlagOrExit(args, "workers", 0));
  const int pid = static_cast<int>(IntFlagOrExit(args, "coordinator_pid", 0));
  const int hz = static_cast<int>(IntFlagOrExit(args, "hz", 10));
  const absl::Duration deadline = absl::Milliseconds(IntFlagOrExit(args, "heartbeat_timeout_ms", 5000));
  const int silences = static_cast<int>(IntFlagOrExit(args, "silences", 10));
  const int commands = static_cast<int>(IntFlagOrExit(args, "commands", 5));
  const absl::Duration steady = absl::Seconds(IntFlagOrExit(args, "steady_seconds", 10));
  const int checkpoints = static_cast<int>(IntFlagOrExit(args, "checkpoints", 3));
  const int64_t shard_bytes = IntFlagOrExit(args, "shard_bytes", 4096);
  absl::StatusOr<std::string> token = LoadToken(Env::Default(), "");
  if (!token.ok()) {
    fprintf(stderr, "%s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  // Every simulated worker proves the token with one session's headers, a
  // fresh one per call (common/net/proof_client.h), as a real one does after
  // its Hello.
  std::unique_ptr<RpcAuth> auth;
  std::unique_ptr<CoordinatorClient> client;
  if (!token->empty()) {
    auth = std::make_unique<RpcAuth>(Env::Default(), *token);
    client = std::make_unique<CoordinatorClient>(Env::Default(), args.Get("coordinator"), auth.get());
    absl::StatusOr<std::string> header =
        client->Proof(coordinator::StatusRequest::descriptor()->full_name(), absl::Now() + absl::Seconds(30));
    if (!header.ok()) {
      fprintf(stderr, "%s\n", std::string(header.status().message()).c_str());
      return 2;
    }
  }
  Load load(client.get(), hz, shard_bytes);
  {
    MutexLock lock(&load.mu_);
    load.workers_ = n;
  }
  // Simulated workers share connections (a real one each would be N
  // sockets from one process): one per 32 workers, at most --connections.
  const int connections = std::max(1, std::min<int>(static_cast<int>(IntFlagOrExit(args, "connections", 128)), (n + 31) / 32));
  const std::vector<std::unique_ptr<coordinator::Coordinator::Stub>> stubs = OpenStubs(args.Get("coordinator"), connections);
  std::vector<std::unique_ptr<SimWorker>> workers;
  grpc::CompletionQueue cq;  // never shut down: the process ends with _exit
  for (int w = 0; w < n; ++w) {
    workers.push_back(std::make_unique<SimWorker>(&load, w, stubs[w % connections].get(), &cq));
  }

  std::atomic<bool> run{true};
  StartIoThread(&workers, &cq, &run);
  Phases::Options o;
  o.n = n;
  o.pid = pid;
  o.hz = hz;
  o.deadline = deadline;
  o.silences = silences;
  o.commands = commands;
  o.steady = steady;
  o.checkpoints = checkpoints;
  o.shard_bytes = shard_bytes;
  return Phases(&load, &workers, &run, o).All();
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) { return shardline::Main(argc, argv); }
