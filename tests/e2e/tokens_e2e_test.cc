// Token shards end to end, as a user runs them: the Austen text written by
// `shardline data austen`, a SentencePiece vocabulary trained on it and the
// text tokenized into several shards by `shardline data tokenizer` and
// `data tokenize`, deploy/configs/austen_gpt_tokens.textproto shrunk to a
// few seconds' model on two workers. It learns; a SIGKILLed worker resumes
// bit for bit; the two-worker checkpoint reshards onto three, bit for bit
// through a kill as well; the workdir keeps the tokenizer, export writes it
// beside the file and sample decodes with it; shards of another tokenizer
// are refused before training, naming it.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/encoding/sha256.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

std::vector<std::string> SmallRun(const std::string& shards) {
  return {"data.tokens.dir=" + shards, "model.gpt.context=32", "model.gpt.layers=2", "model.gpt.d_model=32",
          "model.gpt.heads=2", "model.gpt.mlp_ratio=2", "data.global_batch_size=16", "train.total_steps=120",
          "checkpoint.every_steps=40", "train.log_every=40", "train.eval_every=0", "schedule.warmup_steps=20"};
}

void RunOk(const std::vector<std::string>& argv) {
  Subprocess s(argv);
  ASSERT_EQ(s.Wait(absl::Seconds(120)), 0) << s.Output();
}

std::string Sample(const std::vector<std::string>& from) {
  std::vector<std::string> argv = {BinPath("shardline"), "sample"};
  argv.insert(argv.end(), from.begin(), from.end());
  argv.insert(argv.end(), {"--prompt", "It is a truth", "--tokens", "30", "--seed", "3"});
  Subprocess s(argv);
  EXPECT_EQ(s.Wait(absl::Seconds(60)), 0) << s.Output();
  return s.Output();
}

