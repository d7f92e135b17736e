// A COMMITTED manifest, read and checked as the commit, restore and
// `shardline ckpt verify` do.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/verify.h"
#include "common/platform/env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d = "/tmp/shardline_manifest_fuzz_" + std::to_string(getpid()) + "/step_000000000010";
    (void)shardline::Env::Default()->CreateDirs(d);
    return d;
  }();
  {
    std::ofstream out(dir + "/" + shardline::kCommittedFile, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  absl::StatusOr<shardline::state::CheckpointManifest> m = shardline::ReadCommitted(shardline::Env::Default(), dir);
  if (m.ok()) (void)shardline::CheckManifest(*m, dir);
  return 0;
}
