// A checkpoint shard file, read from disk as restore and `shardline ckpt`
// read it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "common/checkpoint/shard_file.h"
#include "common/platform/env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/shardline_shard_fuzz_" + std::to_string(getpid()) + ".ckpt";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  (void)shardline::ReadShard(shardline::Env::Default(), path);
  return 0;
}
