#include "worker/data/tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/encoding/sha256.h"
#include "common/platform/status_macros.h"
#include "worker/data/spm_client.h"
#include "worker/data/spm_protocol.h"

namespace shardline {
namespace {

// The smallest vocabulary: 256 byte pieces, <unk>, <s>, </s>, "\n" and a
// few pieces to learn.
constexpr int kMinVocab = 264;

// SentencePiece's escaped space, U+2581 in UTF-8.
constexpr absl::string_view kSpaceMark = "\xe2\x96\x81";

// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 if none starts
// there. U+2581 counts as invalid: SentencePiece would read it as a space.
size_t Utf8Length(absl::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
  if (cp == 0x2581) return 0;
  return n;
}

}  // namespace

absl::StatusOr<std::string> TrainTokenizer(Env* env, const TokenizerTrainOptions& o) {
  if (o.inputs.empty()) return absl::InvalidArgumentError("--input: name at least one text file");
  for (const std::string& in : o.inputs) {
    if (in.find(',') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--input ", in, ": SentencePiece's trainer reads a list of files "
                                                     "separated by commas, so a file's name may not hold one"));
    }
  }
  if (o.vocab_size < kMinVocab) {
    return absl::InvalidArgumentError(absl::StrCat("--vocab_size ", o.vocab_size, ": at least ", kMinVocab,
                                                   " (256 byte pieces, <unk>, <s>, </s>, \"\\n\" and some to learn)"));
  }
  if (o.model_type != "unigram" && o.model_type != "bpe") {
    return absl::InvalidArgumentError(absl::StrCat("--model_type ", o.model_type, ": expected unigram or bpe"));
  }
  if (o.max_lines < 1) return absl::InvalidArgumentError(absl::StrCat("--max_lines ", o.max_lines, ": at least 1"));
  const std::map<std::string, std::string> flags = {
      {"input", absl::StrJoin(o.inputs, ",")},
      {"vocab_size", absl::StrCat(o.vocab_size)},
      {"model_type", o.model_type},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"user_defined_symbols", "\n"},
      {"input_sentence_size", absl::StrCat(o.max_lines)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", absl::StrCat(o.max_line_bytes)},
      {"num_threads", "1"},
      {"minloglevel", "1"},
  };
  ASSIGN_OR_RETURN(std::unique_ptr<SpmClient> spm, SpmClient::Start(env));
  absl::StatusOr<std::string> model = spm->Train(flags, o.seed);
  if (!model.ok()) {
    return Annotate(model.status(), absl::StrCat("training a ", o.model_type, " tokenizer of ", o.vocab_size,
                                                 " pieces on ", absl::StrJoin(o.inputs, ", ")));
  }
  return model;
}

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromModel(Env* env, std::string model, std::string source) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  ASSIGN_OR_RETURN(t->sp_, SpmClient::Start(env));
  absl::StatusOr<std::vector<SpmPiece>> pieces = t->sp_->Load(model);
  if (absl::IsInvalidArgument(pieces.status())) {
    return absl::DataLossError(absl::StrCat(source, ": not a SentencePiece model: ", pieces.status().message()));
  }
  if (!pieces.ok()) return pieces.status();
  t->vocab_size_ = static_cast<int>(pieces->size());
  t->byte_ids_.assign(256, -1);
  t->pieces_.resize(pieces->size());
  for (int id = 0; id < t->vocab_size_; ++id) {
    const SpmPiece& p = (*pieces)[static_cast<size_t>(id)];
    std::string& out = t->pieces_[static_cast<size_t>(id)];
    if (p.kind == spm::kByte) {
      int byte = -1;  // "<0xNN>"
      if (p.text.size() == 6 && p.text.compare(0, 3, "<0x") == 0) byte = std::stoi(p.text.substr(3, 2), nullptr, 16);
      if (byte < 0 || byte > 255) return absl::DataLossError(absl::StrCat(source, ": byte piece ", id, " is ", p.text));
      out.assign(1, static_cast<char>(byte));
      t->byte_ids_[static_cast<size_t>(byte)] = id;
    } else if (p.kind == spm::kUnknown) {
      out = "\xef\xbf\xbd";  // U+FFFD: never made by Encode (byte fallback)
    } else if (p.kind == spm::kNormal) {
      const std::string& piece = p.text;
      for (size_t i = 0; i < piece.size();) {
        if (absl::string_view(piece).substr(i, kSpaceMark.size()) == kSpaceMark) {
          out.push_back(' ');
          i += kSpaceMark.size();
        } else {
          out.push_back(piece[i++]);
        }
      }
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (t->byte_ids_[static_cast<size_t>(b)] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the model has no byte-fallback piece for byte ", b,
          ", so not every text can be encoded; train it with `shardline data tokenizer`"));
    }
  }
  t->sha256_ = Sha256Hex(model);
  t->model_ = std::move(model);
  t->source_ = std::move(source);
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::string model, env->ReadFile(path, kMaxTokenizerFileBytes));
  return FromModel(env, std::move(model), path);
}

