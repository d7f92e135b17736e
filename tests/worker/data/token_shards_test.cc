// Token shards: `shardline data tokenize`'s streaming writer and manifest,
// the shards mapped back as one token stream of training windows, and every
// bad shard named (missing, truncated, hashed wrong, a token beyond the
// vocabulary, another tokenizer, a manifest field).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/encoding/coding.h"
#include "common/encoding/sha256.h"
#include "worker/data/dataset.h"
#include "worker/data/pipeline.h"
#include "worker/data/token_manifest.h"
#include "worker/data/tokenize.h"
#include "tests/worker/data/token_test_util.h"

namespace shardline {
namespace {

Env* env() { return Env::Default(); }

std::string ReadAll(const std::string& path) { return env()->ReadFile(path, int64_t{1} << 30).value_or(""); }

// The tokens of a split's shards, in order.
std::vector<int32_t> SplitTokens(const std::string& dir, const std::vector<TokenShard>& split) {
  std::vector<int32_t> out;
  for (const TokenShard& s : split) {
    const std::string bytes = ReadAll(dir + "/" + s.file);
    EXPECT_EQ(static_cast<int64_t>(bytes.size()), s.tokens * 2) << s.file;
    for (size_t i = 0; i + 1 < bytes.size(); i += 2) out.push_back(static_cast<int32_t>(ReadLittleEndian(&bytes[i], 2)));
  }
  return out;
}

struct Corpus {
  std::string dir, a, b, text;
};

Corpus MakeCorpus(const std::string& name) {
  Corpus c;
  c.dir = TokenTestDir(name);
  const std::string first = TokenTestText(600, 11), second = TokenTestText(400, 12);
  c.a = WriteTestFile(c.dir, "a.txt", first);
  c.b = WriteTestFile(c.dir, "b.txt", second);
  c.text = first + second;
  return c;
}

// Both files of `c` into c.dir/out, validation the last 10%.
TokenizeOptions Options(const Corpus& c, int64_t shard_tokens) {
  TokenizeOptions o;
  o.inputs = {c.a, c.b};
  o.out_dir = c.dir + "/out";
  o.shard_tokens = shard_tokens;
  return o;
}

TEST(TokenShardsTest, TokenizeStreamsTheInputsIntoShardsThatDecodeToThem) {
  std::unique_ptr<Tokenizer> tok = TokenTestTokenizer();
  ASSERT_NE(tok, nullptr);
  const Corpus c = MakeCorpus("streams");
  TokenizeOptions o = Options(c, 700);
  o.val_fraction = 0.25;
  o.chunk_bytes = 256;  // many chunks, each cut after a newline
  absl::StatusOr<TokenizeResult> r = TokenizeCorpus(env(), *tok, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const TokenManifest& m = r->manifest;
  EXPECT_GT(m.train.size(), 3u);
  EXPECT_EQ(m.vocab_size, 320);
  EXPECT_EQ(m.token_bytes, 2);
  EXPECT_EQ(m.tokenizer_sha256, tok->sha256());
  EXPECT_EQ(ReadAll(o.out_dir + "/tokenizer.model"), TokenTestModel());
  for (const auto* split : {&m.train, &m.val}) {
    for (const TokenShard& s : *split) {
      EXPECT_EQ(Sha256Hex(ReadAll(o.out_dir + "/" + s.file)), s.sha256) << s.file;
      if (&s != &split->back()) {
        EXPECT_GE(s.tokens, 700) << s.file;
      }
    }
  }
  // Train is the first 3/4 of the bytes from a line start on, val the rest.
  const int64_t train_bytes = TokenManifest::TextBytes(m.train);
  EXPECT_EQ(train_bytes + TokenManifest::TextBytes(m.val), static_cast<int64_t>(c.text.size()));
  EXPECT_EQ(c.text[static_cast<size_t>(train_bytes - 1)], '\n');
  EXPECT_GE(train_bytes, static_cast<int64_t>(c.text.size() * 3 / 4));
  EXPECT_LT(train_bytes, static_cast<int64_t>(c.text.size() * 3 / 4) + 200);
  EXPECT_EQ(tok->Decode(SplitTokens(o.out_dir, m.train)).value_or("?"), c.text.substr(0, static_cast<size_t>(train_bytes)));
  EXPECT_EQ(tok->Decode(SplitTokens(o.out_dir, m.val)).value_or("?"), c.text.substr(static_cast<size_t>(train_bytes)));
  // The manifest on disk is the one returned.
  absl::StatusOr<TokenManifest> read = ReadTokenManifest(env(), o.out_dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(TokenManifestJson(*read), TokenManifestJson(m));

  // The chunk size changes nothing; --val takes a file for validation.
  TokenizeOptions big = o;
  big.chunk_bytes = int64_t{4} << 20;
  big.out_dir = c.dir + "/big";
  absl::StatusOr<TokenizeResult> same = TokenizeCorpus(env(), *tok, big);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(TokenManifestJson(same->manifest), TokenManifestJson(m));
  TokenizeOptions with_val = o;
  with_val.inputs = {c.a};
  with_val.val_path = c.b;
  with_val.out_dir = c.dir + "/val";
  absl::StatusOr<TokenizeResult> v = TokenizeCorpus(env(), *tok, with_val);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(TokenManifest::TextBytes(v->manifest.val), static_cast<int64_t>(ReadAll(c.b).size()));
}

TEST(TokenShardsTest, ARerunReplacesTheShardsAndADirectoryWithoutAManifestIsNotDone) {
  std::unique_ptr<Tokenizer> tok = TokenTestTokenizer();
  ASSERT_NE(tok, nullptr);
  const Corpus c = MakeCorpus("rerun");
  TokenizeOptions o = Options(c, 300);
  ASSERT_TRUE(TokenizeCorpus(env(), *tok, o).ok());
  o.shard_tokens = 1000000;
  absl::StatusOr<TokenizeResult> r = TokenizeCorpus(env(), *tok, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->manifest.train.size(), 1u);
  std::vector<std::string> files = env()->GetChildren(o.out_dir).value_or(std::vector<std::string>{});
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"manifest.json", "tokenizer.model", "train-00000.tok", "val-00000.tok"}));
  // A run that stopped before its manifest (or one under way) is not data.
  ASSERT_TRUE(env()->DeleteFile(o.out_dir + "/manifest.json").ok());
  absl::StatusOr<TrainingData> d = LoadTokenSplits(env(), o.out_dir, 8, {});
  ASSERT_TRUE(absl::IsNotFound(d.status())) << d.status();
  EXPECT_TRUE(absl::StrContains(d.status().message(), o.out_dir + "/manifest.json")) << d.status();
}

// One token stream over the shards: window i is tokens [i, i + context],
// across shard ends; validation windows tile; bits per byte's scale.
TEST(TokenShardsTest, TrainingWindowsReadTheShardsAsOneStream) {
  std::unique_ptr<Tokenizer> tok = TokenTestTokenizer();
  ASSERT_NE(tok, nullptr);
  const Corpus c = MakeCorpus("windows");
  const TokenizeOptions o = Options(c, 257);
  absl::StatusOr<TokenizeResult> r = TokenizeCorpus(env(), *tok, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<int32_t> stream = SplitTokens(o.out_dir, r->manifest.train);
  const int context = 16;
  absl::StatusOr<TrainingData> d = LoadTokenSplits(env(), o.out_dir, context, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.num_examples, static_cast<int64_t>(stream.size()) - context);
  EXPECT_EQ(d->train.num_classes, 320);
  EXPECT_EQ(d->tokenizer_sha256, tok->sha256());
  EXPECT_NEAR(d->train.bytes_per_token,
              static_cast<double>(TokenManifest::TextBytes(r->manifest.train)) / static_cast<double>(stream.size()), 1e-12);
  EXPECT_TRUE(absl::StrContains(d->train.source, "data.tokens.dir " + o.out_dir)) << d->train.source;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < d->train.num_examples; i += 37) rows.push_back(i);
  rows.push_back(250);  // its window crosses the first shard's end
  rows.push_back(d->train.num_examples - 1);
  BatchData b;
  ASSERT_TRUE(GatherBatch(d->train, rows, &b).ok());
  for (size_t k = 0; k < rows.size(); ++k) {
    for (int j = 0; j < context; ++j) {
      ASSERT_EQ(b.tokens[k * context + static_cast<size_t>(j)], stream[static_cast<size_t>(rows[k] + j)]) << rows[k];
      ASSERT_EQ(b.y[k * context + static_cast<size_t>(j)], stream[static_cast<size_t>(rows[k] + j + 1)]) << rows[k];
    }
  }
  const std::vector<int32_t> val = SplitTokens(o.out_dir, r->manifest.val);
  EXPECT_EQ(d->test.num_examples, (static_cast<int64_t>(val.size()) - 1) / context);
  ASSERT_TRUE(GatherRange(d->test, 1, 1, &b).ok());
  EXPECT_EQ(b.tokens, std::vector<int32_t>(val.begin() + context, val.begin() + 2 * context));
  // The permutation of token shards is computed, not stored, and the
  // checkpoint's position names the tokenizer.
  BatchPipeline pipe(d->train.num_examples, 8, 3, Permutation::kHashed);
  pipe.set_tokenizer_sha256(d->tokenizer_sha256);
  const state::DataPosition pos = pipe.Position(42);
  EXPECT_EQ(pos.tokenizer_sha256(), tok->sha256());
  EXPECT_EQ(pipe.Restore(pos).value_or(-1), 42);
  BatchPipeline bytes(d->train.num_examples, 8, 3, Permutation::kHashed);
  absl::StatusOr<int64_t> other = bytes.Restore(pos);
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(absl::StrContains(other.status().message(), "tokenizer " + tok->sha256())) << other.status();
}

class BadShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = TokenTestTokenizer();
    ASSERT_NE(tok_, nullptr);
    const Corpus c = MakeCorpus("bad");
    const TokenizeOptions o = Options(c, 1000);
    dir_ = o.out_dir;
    absl::StatusOr<TokenizeResult> r = TokenizeCorpus(env(), *tok_, o);
    ASSERT_TRUE(r.ok()) << r.status();
    manifest_ = r->manifest;
    shard_ = dir_ + "/" + manifest_.train[1].file;
  }

  absl::Status Load(bool verify) {
    TokenCorpusOptions o;
    o.verify_contents = verify;
    return LoadTokenSplits(env(), dir_, 8, o).status();
  }

  std::unique_ptr<Tokenizer> tok_;
  std::string dir_, shard_;
  TokenManifest manifest_;
};

