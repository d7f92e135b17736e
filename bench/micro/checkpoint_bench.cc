// Checkpoint shard write (with fsync) and restore (read into preallocated
// training buffers and verify every CRC, as RestoreCheckpoint does) throughput,
// for bench/drivers/checkpoint_bench.sh. With --cold the page cache is dropped
// before the read (needs root). Prints one JSON object per size.
//
//   checkpoint_bench [--cold] DIR FLOATS_PER_BUFFER...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

#include "common/checkpoint/shard_file.h"

namespace {

void DropCaches() {
  sync();
  FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (f != nullptr) {
    std::fputs("3\n", f);
    std::fclose(f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  bool cold = false;
  if (argc > 1 && std::string(argv[1]) == "--cold") {
    cold = true;
    first = 2;
  }
  if (argc < first + 2) {
    fprintf(stderr, "usage: checkpoint_bench [--cold] DIR FLOATS_PER_BUFFER...\n");
    return 2;
  }
  const std::string dir = argv[first];
  shardline::Env* env = shardline::Env::Default();
  if (!env->CreateDirs(dir).ok()) return 1;
  for (int i = first + 1; i < argc; ++i) {
    const long floats = std::atol(argv[i]);
    shardline::ShardContents c;
    c.header.set_total_size(floats);
    shardline::SetShardPieces({shardline::Range{0, floats}}, &c.header);
    c.buffers.push_back({"params", std::vector<float>(static_cast<size_t>(floats), 0.25f)});
    c.buffers.push_back({"momentum", std::vector<float>(static_cast<size_t>(floats), -0.5f)});
    for (size_t k = 0; k < c.buffers[0].values.size(); k += 1024) c.buffers[0].values[k] = static_cast<float>(k);
    // The training buffers a restore fills: allocated and touched already.
    std::vector<float> params(static_cast<size_t>(floats), 1.0f), momentum(params.size(), 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<shardline::WrittenShard> w = shardline::WriteShard(env, dir, "bench.ckpt", std::move(c));
    const auto t1 = std::chrono::steady_clock::now();
    if (!w.ok()) {
      fprintf(stderr, "%s\n", std::string(w.status().message()).c_str());
      return 1;
    }
    if (cold) DropCaches();
    const auto t2 = std::chrono::steady_clock::now();
    absl::StatusOr<shardline::state::ShardHeader> r = shardline::ReadShardInto(
        env, w->path,
        [&](const shardline::state::ShardHeader&,
            const shardline::state::BufferEntry& b) -> absl::StatusOr<shardline::Placements> {
          return shardline::Placements{{b.name() == "params" ? params.data() : momentum.data(), 0, b.floats()}};
        },
        nullptr);
    const auto t3 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
      return 1;
    }
    const double ws = std::chrono::duration<double>(t1 - t0).count();
    const double rs = std::chrono::duration<double>(t3 - t2).count();
    printf("{\"floats_per_buffer\":%ld,\"bytes\":%ld,\"cold\":%s,\"write_GBps\":%.3f,\"restore_GBps\":%.3f}\n", floats,
           static_cast<long>(w->size), cold ? "true" : "false", w->size / ws / 1e9, w->size / rs / 1e9);
    fflush(stdout);
    env->DeleteFile(w->path).IgnoreError();
  }
  return 0;
}
