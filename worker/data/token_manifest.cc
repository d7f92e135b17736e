#include "worker/data/token_manifest.h"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/encoding/checked_math.h"
#include "common/encoding/sha256.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& source, const std::string& field, const std::string& what) {
  return absl::DataLossError(absl::StrCat(source, ": field ", field, " ", what));
}

absl::StatusOr<const Json*> Member(const Json& j, const char* key, const std::string& source, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) return Bad(source, absl::StrCat(path, key), "is missing");
  return &j.at(key);
}

absl::StatusOr<int64_t> Count(const Json& j, const char* key, const std::string& source, const std::string& path) {
  ASSIGN_OR_RETURN(const Json* v, Member(j, key, source, path));
  if (!v->is_number_unsigned()) return Bad(source, absl::StrCat(path, key), "is not a non-negative integer");
  const uint64_t n = v->get<uint64_t>();
  if (n > (uint64_t{1} << 62)) return Bad(source, absl::StrCat(path, key), "is out of range");
  return static_cast<int64_t>(n);
}

absl::StatusOr<std::string> Text(const Json& j, const char* key, const std::string& source, const std::string& path) {
  ASSIGN_OR_RETURN(const Json* v, Member(j, key, source, path));
  if (!v->is_string()) return Bad(source, absl::StrCat(path, key), "is not a string");
  return v->get<std::string>();
}

bool IsHexDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A file name inside the directory: no separators, not "." or "..".
bool IsPlainName(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos;
}

absl::StatusOr<std::vector<TokenShard>> Split(const Json& root, const char* name, const std::string& source,
                                               int token_bytes) {
  ASSIGN_OR_RETURN(const Json* list, Member(root, name, source, ""));
  if (!list->is_array()) return Bad(source, name, "is not a list of shards");
  std::vector<TokenShard> out;
  int64_t tokens = 0;
  int64_t text_bytes = 0;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = absl::StrCat(name, "[", i, "].");
    const Json& s = (*list)[i];
    TokenShard shard;
    ASSIGN_OR_RETURN(shard.file, Text(s, "file", source, path));
    if (!IsPlainName(shard.file)) return Bad(source, path + "file", absl::StrCat("\"", shard.file, "\" is not a file name"));
    ASSIGN_OR_RETURN(shard.tokens, Count(s, "tokens", source, path));
    // Issue 62: tokens 2^62 of 4 bytes wrapped to 0 and matched an empty
    // file; every worker then died reading past it.
    const std::optional<int64_t> bytes = CheckedMul(shard.tokens, static_cast<int64_t>(token_bytes));
    if (!bytes.has_value() || *bytes > kMaxTokenShardBytes) {
      return Bad(source, path + "tokens",
                 absl::StrCat("is ", shard.tokens, ": ", shard.tokens, " tokens of ", token_bytes,
                              " bytes are over the largest shard, ", kMaxTokenShardBytes, " bytes"));
    }
    ASSIGN_OR_RETURN(shard.text_bytes, Count(s, "text_bytes", source, path));
    const std::optional<int64_t> split_tokens = CheckedAdd(tokens, shard.tokens);
    const std::optional<int64_t> split_text = CheckedAdd(text_bytes, shard.text_bytes);
    if (!split_tokens.has_value() || *split_tokens > kMaxSplitTokens) {
      return Bad(source, path + "tokens", absl::StrCat("takes the split past ", kMaxSplitTokens, " tokens"));
    }
    if (!split_text.has_value() || *split_text > kMaxSplitTokens) {
      return Bad(source, path + "text_bytes", absl::StrCat("takes the split past ", kMaxSplitTokens, " bytes of text"));
    }
    tokens = *split_tokens;
    text_bytes = *split_text;
    ASSIGN_OR_RETURN(shard.sha256, Text(s, "sha256", source, path));
    if (!IsHexDigest(shard.sha256)) return Bad(source, path + "sha256", "is not 64 lowercase hex digits");
    if (s.contains("ends_sha256")) {
      ASSIGN_OR_RETURN(shard.ends_sha256, Text(s, "ends_sha256", source, path));
      if (!IsHexDigest(shard.ends_sha256)) return Bad(source, path + "ends_sha256", "is not 64 lowercase hex digits");
    }
    out.push_back(std::move(shard));
  }
  if (out.empty()) return Bad(source, name, "has no shards");
  return out;
}

