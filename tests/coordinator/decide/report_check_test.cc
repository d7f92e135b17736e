#include "coordinator/decide/report_check.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/checkpoint/shard_file.h"

namespace shardline {
namespace {

coordinator::WorkerReport Good(int rank) {
  coordinator::WorkerReport r;
  r.set_rank(rank);
  r.set_generation(3);
  r.set_steps_done(120);
  r.set_total_steps(1000);
  coordinator::SavedShard* s = r.add_saved();
  s->set_step(100);
  s->set_world_size(4);
  s->set_file(ShardFileName(rank, 4));
  s->set_size(12345);
  if (rank == 0) r.add_metrics()->set_step(120);
  return r;
}

TEST(ReportCheckTest, AWellFormedReportPasses) {
  ReportLimits limits;
  limits.world_size = 4;
  for (int rank : {0, 3}) EXPECT_TRUE(CheckReport(Good(rank), limits, ShardFileName(rank, 4)).ok()) << rank;
}

TEST(ReportCheckTest, EveryFieldOutOfBoundsIsRefusedNamingTheRank) {
  ReportLimits limits;
  limits.world_size = 4;
  const std::vector<std::pair<std::string, std::function<void(coordinator::WorkerReport*)>>> cases = {
      {"negative steps", [](auto* r) { r->set_steps_done(-1); }},
      {"steps past int32", [](auto* r) { r->set_total_steps(int64_t{1} << 40); }},
      {"steps past the end", [](auto* r) { r->set_steps_done(1001); }},
      {"negative bad step", [](auto* r) { r->set_bad_checkpoint_step(-5); }},
      {"huge fatal error", [](auto* r) { r->set_fatal_error(std::string(1 << 20, 'x')); }},
      {"huge watchdog text", [](auto* r) { r->set_watchdog(std::string(1 << 20, 'x')); }},
      {"huge kernels text", [](auto* r) { r->mutable_numerics()->set_kernels(std::string(1 << 20, 'x')); }},
      {"path in a file name", [](auto* r) { r->mutable_saved(0)->set_file("../../../../etc/passwd"); }},
      {"another rank's file", [](auto* r) { r->mutable_saved(0)->set_file(ShardFileName(1, 4)); }},
      {"another world", [](auto* r) { r->mutable_saved(0)->set_world_size(2); }},
      {"shard of step 0", [](auto* r) { r->mutable_saved(0)->set_step(0); }},
      {"empty shard", [](auto* r) { r->mutable_saved(0)->set_size(0); }},
      {"too many shards",
       [](auto* r) {
         for (int i = 0; i < 100; ++i) *r->add_saved() = r->saved(0);
       }},
      {"negative metric step", [](auto* r) { r->mutable_metrics(0)->set_step(-1); }},
  };
  for (const auto& [name, corrupt] : cases) {
    coordinator::WorkerReport r = Good(0);
    corrupt(&r);
    const absl::Status s = CheckReport(r, limits, ShardFileName(0, 4));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find("rank 0"), std::string::npos) << name << ": " << s;
  }
  coordinator::WorkerReport r = Good(2);
  r.add_metrics()->set_step(1);
  EXPECT_EQ(CheckReport(r, limits, ShardFileName(2, 4)).code(), absl::StatusCode::kInvalidArgument) << "metrics from rank 2";
}

// Issue 33, finding 5: ten 8 MiB addresses added 80 MiB to the log, and a
// newline in one forged a "job failed" line.
TEST(ReportCheckTest, ARegistersTextsAreBoundedAndNeverRepeated) {
  coordinator::RegisterRequest r;
  r.set_transport_address("127.0.0.1:7001");
  r.set_reason("ring step 3: peer 127.0.0.1:7002 unavailable");
  EXPECT_TRUE(CheckRegisterRequest(r, {}).ok());
  const std::vector<std::string> bad_addresses = {"", std::string(8 << 20, 'a'), "host:1\nE1126 job failed",
                                                  "h\x1b[31m:1", "h :1", std::string(256, 'h')};
  for (const std::string& address : bad_addresses) {
    coordinator::RegisterRequest b = r;
    b.set_transport_address(address);
    const absl::Status s = CheckRegisterRequest(b, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address.size();
    EXPECT_NE(s.message().find("transport_address"), std::string::npos) << s;
    EXPECT_LT(s.message().size(), 200u) << "the refusal repeats the address";
  }
  coordinator::RegisterRequest b = r;
  b.set_reason(std::string(17 << 10, 'r'));
  EXPECT_NE(CheckRegisterRequest(b, {}).message().find("reason"), std::string::npos);
  b = r;
  for (int i = 0; i < 4097; ++i) b.add_held_snapshots();
  EXPECT_NE(CheckRegisterRequest(b, {}).message().find("held snapshots"), std::string::npos);
}

}  // namespace
}  // namespace shardline
