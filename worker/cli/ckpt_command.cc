// shardline ckpt list|verify|export: inspect a workdir's checkpoints.
#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/platform/args.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "common/encoding/text_escape.h"
#include "worker/checkpoint/ckpt_export.h"
#include "worker/data/tokenizer.h"
#include "common/encoding/sha256.h"
#include "worker/checkpoint/full_params.h"
#include "worker/checkpoint/safetensors.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/verify.h"
#include "worker/cli/commands.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline ckpt list DIR\n"
    "       shardline ckpt verify DIR [--step S]\n"
    "       shardline ckpt export DIR --step S|latest --out FILE.safetensors\n"
    "\n"
    "DIR is a workdir (its checkpoints are in DIR/checkpoints).\n"
    "  list    every step directory: committed or not, shards, bytes, and which\n"
    "          is the best by checkpoint.best_metric (with its value)\n"
    "  verify  re-checks every committed checkpoint (or step S): shard sizes,\n"
    "          header and per-block CRC32C against the manifest, coverage; exit 1\n"
    "          on any failure\n"
    "  export  the full parameters of a committed checkpoint as safetensors\n"
    "          (F32 tensors named layer<i>/w [in, out] and layer<i>/b); the same\n"
    "          parameters always give the same bytes; a job on token shards also\n"
    "          gets its tokenizer.model beside FILE\n";

std::string Root(const std::string& workdir) { return CheckpointRoot(workdir); }

// The numerics fingerprints a manifest's shards were computed with: "-"
// (none recorded), the one ("0x" and 16 hex digits), or "mixed (N)" for N
// different ones (runtime.numerics RELAXED: the bits of that step are not
// comparable with a run on one set of kernels).
std::string NumericsColumn(const state::CheckpointManifest& m) {
  std::vector<uint64_t> seen;
  for (const state::ShardEntry& e : m.shards()) {
    if (e.has_numerics() && std::find(seen.begin(), seen.end(), e.numerics()) == seen.end()) seen.push_back(e.numerics());
  }
  if (seen.empty()) return "-";
  if (seen.size() == 1) return absl::StrFormat("0x%016x", seen.front());
  return absl::StrCat("mixed (", seen.size(), ")");
}

absl::Status List(Env* env, const std::string& workdir) {
  const std::string root = Root(workdir);
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(root));
  std::sort(names.begin(), names.end());
  const BestRecord best = ReadBest(env, root);
  printf("%-20s %-11s %-7s %-12s %-18s %s\n", "step", "state", "shards", "bytes", "numerics", "best");
  for (const std::string& n : names) {
    int64_t step;
    if (!ParseStepDirName(n, &step)) continue;
    const std::string dir = root + "/" + n;
    const bool committed = IsCommitted(env, dir);
    ASSIGN_OR_RETURN(std::vector<std::string> files, env->GetChildren(dir));
    int shards = 0;
    int64_t bytes = 0;
    for (const std::string& f : files) {
      if (IsShardFileName(f)) {
        ++shards;
        bytes += env->GetFileSize(dir + "/" + f).value_or(0);
      }
    }
    std::string world = "?";
    std::string numerics = "-";  // none recorded
    if (committed) {
      absl::StatusOr<state::CheckpointManifest> m = ReadCommitted(env, dir);
      if (m.ok()) {
        world = absl::StrCat(m->world_size());
        numerics = NumericsColumn(*m);
      }
    }
    const std::string best_text = step == best.step ? absl::StrCat("best (", best.value_text, ")") : "";
    printf("%-20ld %-11s %-7s %-12ld %-18s %s\n", static_cast<long>(step), committed ? "committed" : "uncommitted",
           absl::StrCat(shards, "/", world).c_str(), static_cast<long>(bytes), numerics.c_str(), best_text.c_str());
  }
  // Checkpoints found bad, set aside in checkpoints/quarantine: never
  // restored; listed so nobody mistakes the gap for a lost save.
  ASSIGN_OR_RETURN(auto quarantined, QuarantinedSteps(env, root));
  for (const auto& [step, why] : quarantined) {
    printf("%-20ld %-11s %s\n", static_cast<long>(step), "bad", EscapeControl(why, 200).c_str());
  }
  return absl::OkStatus();
}

// A step that retention deletes while it is verified was whole when it was
// committed and is simply gone: said, not counted as a failure.
absl::Status Verify(Env* env, const std::string& workdir, const std::string& step) {
  const std::string root = Root(workdir);
  if (!step.empty()) {
    return ReadCheckpoint(env, root, step, [&](int64_t s) -> absl::Status {
             ASSIGN_OR_RETURN(VerifiedCheckpoint r, VerifyCheckpoint(env, StepDir(root, s)));
             printf("step %ld: OK (%zu shards)\n", static_cast<long>(s), r.headers.size());
             return absl::OkStatus();
           }).status();
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(env, root));
  if (steps.empty()) return NoCommittedCheckpointYet(root);
  int failed = 0, checked = 0;
  for (int64_t s : steps) {
    absl::StatusOr<VerifiedCheckpoint> r = VerifyCheckpoint(env, StepDir(root, s));
    if (r.ok()) {
      printf("step %ld: OK (%zu shards)\n", static_cast<long>(s), r->headers.size());
    } else if (!IsCommitted(env, StepDir(root, s))) {
      printf("step %ld: deleted by retention while being verified\n", static_cast<long>(s));
      continue;
    } else {
      printf("step %ld: FAILED: %s\n", static_cast<long>(s), EscapeControl(r.status().message()).c_str());
      ++failed;
    }
    ++checked;
  }
  if (failed > 0) return absl::DataLossError(absl::StrCat(failed, " of ", checked, " checkpoints failed verification"));
  return absl::OkStatus();
}

