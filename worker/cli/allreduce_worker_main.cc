// shardline-allreduce-worker: one rank of a collective benchmark or test over
// the real gRPC transport, like nccl-tests' all_reduce_perf. Start N of them
// with the same --rendezvous directory; each writes its address there and
// reads the others'.
//
//   for r in 0 1; do
//     shardline-allreduce-worker --rank $r --world 2 --rendezvous /tmp/rdv &
//   done
//
// Rank 0 prints one JSON object per size: median time of the slowest rank,
// algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2(N-1)/N).
// Exit codes: 0 ok, 2 bad flags, 3 a collective failed (message names the
// peer), 4 a --check mismatch.
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/platform/process_init.h"
#include "common/platform/env.h"
#include "common/net/grpc_util.h"
#include "common/net/listen_address.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "common/platform/args.h"
#include "worker/collective/grpc_transport.h"
#include "worker/collective/ring.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline-allreduce-worker --rank R --world N --rendezvous DIR [flags]\n"
    "  --listen HOST:PORT      transport address (default 127.0.0.1:0); HOST is what the\n"
    "                          other ranks are told (a wildcard host tells them 127.0.0.1)\n"
    "  --op allreduce|scalars  what to time (default allreduce)\n"
    "  --sizes B,B,...         buffer sizes in bytes (default 65536,1048576,16777216,67108864)\n"
    "  --iters K               timed iterations per size (default 20), after 3 warm-up ones\n"
    "  --timeout_ms T          per-operation deadline (default 30000)\n"
    "  --segment_bytes S       pipeline segment (default 1048576)\n"
    "  --doubling_max_bytes D  all-reduces of at most D bytes use recursive doubling, larger\n"
    "                          ones the ring (default 65536; 0: always the ring)\n"
    "  --check                 verify every result exactly; exit 4 on a mismatch\n";

// Publishes this rank's address and waits for all N (FileStore-style).
absl::StatusOr<std::vector<std::string>> Rendezvous(const std::string& dir, int rank, int world,
                                                    const std::string& address) {
  Env* env = Env::Default();
  RETURN_IF_ERROR(env->CreateDirs(dir));
  const std::string mine = absl::StrCat(dir, "/rank-", rank);
  {
    ASSIGN_OR_RETURN(auto f, env->NewWritableFile(mine + ".tmp"));
    RETURN_IF_ERROR(f->Append(address));
    RETURN_IF_ERROR(f->Close());
  }
  RETURN_IF_ERROR(env->RenameFile(mine + ".tmp", mine));
  std::vector<std::string> peers(static_cast<size_t>(world));
  const int64_t deadline = env->NowMicros() + 60 * 1000000LL;
  for (int r = 0; r < world; ++r) {
    for (;;) {
      absl::StatusOr<std::string> a = env->ReadFile(absl::StrCat(dir, "/rank-", r), kMaxSmallFileBytes);
      if (a.ok()) {
        peers[static_cast<size_t>(r)] = *a;
        break;
      }
      if (env->NowMicros() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("rank ", r, " never joined the rendezvous in ", dir));
      }
      env->SleepForMicros(10000);
    }
  }
  return peers;
}

// The host the other ranks reach this one at: --listen's, unless it is a
// wildcard (then loopback). Benches in network namespaces listen on the
// namespace's own address.
std::string AdvertisedHost(const std::string& listen) {
  const std::string host = ListenHost(listen);
  return IsWildcardHost(host) ? "127.0.0.1" : host;
}

float Value(int rank, int64_t i) { return static_cast<float>((rank * 7 + i * 3) % 11 - 5); }

// What a run measures, from its flags.
struct Bench {
  int rank = 0;
  int world = 1;
  int iters = 20;
  bool check = false;
  std::string op = "allreduce";
};

// Every rank's transport of one generation, after the rendezvous. Exits
// with 3 (naming why) on failure.
std::unique_ptr<Transport> ConnectOrExit(const Args& args, const Bench& b, int64_t segment_bytes,
                                         std::unique_ptr<TransportServer>* server) {
  TransportServerOptions server_options;
  server_options.max_frame_bytes = static_cast<int>(std::min<int64_t>(segment_bytes + (64 << 10), kMaxMessageBytes));
  const std::string listen = args.Has("listen") ? args.Get("listen") : "127.0.0.1:0";
  auto die = [&](const absl::Status& s) {
    fprintf(stderr, "rank %d: %s\n", b.rank, std::string(s.message()).c_str());
    exit(3);
  };
  absl::StatusOr<std::unique_ptr<TransportServer>> started = TransportServer::Start(Env::Default(), listen, server_options);
  if (!started.ok()) die(started.status());
  *server = std::move(*started);
  absl::StatusOr<std::vector<std::string>> peers =
      Rendezvous(args.Get("rendezvous"), b.rank, b.world, absl::StrCat(AdvertisedHost(listen), ":", (*server)->port()));
  if (!peers.ok()) die(peers.status());
  absl::StatusOr<std::unique_ptr<Transport>> transport = (*server)->Connect(1, b.rank, *peers);
  if (!transport.ok()) die(transport.status());
  return std::move(*transport);
}

