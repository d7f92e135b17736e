// The SentencePiece tokenizer (through its helper process): training is
// deterministic, every byte sequence round-trips, a text's ids are its
// lines' ids, and a file that is not a model is named.
#include "worker/data/tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/worker/data/token_test_util.h"

namespace shardline {
namespace {

TEST(TokenizerTest, TrainingTheSameInputsTwiceGivesTheSameModel) {
  const std::string dir = TokenTestDir("deterministic");
  TokenizerTrainOptions o;
  o.inputs = {WriteTestFile(dir, "corpus.txt", TokenTestText(4000, 1))};
  o.vocab_size = 320;
  absl::StatusOr<std::string> again = TrainTokenizer(Env::Default(), o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, TokenTestModel());
  o.vocab_size = 330;
  absl::StatusOr<std::string> other = TrainTokenizer(Env::Default(), o);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*other, TokenTestModel());
  o.model_type = "bpe";
  absl::StatusOr<std::string> bpe = TrainTokenizer(Env::Default(), o);
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  auto t = Tokenizer::FromModel(Env::Default(), *bpe, "bpe");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 330);
}

TEST(TokenizerTest, EveryByteSequenceRoundTrips) {
  std::unique_ptr<Tokenizer> tok = TokenTestTokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 320);
  std::vector<std::string> texts = {
      "", "\n", "the sister of Elinor\n", "  two  spaces and a tab\t\n\n\n",
      std::string("nul\0byte", 8), "invalid \xff\xfe utf-8 \xc3", "caf\xc3\xa9 \xe2\x82\xac",
      "U+2581 \xe2\x96\x81 is not a space", "\xe2\x96\x81\xe2\x96", "no newline at the end"};
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  texts.push_back(all);
  uint32_t x = 7;
  std::string noise;
  for (int i = 0; i < 5000; ++i) {
    x = x * 1664525u + 1013904223u;
    noise.push_back(static_cast<char>(x >> 24));
  }
  texts.push_back(noise);
  texts.push_back(TokenTestText(300, 99));
  for (const std::string& text : texts) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->Encode(text, &ids).ok());
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << id;
    absl::StatusOr<std::string> back = tok->Decode(ids);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, text) << "ids " << ids.size();
  }
  // Subword pieces do compress text like the corpus.
  const std::string words = TokenTestText(300, 99);
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok->Encode(words, &ids).ok());
  EXPECT_LT(ids.size() * 2, words.size());
}

TEST(TokenizerTest, ATextsIdsAreItsLinesIdsAndEncodeLinesSaysWhereEachEnds) {
  std::unique_ptr<Tokenizer> tok = TokenTestTokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = TokenTestText(500, 5) + "a last line \xff without a newline";
  std::vector<int32_t> whole, joined;
  std::vector<size_t> ends;
  ASSERT_TRUE(tok->EncodeLines(text, &whole, &ends).ok());
  size_t begin = 0, first = 0;
  ASSERT_EQ(ends.size(), 501u);
  for (size_t k = 0; k < ends.size(); ++k) {
    size_t end = text.find('\n', begin);
    end = end == std::string::npos ? text.size() : end + 1;
    std::vector<int32_t> line;
    ASSERT_TRUE(tok->Encode(text.substr(begin, end - begin), &line).ok());
    joined.insert(joined.end(), line.begin(), line.end());
    EXPECT_EQ(std::vector<int32_t>(whole.begin() + static_cast<long>(first), whole.begin() + static_cast<long>(ends[k])),
              line)
        << "line " << k;
    first = ends[k];
    begin = end;
  }
  EXPECT_EQ(joined, whole);
}

TEST(TokenizerTest, AFileThatIsNotAModelIsNamedAndAnIdOutsideTheVocabularyIsRefused) {
  const std::string dir = TokenTestDir("bad_model");
  const std::string path = WriteTestFile(dir, "tokenizer.model", "this is not a sentencepiece model");
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load(Env::Default(), path);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), path)) << t.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> missing = Tokenizer::Load(Env::Default(), dir + "/none.model");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();

  std::unique_ptr<Tokenizer> tok = TokenTestTokenizer();
  ASSERT_NE(tok, nullptr);
  absl::StatusOr<std::string> bad = tok->Decode({5, 320});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "token 1 is id 320")) << bad.status();

  TokenizerTrainOptions o;
  o.inputs = {WriteTestFile(dir, "c.txt", TokenTestText(50, 3))};
  o.vocab_size = 100;
  absl::StatusOr<std::string> small = TrainTokenizer(Env::Default(), o);
  EXPECT_TRUE(absl::StrContains(small.status().message(), "--vocab_size 100")) << small.status();
  o.vocab_size = 4000;  // more than 50 lines hold
  absl::StatusOr<std::string> large = TrainTokenizer(Env::Default(), o);
  ASSERT_FALSE(large.ok());
  EXPECT_TRUE(absl::StrContains(large.status().message(), "SentencePiece says")) << large.status();
}

}  // namespace
}  // namespace shardline
