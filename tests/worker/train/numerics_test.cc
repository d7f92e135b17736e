// The numerics fingerprint (worker/train/numerics.h): the same from the
// same job on the same kernels every time; another for another precision,
// model shape, optimizer or micro-batch (what the canary covers); and the
// kernels named for people. That other kernels give another fingerprint is
// tested with real processes on other OpenBLAS core types
// (tests/e2e/numerics_test.cc).
#include "worker/train/numerics.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "common/job/config.h"
#include "worker/model/gemm.h"

namespace shardline {
namespace {

config::JobConfig Parse(const std::string& text) {
  absl::StatusOr<config::JobConfig> c = ParseConfigText(text, "test");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

InputShape Image() {
  InputShape s;
  s.height = 28;
  s.width = 28;
  s.num_classes = 10;
  return s;
}

InputShape Text(int context) {
  InputShape s;
  s.height = 1;
  s.width = context;
  s.sequence = context;
  s.num_classes = 256;
  return s;
}

// The job `c` with data.global_batch_size micro_batch on one worker: a
// micro-batch of that many examples.
uint64_t Fingerprint(config::JobConfig c, const InputShape& in, int micro_batch) {
  c.mutable_data()->set_global_batch_size(micro_batch);
  absl::StatusOr<NumericsFingerprint> n = ComputeNumerics(c, in);
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? n->fingerprint : 0;
}

TEST(NumericsTest, TheSameJobGivesTheSameFingerprintAndEachChangeAnother) {
  const char* mlp = "model { mlp { hidden_sizes: [64, 32] } } optimizer { adamw {} }";
  const config::JobConfig base = Parse(mlp);
  const uint64_t f = Fingerprint(base, Image(), 16);
  EXPECT_EQ(Fingerprint(base, Image(), 16), f) << "not a pure function of the job";
  std::set<uint64_t> seen = {f};
  auto differs = [&](uint64_t g, const char* what) { EXPECT_TRUE(seen.insert(g).second) << what; };
  differs(Fingerprint(base, Image(), 8), "another micro-batch");
  config::JobConfig wider = base;
  wider.mutable_runtime()->set_num_workers(2);
  wider.mutable_data()->set_global_batch_size(32);
  EXPECT_EQ(ComputeNumerics(wider, Image())->fingerprint, f)
      << "two workers of 16 each: the micro-batch of one worker of 16";
  differs(Fingerprint(Parse("model { mlp { hidden_sizes: [64, 31] } } optimizer { adamw {} }"), Image(), 16),
          "another shape");
  differs(Fingerprint(Parse("model { mlp { hidden_sizes: [64, 32] } } optimizer { sgd {} }"), Image(), 16),
          "another optimizer");
  const config::JobConfig gpt =
      Parse("model { gpt { context: 32 layers: 3 d_model: 32 heads: 2 mlp_ratio: 2 } } optimizer { adamw {} }");
  const uint64_t g = Fingerprint(gpt, Text(32), 4);
  differs(g, "a GPT");
  config::JobConfig deeper = gpt;
  deeper.mutable_model()->mutable_gpt()->set_layers(6);
  EXPECT_EQ(Fingerprint(deeper, Text(32), 4), g) << "the canary is one block: the depth changes no kernel";
  config::JobConfig bf16 = gpt;
  bf16.mutable_train()->set_precision(config::BF16);
  if (CheckPrecisionSupported(Precision::kBfloat16).ok()) differs(Fingerprint(bf16, Text(32), 4), "BF16");
}

// A process computes a job's fingerprint once; another job computes anew.
TEST(NumericsTest, TheMemoComputesOnceForAJobAndAgainForAnother) {
  const config::JobConfig a = Parse("model { mlp { hidden_sizes: [16] } } optimizer { sgd {} }");
  const config::JobConfig b = Parse("model { mlp { hidden_sizes: [17] } } optimizer { sgd {} }");
  NumericsMemo memo;
  bool computed = false;
  absl::StatusOr<NumericsFingerprint> first = memo.Get(a, Image(), &computed);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(computed);
  absl::StatusOr<NumericsFingerprint> again = memo.Get(a, Image(), &computed);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(computed);
  EXPECT_EQ(again->fingerprint, first->fingerprint);
  absl::StatusOr<NumericsFingerprint> other = memo.Get(b, Image(), &computed);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(computed);
  EXPECT_EQ(other->fingerprint, ComputeNumerics(b, Image())->fingerprint);
  EXPECT_NE(other->fingerprint, first->fingerprint);
  InputShape wider = Image();
  wider.width = 14;
  EXPECT_TRUE(memo.Get(b, wider, &computed).ok());
  EXPECT_TRUE(computed) << "another input is another job";
}

TEST(NumericsTest, TheKernelsAreNamedForPeople) {
  config::JobConfig c = Parse("model { mlp { hidden_sizes: [8] } } optimizer { sgd {} }");
  absl::StatusOr<NumericsFingerprint> n = ComputeNumerics(c, Image());
  ASSERT_TRUE(n.ok()) << n.status();
  for (const std::string& part : {std::string("OpenBLAS ") + BlasCoreName(), std::string(CpuMatmulIsa()),
                                  std::string("FP32 products"), std::string("1 BLAS thread")}) {
    EXPECT_TRUE(absl::StrContains(n->kernels, part)) << part << " in " << n->kernels;
  }
  c.mutable_runtime()->set_blas_threads(2);
  EXPECT_TRUE(absl::StrContains(KernelDescription(c), "2 BLAS threads")) << KernelDescription(c);
}

TEST(NumericsTest, AModelThatCannotBeBuiltIsAnErrorNamingTheField) {
  const config::JobConfig bad =
      Parse("model { gpt { context: 32 layers: 2 d_model: 30 heads: 4 } } optimizer { adamw {} }");
  absl::StatusOr<NumericsFingerprint> n = ComputeNumerics(bad, Text(32));
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(absl::StrContains(n.status().message(), "model.gpt.heads")) << n.status();
}

}  // namespace
}  // namespace shardline