TEST_F(BadShardsTest, AMissingShardIsNamed) {
  ASSERT_TRUE(env()->DeleteFile(shard_).ok());
  const absl::Status s = Load(false);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), shard_)) << s;
}

TEST_F(BadShardsTest, ATruncatedShardIsNamedWithTheFieldItContradicts) {
  std::string bytes = ReadAll(shard_);
  bytes.resize(bytes.size() - 2);
  ASSERT_TRUE(WriteFileAtomically(env(), shard_, bytes).ok());
  const absl::Status s = Load(false);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), shard_)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "field tokens")) << s;
}

TEST_F(BadShardsTest, AChangedShardFailsItsHashWhenVerifiedAndABadTokenFailsItsRead) {
  std::string bytes = ReadAll(shard_);
  bytes[10] = '\xff';
  bytes[11] = '\xff';  // token 5 of the shard: 65535, beyond 320
  ASSERT_TRUE(WriteFileAtomically(env(), shard_, bytes).ok());
  const absl::Status verified = Load(true);
  EXPECT_TRUE(absl::IsDataLoss(verified)) << verified;
  EXPECT_TRUE(absl::StrContains(verified.message(), shard_ + " has SHA-256")) << verified;
  EXPECT_TRUE(absl::StrContains(verified.message(), "field sha256")) << verified;
  // Unverified, its ends digest still sees the change (issue 62: another
  // tokenizer's shard of the same size trained silently).
  const absl::Status unverified = Load(false);
  EXPECT_TRUE(absl::IsDataLoss(unverified)) << unverified;
  EXPECT_TRUE(absl::StrContains(unverified.message(), shard_ + " has ends SHA-256")) << unverified;
  EXPECT_TRUE(absl::StrContains(unverified.message(), "field ends_sha256")) << unverified;
  // A change its ends digest cannot see (as in the middle of a large
  // shard: here the manifest is made to agree) loads; the window holding
  // the bad token is refused when read, naming the shard and the token, so
  // nothing trains on it.
  std::string manifest = ReadAll(dir_ + "/manifest.json");
  const size_t at = manifest.find(manifest_.train[1].ends_sha256);
  ASSERT_NE(at, std::string::npos);
  manifest.replace(at, 64, ShardEndsSha256(bytes));
  ASSERT_TRUE(WriteFileAtomically(env(), dir_ + "/manifest.json", manifest).ok());
  absl::StatusOr<TrainingData> d = LoadTokenSplits(env(), dir_, 8, {});
  ASSERT_TRUE(d.ok()) << d.status();
  BatchData b;
  const std::vector<int64_t> rows = {manifest_.train[0].tokens};  // the second shard's first window
  const absl::Status read = GatherBatch(d->train, rows, &b);
  EXPECT_TRUE(absl::IsDataLoss(read)) << read;
  EXPECT_TRUE(absl::StrContains(read.message(), shard_ + ": token 5 is 65535")) << read;
  EXPECT_TRUE(absl::StrContains(read.message(), "tokenizer.vocab_size")) << read;
}

