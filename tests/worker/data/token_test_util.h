// A small corpus and tokenizer for the token tests: deterministic text of
// words and lines (with a few bytes SentencePiece alone would not
// round-trip), and a unigram model of 320 pieces trained on it once.
#ifndef SHARDLINE_TESTS_WORKER_DATA_TOKEN_TEST_UTIL_H_
#define SHARDLINE_TESTS_WORKER_DATA_TOKEN_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "common/platform/env.h"
#include "worker/data/tokenizer.h"

namespace shardline {

// Per process: ctest runs a binary's tests as processes side by side.
inline std::string TokenTestDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/tokens_" + std::to_string(getpid()) + "_" + name;
  EXPECT_TRUE(Env::Default()->DeleteRecursively(dir).ok());
  EXPECT_TRUE(Env::Default()->CreateDirs(dir).ok());
  return dir;
}

// `lines` lines of words drawn by a fixed linear congruential generator.
inline std::string TokenTestText(int lines, uint32_t seed) {
  static const char* kWords[] = {"the",   "of",     "and",  "to",    "a",       "in",   "was",  "her",
                                 "it",    "she",    "that", "be",    "Elinor",  "Mr.",  "Darcy", "not",
                                 "would", "could",  "had",  "with",  "sister",  "very", "said", "much",
                                 "Emma",  "letter", "no",   "great", "happiness", "1811", "   ", "\t"};
  std::string text;
  uint32_t x = seed;
  for (int l = 0; l < lines; ++l) {
    x = x * 1664525u + 1013904223u;
    const int words = 3 + static_cast<int>((x >> 16) % 12);
    for (int w = 0; w < words; ++w) {
      x = x * 1664525u + 1013904223u;
      if (w > 0) text += ' ';
      text += kWords[(x >> 16) % (sizeof(kWords) / sizeof(kWords[0]))];
    }
    text += (x >> 8) % 5 == 0 ? ".\n" : ",\n";
  }
  return text;
}

inline std::string WriteTestFile(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(WriteFileAtomically(Env::Default(), path, bytes).ok());
  return path;
}

// The model trained on TokenTestText(4000, 1), once per test binary.
inline const std::string& TokenTestModel() {
  static const std::string* model = [] {
    const std::string dir = TokenTestDir("model");
    TokenizerTrainOptions o;
    o.inputs = {WriteTestFile(dir, "corpus.txt", TokenTestText(4000, 1))};
    o.vocab_size = 320;
    absl::StatusOr<std::string> m = TrainTokenizer(Env::Default(), o);
    EXPECT_TRUE(m.ok()) << m.status();
    return new std::string(m.value_or(""));
  }();
  return *model;
}

inline std::unique_ptr<Tokenizer> TokenTestTokenizer() {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::FromModel(Env::Default(), TokenTestModel(), "the test model");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_DATA_TOKEN_TEST_UTIL_H_