// Times `b.op` on `bytes` (the median of b.iters after 3 warm-ups, each the
// slowest rank's), checks the result when asked, and has rank 0 print one
// JSON line. Returns the process's exit code (0, or 4 for a wrong sum); a
// failed op exits with 3 after telling the other ranks.
int MeasureSize(RingCollectives& ring, Transport& transport, const Bench& b, int64_t bytes, bool* announced) {
  auto fail = [&](const absl::Status& s) {
    fprintf(stderr, "rank %d: %s failed: %s\n", b.rank, b.op.c_str(), std::string(s.message()).c_str());
    fflush(stderr);
    transport.Shutdown();  // flush the failure report to the other ranks
    _exit(3);
  };
  const bool scalar_op = b.op == "scalars";
  const int64_t n = scalar_op ? std::max<int64_t>(1, bytes / 8) : bytes / 4;
  std::vector<float> buf(scalar_op ? 0 : static_cast<size_t>(n));
  std::vector<double> scalars(scalar_op ? static_cast<size_t>(n) : 0);
  std::vector<float> input(buf.size());
  for (int64_t i = 0; i < static_cast<int64_t>(input.size()); ++i) input[static_cast<size_t>(i)] = Value(b.rank, i);
  std::vector<float> want;
  if (b.check) {
    want.assign(buf.size(), 0.0f);
    for (int r = 0; r < b.world; ++r) {
      for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) want[static_cast<size_t>(i)] += Value(r, i);
    }
  }
  std::vector<double> times;
  for (int it = 0; it < b.iters + 3; ++it) {
    std::copy(input.begin(), input.end(), buf.begin());
    for (size_t i = 0; i < scalars.size(); ++i) scalars[i] = b.rank + static_cast<double>(i);
    // A barrier, as the Gloo and MPI peers do before timing: otherwise a
    // rank still refilling its buffer counts as time in the others' op.
    double barrier[1] = {0};
    if (absl::Status s = ring.AllReduceScalars(absl::MakeSpan(barrier), ReduceOp::kSum); !s.ok()) fail(s);
    const absl::Time start = WallNow(Env::Default());
    absl::Status s = scalar_op ? ring.AllReduceScalars(absl::MakeSpan(scalars), ReduceOp::kSum)
                               : ring.AllReduce(absl::MakeSpan(buf));
    const double seconds = absl::ToDoubleSeconds(WallNow(Env::Default()) - start);
    if (!s.ok()) fail(s);
    if (!*announced) {
      fprintf(stderr, "rank %d: ready\n", b.rank);
      fflush(stderr);
      *announced = true;
    }
    for (size_t i = 0; b.check && i < buf.size(); ++i) {
      if (buf[i] != want[i]) {
        fprintf(stderr, "rank %d: mismatch at element %zu: %g != %g\n", b.rank, i, buf[i], want[i]);
        return 4;
      }
    }
    double slowest[1] = {seconds};
    if (!(s = ring.AllReduceScalars(absl::MakeSpan(slowest), ReduceOp::kMax)).ok()) fail(s);
    if (it >= 3) times.push_back(slowest[0]);
  }
  if (b.rank == 0 && !times.empty()) {
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const double algbw = static_cast<double>(bytes) / median / 1e9;
    printf("{\"impl\":\"shardline\",\"op\":\"%s\",\"world\":%d,\"bytes\":%ld,\"iters\":%d,"
           "\"median_s\":%.9g,\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g}\n",
           b.op.c_str(), b.world, static_cast<long>(bytes), b.iters, median, algbw,
           algbw * 2.0 * (b.world - 1) / b.world);
    fflush(stdout);
  }
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 1,
                                  {{"rank", "world", "rendezvous", "listen", "op", "sizes", "iters",
                                   "timeout_ms", "segment_bytes", "doubling_max_bytes"}, {}, {"check"}}, "shardline-allreduce-worker", &args);
  if (args.help) {
    fputs(kHelp, stdout);
    return 0;
  }
  if (!parsed.ok() || !args.Has("rank") || !args.Has("world") || !args.Has("rendezvous")) {
    fprintf(stderr, "%s\n%s", parsed.ok() ? "--rank, --world and --rendezvous are required" :
                                            std::string(parsed.message()).c_str(), kHelp);
    return 2;
  }
  Bench b;
  b.rank = static_cast<int>(IntFlagOrExit(args, "rank", 0));
  b.world = static_cast<int>(IntFlagOrExit(args, "world", 1));
  b.iters = static_cast<int>(IntFlagOrExit(args, "iters", 20));
  b.check = args.Has("check") && args.Get("check") != "false";
  if (args.Has("op")) b.op = args.Get("op");
  std::vector<int64_t> sizes;
  for (absl::string_view s : absl::StrSplit(args.Has("sizes") ? args.Get("sizes") : "65536,1048576,16777216,67108864", ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(s, &v) || v < 0) {
      fprintf(stderr, "--sizes: '%s' is not a byte count\n", std::string(s).c_str());
      return 2;
    }
    sizes.push_back(v);
  }
  logging::SetPrefix(absl::StrCat("rank ", b.rank));
  const int64_t segment_bytes = IntFlagOrExit(args, "segment_bytes", 1 << 20);
  std::unique_ptr<TransportServer> server;
  const std::unique_ptr<Transport> transport = ConnectOrExit(args, b, segment_bytes, &server);
  CollectiveOptions options;
  options.env = Env::Default();
  options.timeout = absl::Milliseconds(IntFlagOrExit(args, "timeout_ms", 30000));
  options.max_segment_bytes = segment_bytes;
  options.doubling_max_bytes = IntFlagOrExit(args, "doubling_max_bytes", options.doubling_max_bytes);
  RingCollectives ring(transport.get(), options);
  bool announced = false;
  for (int64_t bytes : sizes) {
    if (const int code = MeasureSize(ring, *transport, b, bytes, &announced); code != 0) return code;
  }
  return 0;
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) {
  shardline::InitProcess(argv[0]);
  return shardline::Main(argc, argv);
}