absl::Status Tokenizer::EncodeRun(absl::string_view run, std::vector<int32_t>* ids) const {
  if (run.empty()) return absl::OkStatus();
  return Annotate(sp_->Encode(run, ids), source_);
}

absl::Status Tokenizer::Encode(absl::string_view text, std::vector<int32_t>* ids) const {
  constexpr size_t kMaxRun = size_t{16} << 20;  // below the helper's 64 MiB, cut after a newline
  size_t run = 0;  // start of the run SentencePiece encodes
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(text, i);
    if (n > 0) {
      i += n;
      if (i - run >= kMaxRun && text[i - 1] == '\n') {
        RETURN_IF_ERROR(EncodeRun(text.substr(run, i - run), ids));
        run = i;
      }
      continue;
    }
    RETURN_IF_ERROR(EncodeRun(text.substr(run, i - run), ids));
    // A byte SentencePiece would change: its byte piece; U+2581 is three.
    const size_t raw = text.substr(i, kSpaceMark.size()) == kSpaceMark ? kSpaceMark.size() : 1;
    for (size_t k = 0; k < raw; ++k) ids->push_back(byte_ids_[static_cast<unsigned char>(text[i + k])]);
    i += raw;
    run = i;
  }
  return EncodeRun(text.substr(run), ids);
}

absl::Status Tokenizer::EncodeLines(absl::string_view text, std::vector<int32_t>* ids,
                                    std::vector<size_t>* line_ends) const {
  const size_t first = ids->size();
  RETURN_IF_ERROR(Encode(text, ids));
  // Each id stands for its piece's bytes, in order (the round trip), so the
  // ids of a line end where their bytes reach its newline.
  size_t at = 0;  // bytes of text covered by ids so far
  size_t next_newline = text.find('\n');
  for (size_t k = first; k < ids->size(); ++k) {
    at += PieceBytes((*ids)[k]);
    if (next_newline != absl::string_view::npos && at > next_newline) {
      if (at != next_newline + 1) {
        return absl::InternalError(absl::StrCat(source_, ": piece ", (*ids)[k], " spans a line end"));
      }
      line_ends->push_back(k + 1);
      next_newline = text.find('\n', at);
    }
  }
  if (at != text.size()) {
    return absl::InternalError(absl::StrCat(source_, ": the pieces of a text of ", text.size(), " bytes hold ", at));
  }
  if (!text.empty() && text.back() != '\n') line_ends->push_back(ids->size());
  return absl::OkStatus();
}

void Tokenizer::AppendPiece(int32_t id, std::string* out) const { out->append(pieces_[static_cast<size_t>(id)]); }

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " is id ", ids[i], ", outside the vocabulary of ",
                                                     vocab_size_, " pieces of ", source_));
    }
    AppendPiece(ids[i], &out);
  }
  return out;
}

}  // namespace shardline
