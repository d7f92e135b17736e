#include "worker/checkpoint/ckpt_export.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/shard_file.h"
#include "common/checkpoint/verify.h"
#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "worker/checkpoint/safetensors.h"

namespace shardline {
namespace {

// One shard's pieces of the flat parameters, and where each starts in its
// packed params buffer.
struct ShardPiecesIndex {
  std::unique_ptr<ShardReader> reader;
  std::vector<Range> pieces;   // ascending
  std::vector<int64_t> packed;  // packed[i]: the buffer offset of pieces[i]
};

// Fills flat floats [window.begin, window.end) into dst from every shard's
// pieces that overlap them.
absl::Status Assemble(std::vector<ShardPiecesIndex>& shards, Range window, float* dst) {
  for (ShardPiecesIndex& s : shards) {
    auto it = std::upper_bound(s.pieces.begin(), s.pieces.end(), window.begin,
                               [](int64_t at, const Range& p) { return at < p.end; });
    for (; it != s.pieces.end() && it->begin < window.end; ++it) {
      const Range both = Overlap(*it, window);
      if (both.empty()) continue;
      const int64_t packed = s.packed[static_cast<size_t>(it - s.pieces.begin())] + (both.begin - it->begin);
      RETURN_IF_ERROR(s.reader->Read(kParamsBuffer, packed, packed + both.size(), dst + (both.begin - window.begin)));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteParams(Env* env, const std::string& step_dir, const VerifiedCheckpoint& v, WritableFile* file,
                         const ExportOptions& options) {
  std::vector<ShardPiecesIndex> shards;
  for (const state::ShardEntry& e : v.manifest.shards()) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> reader, ShardReader::Open(env, step_dir + "/" + e.file()));
    // Islands: island 0's parameters (after the run's last outer step
    // every island holds the same).
    if (ShardIsland(reader->header()) != 0) continue;
    ShardPiecesIndex& s = shards.emplace_back();
    s.reader = std::move(reader);
    s.pieces = ShardPieces(s.reader->header());
    int64_t packed = 0;
    for (const Range& p : s.pieces) {
      s.packed.push_back(packed);
      packed += p.size();
    }
  }
  const int64_t window = std::max<int64_t>(1, options.window_floats);
  std::vector<float> buffer;
  for (const state::TensorEntry& t : v.headers[0].tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape()) n *= d;
    for (int64_t at = t.offset(); at < t.offset() + n; at += window) {
      const Range part{at, std::min(at + window, t.offset() + n)};
      buffer.resize(static_cast<size_t>(part.size()));
      RETURN_IF_ERROR(Assemble(shards, part, buffer.data()));
      RETURN_IF_ERROR(file->Append(absl::string_view(reinterpret_cast<const char*>(buffer.data()),
                                                     buffer.size() * sizeof(float))));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExportedCheckpoint> ExportCheckpoint(Env* env, const std::string& step_dir, const std::string& out,
                                                    const ExportOptions& options) {
  ASSIGN_OR_RETURN(const VerifiedCheckpoint v, VerifyCheckpoint(env, step_dir));
  const std::vector<state::TensorEntry> tensors(v.headers[0].tensors().begin(), v.headers[0].tensors().end());
  ExportedCheckpoint done;
  done.tokenizer_sha256 = v.headers[0].data_position().tokenizer_sha256();
  for (const state::TensorEntry& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape()) n *= d;
    if (t.offset() < 0 || n < 0 || t.offset() + n > v.total_size) {
      return absl::DataLossError(absl::StrCat("checkpoint ", step_dir, ": tensor ", t.name(), " lies outside the model's ",
                                              v.total_size, " parameters"));
    }
    done.parameters += n;
  }
  done.tensors = static_cast<int64_t>(tensors.size());
  // Trained on token shards: the export names its tokenizer, so a sampler
  // given another one can say so.
  std::map<std::string, std::string> metadata = options.metadata;
  if (!done.tokenizer_sha256.empty()) metadata["tokenizer_sha256"] = done.tokenizer_sha256;
  const std::string header = SafetensorsHeaderBytes(tensors, metadata);
  const std::string tmp = out + ".tmp";
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(tmp));
  absl::Status s = file->Append(header);
  if (s.ok()) s = WriteParams(env, step_dir, v, file.get(), options);
  if (s.ok()) s = file->Sync();
  if (s.ok()) s = file->Close();
  file.reset();
  if (s.ok()) s = env->RenameFile(tmp, out);
  if (s.ok()) {
    const size_t slash = out.find_last_of('/');
    s = env->SyncDir(slash == std::string::npos ? "." : out.substr(0, slash));
  }
  if (!s.ok()) {
    env->DeleteFile(tmp).IgnoreError();
    return s;
  }
  done.bytes = static_cast<int64_t>(header.size()) + done.parameters * static_cast<int64_t>(sizeof(float));
  return done;
}

}  // namespace shardline