TEST(TokensE2eTest, TrainsFromShardsResumesAndReshardsBitForBitAndSamplesWithItsTokenizer) {
  const std::string data = FreshDir("tokens_data");
  const std::string shardline = BinPath("shardline");
  RunOk({shardline, "data", "austen", "--out", data});
  RunOk({shardline, "data", "tokenizer", "--input", data + "/train.txt", "--vocab_size", "512", "--out", data + "/spm"});
  RunOk({shardline, "data", "tokenize", "--tokenizer", data + "/spm/tokenizer.model", "--input", data + "/train.txt",
       "--val", data + "/val.txt", "--shard_tokens", "400000", "--out", data + "/shards"});
  const std::string manifest = ReadAll(data + "/shards/manifest.json");
  EXPECT_TRUE(absl::StrContains(manifest, "train-00002.tok")) << "windows should cross shard ends: " << manifest;
  const std::string config = ConfigPath("austen_gpt_tokens");
  const std::vector<std::string> run = SmallRun(data + "/shards");

  const std::string clean = FreshDir("tokens_clean");
  Subprocess a(LaunchArgv(clean, 2, run, 0, config));
  ASSERT_EQ(a.Wait(absl::Seconds(300)), 0) << a.Output();
  const std::vector<std::string> evals = SplitLines(clean + "/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  // Uniform over 512 tokens of about 1.9 bytes is 4.7 bits per byte; 120
  // small steps learn the pieces' frequencies.
  EXPECT_LT(JsonField(evals.back(), "bits_per_byte"), 4.2) << evals.back();
  EXPECT_GT(JsonField(evals.back(), "bits_per_byte"), 1.0) << evals.back();
  const std::string log0 = ReadAll(clean + "/logs/worker-0.log");
  EXPECT_TRUE(absl::StrContains(log0, "final validation next-token accuracy")) << log0;
  EXPECT_EQ(ReadAll(clean + "/tokenizer.model"), ReadAll(data + "/spm/tokenizer.model"));
  const std::vector<float> want = FinalState(clean, 120, 2);
  ASSERT_FALSE(want.empty());

  // A worker killed while saving step 80 (its own crash point): restored
  // from disk, the uninterrupted run's bits.
  const std::string killed = FreshDir("tokens_killed");
  Subprocess b(LaunchArgv(killed, 2, run, /*max_restarts=*/2, config),
               {"SHARDLINE_CRASH_AT=before_shard_rename:80:" + killed + "/crashed"});
  ASSERT_EQ(b.Wait(absl::Seconds(300)), 0) << b.Output();
  EXPECT_TRUE(Env::Default()->FileExists(killed + "/crashed")) << "the crash point never fired";
  EXPECT_TRUE(SameBits(FinalState(killed, 120, 2), want)) << "a killed run on token shards ends with other bits";

  // 2 -> 3: the two-worker checkpoint of step 40 resharded onto three
  // workers, once straight and once through a kill at step 80: the same bits.
  std::vector<std::string> grown = run;
  grown.insert(grown.end(), {"runtime.num_workers=3", "checkpoint.resume_from=" + clean, "checkpoint.resume_step=40"});
  const std::string three = FreshDir("tokens_three");
  Subprocess c(LaunchArgv(three, 3, grown, 0, config));
  ASSERT_EQ(c.Wait(absl::Seconds(300)), 0) << c.Output();
  EXPECT_TRUE(absl::StrContains(ReadAll(three + "/logs/worker-0.log"), "restored step 40")) << c.Output();
  const std::vector<float> want3 = FinalState(three, 120, 3);
  ASSERT_FALSE(want3.empty());
  const std::string three_killed = FreshDir("tokens_three_killed");
  Subprocess d(LaunchArgv(three_killed, 3, grown, /*max_restarts=*/2, config),
               {"SHARDLINE_CRASH_AT=before_shard_rename:80:" + three_killed + "/crashed"});
  ASSERT_EQ(d.Wait(absl::Seconds(300)), 0) << d.Output();
  EXPECT_TRUE(Env::Default()->FileExists(three_killed + "/crashed")) << "the crash point never fired";
  EXPECT_TRUE(SameBits(FinalState(three_killed, 120, 3), want3)) << "a resharded run ends with other bits";

  // Sampling decodes with the workdir's tokenizer; the export carries it.
  const std::string s1 = Sample({"--workdir", clean});
  EXPECT_TRUE(absl::StartsWith(s1, "It is a truth")) << s1;
  EXPECT_GT(s1.size(), std::string("It is a truth").size() + 30) << "30 tokens of a subword vocabulary: " << s1;
  EXPECT_EQ(Sample({"--workdir", clean}), s1);
  const std::string exported = FreshDir("tokens_export");
  ASSERT_TRUE(Env::Default()->CreateDirs(exported).ok());
  const std::string out = exported + "/gpt.safetensors";
  RunOk({shardline, "ckpt", "export", clean, "--step", "latest", "--out", out});
  EXPECT_EQ(ReadAll(exported + "/tokenizer.model"), ReadAll(data + "/spm/tokenizer.model"));
  EXPECT_EQ(Sample({"--safetensors", out, "--config", clean + "/config.textproto"}), s1);

  // Shards whose tokenizer is not the manifest's: refused before training,
  // naming the file and the field.
  const std::string other = FreshDir("tokens_other");
  RunOk({shardline, "data", "tokenizer", "--input", data + "/val.txt", "--vocab_size", "512", "--out", other});

  // Issue 62: sampling with another tokenizer of the same size decoded
  // nonsense without a word; an export replaced another tokenizer.model
  // beside its --out. Both refused, naming the files and the SHA-256s.
  for (const std::vector<std::string>& from :
       {std::vector<std::string>{"--workdir", clean}, std::vector<std::string>{"--safetensors", out, "--config",
                                                                            clean + "/config.textproto"}}) {
    std::vector<std::string> argv = {shardline, "sample", "--tokenizer", other + "/tokenizer.model", "--tokens", "5"};
    argv.insert(argv.end(), from.begin(), from.end());
    Subprocess swapped_sample(argv);
    EXPECT_EQ(swapped_sample.Wait(absl::Seconds(60)), 1) << swapped_sample.Output();
    EXPECT_TRUE(absl::StrContains(swapped_sample.Output(), "tokenizer " + other + "/tokenizer.model has SHA-256"))
        << swapped_sample.Output();
    EXPECT_TRUE(absl::StrContains(swapped_sample.Output(), "was trained with tokenizer")) << swapped_sample.Output();
  }
  const std::string crowded = FreshDir("tokens_export_crowded");
  ASSERT_TRUE(Env::Default()->CreateDirs(crowded).ok());
  RunOk({"/bin/cp", other + "/tokenizer.model", crowded + "/tokenizer.model"});
  Subprocess overwrite({shardline, "ckpt", "export", clean, "--out", crowded + "/gpt.safetensors"});
  EXPECT_EQ(overwrite.Wait(absl::Seconds(60)), 1) << overwrite.Output();
  EXPECT_TRUE(absl::StrContains(overwrite.Output(), crowded + "/tokenizer.model exists and is another tokenizer"))
      << overwrite.Output();
  EXPECT_EQ(ReadAll(crowded + "/tokenizer.model"), ReadAll(other + "/tokenizer.model"));
  EXPECT_FALSE(Env::Default()->FileExists(crowded + "/gpt.safetensors"));
  RunOk({shardline, "ckpt", "export", clean, "--out", exported + "/again.safetensors"});  // the same one: fine
  RunOk({"/bin/cp", "-r", data + "/shards", other + "/shards"});
  RunOk({"/bin/cp", other + "/tokenizer.model", other + "/shards/tokenizer.model"});
  std::vector<std::string> swapped = run;
  swapped[0] = "data.tokens.dir=" + other + "/shards";
  const std::string refused = FreshDir("tokens_refused");
  std::vector<std::string> argv = {shardline, "train", "--config", config, "--workdir", refused};
  for (const std::string& s : swapped) argv.insert(argv.end(), {"--set", s});
  Subprocess e(argv);
  EXPECT_EQ(e.Wait(absl::Seconds(120)), 1) << e.Output();
  EXPECT_TRUE(absl::StrContains(e.Output(), other + "/shards/tokenizer.model")) << e.Output();
  EXPECT_TRUE(absl::StrContains(e.Output(), "field tokenizer.sha256")) << e.Output();
  EXPECT_FALSE(Env::Default()->FileExists(refused + "/checkpoints/step_00000040")) << "it trained on them";

  // The job's checkpoint resumed onto shards of another tokenizer (same
  // vocabulary size): refused, naming both tokenizers.
  RunOk({shardline, "data", "tokenize", "--tokenizer", other + "/tokenizer.model", "--input", data + "/train.txt",
       "--val", data + "/val.txt", "--out", other + "/retokenized"});
  std::vector<std::string> resumed = {shardline, "train", "--config", config, "--workdir", FreshDir("tokens_resumed")};
  std::vector<std::string> sets = run;
  sets[0] = "data.tokens.dir=" + other + "/retokenized";
  sets.insert(sets.end(), {"runtime.num_workers=1", "checkpoint.resume_from=" + clean});
  for (const std::string& s : sets) resumed.insert(resumed.end(), {"--set", s});
  Subprocess f(resumed);
  EXPECT_EQ(f.Wait(absl::Seconds(120)), 1) << f.Output();
  EXPECT_TRUE(absl::StrContains(f.Output(), "trained on tokenizer")) << f.Output();
}

// Issue 62: a manifest whose tokens x token_bytes wraps 64 bits (2^62
// tokens of 4 bytes: 0) passed the size check against an empty shard, so
// every worker died (SIGSEGV) and `shardline plan` accepted it. Now every
// process refuses it by itself, exit 1, naming the file and the field.
TEST(TokensE2eTest, AManifestWhoseSizesWrapIsRefusedByEveryCommandNamingTheField) {
  const std::string shards = FreshDir("tokens_wrapped");
  ASSERT_TRUE(Env::Default()->CreateDirs(shards).ok());
  const std::string model = "not a real tokenizer: the manifest is refused before it is read";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), shards + "/tokenizer.model", model).ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), shards + "/train-00000.tok", "").ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), shards + "/val-00000.tok", std::string(400, '\0')).ok());
  const std::string sha(64, '0');
  ASSERT_TRUE(WriteFileAtomically(
                  Env::Default(), shards + "/manifest.json",
                  absl::StrCat("{\"format\": \"shardline.tokens.v1\", \"tokenizer\": {\"file\": \"tokenizer.model\", "
                               "\"sha256\": \"", Sha256Hex(model), "\", \"vocab_size\": 100000}, \"token_bytes\": 4, "
                               "\"train\": [{\"file\": \"train-00000.tok\", \"tokens\": ", int64_t{1} << 62,
                               ", \"text_bytes\": 1, \"sha256\": \"", sha, "\"}], \"val\": [{\"file\": \"val-00000.tok\", "
                               "\"tokens\": 100, \"text_bytes\": 300, \"sha256\": \"", sha, "\"}]}"))
                  .ok());
  const std::string config = ConfigPath("austen_gpt_tokens");
  const std::vector<std::string> run = SmallRun(shards);
  auto expect_refused = [&](std::vector<std::string> argv) {
    for (const std::string& s : run) argv.insert(argv.end(), {"--set", s});
    Subprocess p(argv);
    EXPECT_EQ(p.Wait(absl::Seconds(120)), 1) << p.Output();
    EXPECT_TRUE(absl::StrContains(p.Output(), shards + "/manifest.json: field train[0].tokens")) << p.Output();
    EXPECT_FALSE(absl::StrContains(p.Output(), "SIGSEGV")) << p.Output();
    EXPECT_FALSE(absl::StrContains(p.Output(), "SIGABRT")) << p.Output();
  };
  expect_refused({BinPath("shardline"), "plan", "--config", config, "--workers", "2"});
  expect_refused({BinPath("shardline"), "train", "--config", config, "--workdir", FreshDir("tokens_wrapped_train")});
  std::vector<std::string> launch = LaunchArgv(FreshDir("tokens_wrapped_launch"), 2, {}, 0, config);
  expect_refused(launch);
}

}  // namespace
}  // namespace shardline