TEST_F(BadShardsTest, ShardsOfAnotherTokenizerAreRefused) {
  TokenizerTrainOptions o;
  o.inputs = {WriteTestFile(dir_, "other.txt", TokenTestText(2000, 77))};
  o.vocab_size = 300;
  absl::StatusOr<std::string> other = TrainTokenizer(Env::Default(), o);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(WriteFileAtomically(env(), dir_ + "/tokenizer.model", *other).ok());
  const absl::Status s = Load(false);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), dir_ + "/tokenizer.model")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "field tokenizer.sha256")) << s;
}

// Issue 62: a shard of another tokenizer, cut to the same size, trained
// silently with data.tokens.verify off (the default). Its ends digest is
// checked at every start; a manifest made before there was one has every
// shard hashed whole instead.
TEST_F(BadShardsTest, AnotherTokenizersShardOfTheSameSizeIsRefusedWithoutVerify) {
  std::string bytes = ReadAll(shard_);
  for (size_t i = 0; i < bytes.size(); i += 2) bytes[i] = static_cast<char>(bytes[i] ^ 1);  // other ids, same size
  ASSERT_TRUE(WriteFileAtomically(env(), shard_, bytes).ok());
  const absl::Status s = Load(false);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), shard_ + " has ends SHA-256")) << s;
  // Without ends digests (an older manifest): hashed whole, and refused.
  nlohmann::json json = nlohmann::json::parse(ReadAll(dir_ + "/manifest.json"));
  for (const char* split : {"train", "val"}) {
    for (auto& shard : json[split]) shard.erase("ends_sha256");
  }
  const std::string manifest = json.dump(1);
  ASSERT_EQ(manifest.find("ends_sha256"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(env(), dir_ + "/manifest.json", manifest).ok());
  const absl::Status old = Load(false);
  EXPECT_TRUE(absl::IsDataLoss(old)) << old;
  EXPECT_TRUE(absl::StrContains(old.message(), shard_ + " has SHA-256")) << old;
}

