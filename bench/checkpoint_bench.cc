// Checkpoint shard write (with fsync) and read (with full verification)
// throughput, for bench/checkpoint_bench.sh. Prints one JSON object per
// size: {"name":..,"bytes":..,"write_GBps":..,"read_GBps":..}.
//
//   checkpoint_bench DIR [FLOATS_PER_BUFFER ...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "worker/checkpoint/shard_file.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: checkpoint_bench DIR [FLOATS_PER_BUFFER ...]\n");
    return 2;
  }
  const std::string dir = argv[1];
  shardline::Env* env = shardline::Env::Default();
  if (!env->CreateDirs(dir).ok()) return 1;
  for (int i = 2; i < argc; ++i) {
    const long floats = std::atol(argv[i]);
    shardline::ShardContents c;
    c.header.set_total_size(floats);
    c.header.set_begin(0);
    c.header.set_end(floats);
    c.buffers.push_back({"params", std::vector<float>(static_cast<size_t>(floats), 0.25f)});
    c.buffers.push_back({"momentum", std::vector<float>(static_cast<size_t>(floats), -0.5f)});
    for (size_t k = 0; k < c.buffers[0].values.size(); k += 1024) c.buffers[0].values[k] = static_cast<float>(k);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<shardline::WrittenShard> w = shardline::WriteShard(env, dir, "bench.ckpt", std::move(c));
    const auto t1 = std::chrono::steady_clock::now();
    if (!w.ok()) {
      fprintf(stderr, "%s\n", std::string(w.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<shardline::ShardContents> r = shardline::ReadShard(env, w->path);
    const auto t2 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
      return 1;
    }
    const double ws = std::chrono::duration<double>(t1 - t0).count();
    const double rs = std::chrono::duration<double>(t2 - t1).count();
    printf("{\"floats_per_buffer\":%ld,\"bytes\":%ld,\"write_GBps\":%.3f,\"read_GBps\":%.3f}\n", floats,
           static_cast<long>(w->size), w->size / ws / 1e9, w->size / rs / 1e9);
    fflush(stdout);
    env->DeleteFile(w->path).IgnoreError();
  }
  return 0;
}
