// A subword tokenizer: a SentencePiece model (Debian's libsentencepiece)
// trained by `shardline data tokenizer`, with exact round trips: Decode of
// Encode(b) is b for every byte sequence b.
//
// SentencePiece runs in a helper process (spm_client.h says why). Alone it
// does not round-trip bytes: it replaces invalid UTF-8 with U+FFFD and reads
// a literal U+2581 as its escaped space. So Encode gives those bytes (and
// only those) the model's byte-fallback pieces directly, and Decode writes
// each piece's bytes itself. Everything else is SentencePiece's encoding.
// "\n" is a piece of its own, so no piece spans lines: the ids of a text are
// the concatenation of its lines' ids (tested), and EncodeLines says where
// each line's ids end.
//
//   ASSIGN_OR_RETURN(std::string model, TrainTokenizer(env, options));
//   ASSIGN_OR_RETURN(auto tok, Tokenizer::FromModel(env, model, "DIR/tokenizer.model"));
//   std::vector<int32_t> ids;
//   RETURN_IF_ERROR(tok->Encode("It is a truth universally acknowledged\n", &ids));
//   ASSIGN_OR_RETURN(std::string back, tok->Decode(ids));
#ifndef SHARDLINE_WORKER_DATA_TOKENIZER_H_
#define SHARDLINE_WORKER_DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/platform/env.h"

namespace shardline {

class SpmClient;

// The file a tokenizer is kept in, in a tokenizer directory, a token-shard
// directory and a job's workdir.
inline constexpr char kTokenizerFile[] = "tokenizer.model";

struct TokenizerTrainOptions {
  // Text files (any bytes; lines are SentencePiece's sentences, and lines
  // longer than max_line_bytes are left out of training, not of encoding).
  std::vector<std::string> inputs;
  int vocab_size = 4096;
  std::string model_type = "unigram";  // or "bpe"
  // Lines read for training: all when a corpus has fewer, else a sample of
  // this many drawn with `seed`.
  int64_t max_lines = 2000000;
  int max_line_bytes = 16384;
  uint32_t seed = 0;
};

// Trains a model (single-threaded, so the same inputs and options always
// give the same bytes) and returns it serialized. Byte fallback on, "\n" a
// piece, no normalization (the model sees the bytes as they are).
absl::StatusOr<std::string> TrainTokenizer(Env* env, const TokenizerTrainOptions& options);

// Not thread-safe: one helper process per tokenizer.
class Tokenizer {
 public:
  ~Tokenizer();

  // From a serialized model; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromModel(Env* env, std::string model, std::string source);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(Env* env, const std::string& path);

  int vocab_size() const { return vocab_size_; }
  // SHA-256 of the serialized model: what token shards and checkpoints name.
  const std::string& sha256() const { return sha256_; }
  const std::string& model() const { return model_; }
  const std::string& source() const { return source_; }

  // Appends the ids of `text` to *ids.
  absl::Status Encode(absl::string_view text, std::vector<int32_t>* ids) const;
  // Encode, and appends to *line_ends, for each line of `text` (each "\n"
  // ends one; a last line without one is a line too), the size *ids had
  // after that line's ids.
  absl::Status EncodeLines(absl::string_view text, std::vector<int32_t>* ids, std::vector<size_t>* line_ends) const;
  // Bytes of text that id stands for (Decode writes these).
  size_t PieceBytes(int32_t id) const { return pieces_[static_cast<size_t>(id)].size(); }
  // The bytes of `ids`; InvalidArgument naming an id outside the vocabulary.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const;
  // Appends the bytes of one id (nothing for control pieces). Requires
  // 0 <= id < vocab_size().
  void AppendPiece(int32_t id, std::string* out) const;

 private:
  Tokenizer();
  absl::Status EncodeRun(absl::string_view run, std::vector<int32_t>* ids) const;

  std::unique_ptr<SpmClient> sp_;
  std::vector<int32_t> byte_ids_;  // the byte-fallback piece of each byte
  std::string model_, source_, sha256_;
  int vocab_size_ = 0;
  std::vector<std::string> pieces_;  // each id's bytes, as Decode writes them
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_TOKENIZER_H_