TEST_F(BadShardsTest, AManifestFieldThatDoesNotParseIsNamed) {
  const std::string good = ReadAll(dir_ + "/manifest.json");
  struct Case {
    std::string from, to, field;
  };
  const std::vector<Case> cases = {
      {"\"tokens\": " + std::to_string(manifest_.train[0].tokens), "\"tokens\": -1", "train[0].tokens"},
      {"\"file\": \"train-00001.tok\"", "\"file\": \"../x\"", "train[1].file"},
      {"\"token_bytes\": 2", "\"token_bytes\": 4", "token_bytes"},
      {"shardline.tokens.v1", "shardline.tokens.v9", "format"},
      {"\"sha256\": \"" + manifest_.val[0].sha256, "\"sha256\": \"xyz", "val[0].sha256"},
  };
  for (const Case& c : cases) {
    std::string bad = good;
    const size_t at = bad.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    bad.replace(at, c.from.size(), c.to);
    ASSERT_TRUE(WriteFileAtomically(env(), dir_ + "/manifest.json", bad).ok());
    const absl::Status s = Load(false);
    EXPECT_TRUE(absl::IsDataLoss(s)) << c.field << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "field " + c.field)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), dir_ + "/manifest.json")) << s;
  }
}

// Issue 62: a manifest with tokens 2^62 of 4 bytes wrapped the size check
// to 0 and every worker died (SIGSEGV); `shardline plan` accepted it. Every
// size is checked, and the refusal names the field.
TEST(TokenManifestTest, SizesThatWouldWrapAreRefusedNamingTheField) {
  const std::string sha(64, 'a');
  auto manifest = [&](const std::string& vocab, const std::string& token_bytes, const std::string& train) {
    return absl::StrCat("{\"format\": \"shardline.tokens.v1\", \"tokenizer\": {\"file\": \"tokenizer.model\", \"sha256\": \"",
                        sha, "\", \"vocab_size\": ", vocab, "}, \"token_bytes\": ", token_bytes, ", \"train\": [", train,
                        "], \"val\": [{\"file\": \"v\", \"tokens\": 10, \"text_bytes\": 30, \"sha256\": \"", sha, "\"}]}");
  };
  auto shard = [&](const std::string& tokens, const std::string& text_bytes) {
    return absl::StrCat("{\"file\": \"t\", \"tokens\": ", tokens, ", \"text_bytes\": ", text_bytes, ", \"sha256\": \"",
                        sha, "\"}");
  };
  ASSERT_TRUE(ParseTokenManifest(manifest("320", "2", shard("1000", "3000")), "m").ok());
  struct Case {
    std::string text, field;
  };
  const std::string two62 = std::to_string(int64_t{1} << 62);
  const std::string big_shard = std::to_string(kMaxTokenShardBytes / 2);  // the largest of 2 bytes each
  std::string many_shards;
  for (int i = 0; i < 2100; ++i) many_shards += (i ? ", " : "") + shard(big_shard, "1");
  const std::vector<Case> cases = {
      {manifest("100000", "4", shard(two62, "1")), "train[0].tokens"},  // 2^62 x 4 wraps to 0
      {manifest("320", "2", shard(std::to_string(kMaxTokenShardBytes / 2 + 1), "1")), "train[0].tokens"},
      {manifest("320", "2", many_shards), "train[2048].tokens"},  // the split's sum past 2^50
      {manifest("320", "2", shard("1", two62) + ", " + shard("1", two62)), "train[0].text_bytes"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<TokenManifest> m = ParseTokenManifest(c.text, "m.json");
    ASSERT_FALSE(m.ok()) << c.field;
    EXPECT_TRUE(absl::IsDataLoss(m.status())) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), "m.json: field " + c.field)) << m.status();
  }
  EXPECT_TRUE(ParseTokenManifest(manifest("320", "2", shard(big_shard, "1")), "m").ok()) << "the largest shard";
}

}  // namespace
}  // namespace shardline
