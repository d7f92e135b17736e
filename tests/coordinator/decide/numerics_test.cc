// The coordinator's verdict on a worker's numerics fingerprint
// (decide/numerics.h), case by case: the first one becomes the job's; the
// job's, or one admitted before, is accepted; another one is refused under
// STRICT with a reason naming the worker, its host, both kernels and the
// fix, and admitted and recorded under RELAXED.
#include "coordinator/decide/numerics.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace shardline {
namespace {

coordinator::Numerics Of(uint64_t fingerprint, const char* kernels) {
  coordinator::Numerics n;
  n.set_fingerprint(fingerprint);
  n.set_kernels(kernels);
  return n;
}

NumericsSource From(int rank, const char* host, int64_t step) {
  NumericsSource s;
  s.rank = rank;
  s.host = host;
  s.step = step;
  s.generation = 3;
  return s;
}

TEST(NumericsVerdictTest, TheFirstReportedBecomesTheJobsAndTheSameIsAccepted) {
  coordinator::WorldHistory h;
  const NumericsVerdict first =
      JudgeNumerics(h, Of(0xabc, "OpenBLAS Haswell kernels"), From(1, "10.0.0.2", 0), config::STRICT);
  ASSERT_EQ(first.action, NumericsVerdict::kRecordJobs);
  EXPECT_EQ(first.record.numerics().fingerprint(), 0xabcu);
  EXPECT_EQ(first.record.rank(), 1);
  EXPECT_EQ(first.record.host(), "10.0.0.2");
  EXPECT_EQ(first.record.generation(), 3u);
  *h.mutable_numerics() = first.record;
  // The same bits from kernels of another name (OpenBLAS's Zen and Haswell
  // compute alike): accepted.
  EXPECT_EQ(JudgeNumerics(h, Of(0xabc, "OpenBLAS Zen kernels"), From(0, "10.0.0.1", 0), config::STRICT).action,
            NumericsVerdict::kAccept);
}

TEST(NumericsVerdictTest, AnotherFingerprintIsRefusedUnderStrictNamingBothKernelsAndTheFix) {
  coordinator::WorldHistory h;
  *h.mutable_numerics() = JudgeNumerics(h, Of(0xabc, "OpenBLAS Haswell kernels"), From(0, "10.0.0.1", 40),
                                        config::STRICT).record;
  const NumericsVerdict v =
      JudgeNumerics(h, Of(0xdef, "OpenBLAS SandyBridge kernels"), From(1, "10.0.0.7", 120), config::STRICT);
  ASSERT_EQ(v.action, NumericsVerdict::kRefuse);
  for (const char* part : {"worker rank 1 on host 10.0.0.7", "0x0000000000000def", "OpenBLAS SandyBridge kernels",
                           "0x0000000000000abc", "OpenBLAS Haswell kernels", "worker rank 0 on host 10.0.0.1",
                           "at step 40", "OPENBLAS_CORETYPE", "runtime.numerics: RELAXED"}) {
    EXPECT_TRUE(absl::StrContains(v.reason, part)) << part << " in: " << v.reason;
  }
}

TEST(NumericsVerdictTest, RelaxedAdmitsAnotherOnceAndRecordsItsStep) {
  coordinator::WorldHistory h;
  *h.mutable_numerics() = JudgeNumerics(h, Of(1, "a"), From(0, "h0", 0), config::RELAXED).record;
  const NumericsVerdict v = JudgeNumerics(h, Of(2, "b"), From(1, "h1", 300), config::RELAXED);
  ASSERT_EQ(v.action, NumericsVerdict::kRecordChange);
  EXPECT_EQ(v.record.step(), 300);
  EXPECT_TRUE(absl::StrContains(v.reason, "from step 300")) << v.reason;
  *h.add_numerics_changes() = v.record;
  EXPECT_EQ(JudgeNumerics(h, Of(2, "b"), From(1, "h1", 400), config::RELAXED).action, NumericsVerdict::kAccept)
      << "admitted before";
  EXPECT_EQ(JudgeNumerics(h, Of(1, "a"), From(0, "h0", 400), config::RELAXED).action, NumericsVerdict::kAccept);
  EXPECT_EQ(JudgeNumerics(h, Of(3, "c"), From(1, "h1", 500), config::RELAXED).action,
            NumericsVerdict::kRecordChange);
  // The job turned STRICT again (a new run of it): only the job's own passes.
  EXPECT_EQ(JudgeNumerics(h, Of(3, "c"), From(1, "h1", 500), config::STRICT).action, NumericsVerdict::kRefuse);
}

TEST(NumericsVerdictTest, FingerprintsAreSixteenHexDigits) {
  EXPECT_EQ(FingerprintHex(0), "0x0000000000000000");
  EXPECT_EQ(FingerprintHex(0xfedcba9876543210ull), "0xfedcba9876543210");
}

}  // namespace
}  // namespace shardline