// The tokenizer.model the workdir kept (a job trained on token shards keeps
// it there), read once; empty if there is none.
absl::StatusOr<std::string> KeptTokenizer(Env* env, const std::string& workdir) {
  const std::string kept = absl::StrCat(workdir, "/", kTokenizerFile);
  if (!env->FileExists(kept)) return std::string();
  absl::StatusOr<std::string> model = env->ReadFile(kept, kMaxTokenizerFileBytes);
  if (!model.ok()) return Annotate(model.status(), "the tokenizer the workdir kept");
  return model;
}

// Issue 62: an export replaced a tokenizer.model already beside --out
// without a word (another model's export in the same directory lost its
// tokenizer). Refused before anything is written, unless it is the same.
absl::Status CheckTokenizerBeside(Env* env, const std::string& workdir, const std::string& ours,
                                  const std::string& out) {
  const std::string beside = absl::StrCat(DirName(out), "/", kTokenizerFile);
  if (ours.empty() || !env->FileExists(beside)) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string there, env->ReadFile(beside, kMaxTokenizerFileBytes));
  if (there == ours) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      beside, " exists and is another tokenizer (SHA-256 ", Sha256Hex(there), ") than the one ", workdir,
      " trained with (", Sha256Hex(ours), "); the export's tokenizer goes beside it, so export into another "
      "directory or move that file first"));
}

absl::Status Export(Env* env, const std::string& workdir, const std::string& step, const std::string& out) {
  if (out.empty()) return absl::InvalidArgumentError("--out is required");
  ASSIGN_OR_RETURN(const std::string ours, KeptTokenizer(env, workdir));
  RETURN_IF_ERROR(CheckTokenizerBeside(env, workdir, ours, out));
  const std::string root = Root(workdir);
  ExportedCheckpoint done;
  ASSIGN_OR_RETURN(const int64_t s, ReadCheckpoint(env, root, step, [&](int64_t s) -> absl::Status {
    ExportOptions options;
    options.metadata = {{"format", "pt"}, {"step", absl::StrCat(s)}};
    ASSIGN_OR_RETURN(done, ExportCheckpoint(env, StepDir(root, s), out, options));
    return absl::OkStatus();
  }));
  printf("exported step %ld: %ld tensors, %ld parameters to %s\n", static_cast<long>(s), static_cast<long>(done.tensors),
         static_cast<long>(done.parameters), out.c_str());
  if (done.tokenizer_sha256.empty()) return absl::OkStatus();
  // Trained on token shards: the tokenizer goes beside the export, as the
  // workdir kept it and the checkpoint names it.
  const std::string kept = absl::StrCat(workdir, "/", kTokenizerFile);
  if (ours.empty()) {
    return absl::NotFoundError(
        absl::StrCat(kept, " is missing: the tokenizer step ", s, " was trained with (", done.tokenizer_sha256, ")"));
  }
  if (const std::string sha256 = Sha256Hex(ours); sha256 != done.tokenizer_sha256) {
    return absl::DataLossError(absl::StrCat(kept, " has SHA-256 ", sha256, "; step ", s,
                                            " was trained with tokenizer ", done.tokenizer_sha256));
  }
  const std::string beside = absl::StrCat(DirName(out), "/", kTokenizerFile);
  RETURN_IF_ERROR(WriteFileAtomically(env, beside, ours, /*durable=*/true));
  printf("tokenizer %s to %s\n", done.tokenizer_sha256.c_str(), beside.c_str());
  return absl::OkStatus();
}

absl::Status Ckpt(const Args& args) {
  if (args.positional.size() != 2) {
    return absl::InvalidArgumentError("expected: shardline ckpt list|verify|export DIR (see --help)");
  }
  Env* env = Env::Default();
  const std::string& verb = args.positional[0];
  const std::string& dir = args.positional[1];
  if (verb == "list") return List(env, dir);
  if (verb == "verify") return Verify(env, dir, args.Get("step"));
  if (verb == "export") return Export(env, dir, args.Get("step"), args.Get("out"));
  return absl::InvalidArgumentError(absl::StrCat("unknown ckpt command '", verb, "' (list, verify, export)"));
}

}  // namespace

int CkptCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"step", "out"}, {}}, "shardline ckpt", &args);
  return RunCommand(parsed, args, kHelp, "shardline ckpt", Ckpt);
}

}  // namespace shardline