Json SplitJson(const std::vector<TokenShard>& split) {
  Json list = Json::array();
  for (const TokenShard& s : split) {
    Json shard{{"file", s.file}, {"tokens", s.tokens}, {"text_bytes", s.text_bytes}, {"sha256", s.sha256}};
    if (!s.ends_sha256.empty()) shard["ends_sha256"] = s.ends_sha256;
    list.push_back(std::move(shard));
  }
  return list;
}

}  // namespace

int64_t TokenManifest::Tokens(const std::vector<TokenShard>& split) {
  int64_t n = 0;
  for (const TokenShard& s : split) n += s.tokens;
  return n;
}

int64_t TokenManifest::TextBytes(const std::vector<TokenShard>& split) {
  int64_t n = 0;
  for (const TokenShard& s : split) n += s.text_bytes;
  return n;
}

int TokenBytesFor(int vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

std::string ShardEndsSha256(absl::string_view head, absl::string_view tail) {
  Sha256 h;
  h.Update(head);
  h.Update(tail);
  return h.HexDigest();
}

std::string ShardEndsSha256(absl::string_view shard) {
  const size_t n = std::min(shard.size(), kShardEndBytes);
  return ShardEndsSha256(shard.substr(0, n), shard.substr(shard.size() - n));
}

std::string TokenManifestJson(const TokenManifest& m) {
  Json j;
  j["format"] = kTokenFormat;
  j["tokenizer"] = Json{{"file", m.tokenizer_file}, {"sha256", m.tokenizer_sha256}, {"vocab_size", m.vocab_size}};
  j["token_bytes"] = m.token_bytes;
  j["train"] = SplitJson(m.train);
  j["val"] = SplitJson(m.val);
  return j.dump(1) + "\n";
}

absl::StatusOr<TokenManifest> ParseTokenManifest(const std::string& text, const std::string& source) {
  Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return absl::DataLossError(absl::StrCat(source, ": not a JSON object"));
  TokenManifest m;
  ASSIGN_OR_RETURN(std::string format, Text(root, "format", source, ""));
  if (format != kTokenFormat) {
    return Bad(source, "format", absl::StrCat("is \"", format, "\", not \"", kTokenFormat, "\""));
  }
  ASSIGN_OR_RETURN(const Json* tok, Member(root, "tokenizer", source, ""));
  ASSIGN_OR_RETURN(m.tokenizer_file, Text(*tok, "file", source, "tokenizer."));
  if (!IsPlainName(m.tokenizer_file)) return Bad(source, "tokenizer.file", "is not a file name");
  ASSIGN_OR_RETURN(m.tokenizer_sha256, Text(*tok, "sha256", source, "tokenizer."));
  if (!IsHexDigest(m.tokenizer_sha256)) return Bad(source, "tokenizer.sha256", "is not 64 lowercase hex digits");
  ASSIGN_OR_RETURN(int64_t vocab, Count(*tok, "vocab_size", source, "tokenizer."));
  if (vocab < 1 || vocab > (int64_t{1} << 31) - 1) return Bad(source, "tokenizer.vocab_size", "is out of range");
  m.vocab_size = static_cast<int>(vocab);
  ASSIGN_OR_RETURN(int64_t token_bytes, Count(root, "token_bytes", source, ""));
  if (token_bytes != TokenBytesFor(m.vocab_size)) {
    return Bad(source, "token_bytes",
               absl::StrCat("is ", token_bytes, ", not ", TokenBytesFor(m.vocab_size), " for ", m.vocab_size, " tokens"));
  }
  m.token_bytes = static_cast<int>(token_bytes);
  ASSIGN_OR_RETURN(m.train, Split(root, "train", source, m.token_bytes));
  ASSIGN_OR_RETURN(m.val, Split(root, "val", source, m.token_bytes));
  return m;
}

absl::StatusOr<TokenManifest> ReadTokenManifest(Env* env, const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kTokenManifestFile);
  absl::StatusOr<std::string> text = env->ReadFile(path, kMaxConfigFileBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat(path, " does not exist: ", dir,
                                            " holds no finished token shards (make them with `shardline data tokenize`)"));
  }
  if (!text.ok()) return text.status();
  return ParseTokenManifest(*text, path);
}

}  // namespace shardline
