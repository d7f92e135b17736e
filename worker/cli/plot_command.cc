// shardline plot WORKDIR --out curves.png: the job's curves through gnuplot.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/observability/metrics_writer.h"
#include "common/platform/status_macros.h"
#include "worker/cli/commands.h"
#include "common/platform/clock.h"

extern char** environ;

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline plot WORKDIR --out curves.png\n"
    "\n"
    "Draws WORKDIR/metrics.jsonl with gnuplot (apt-get install gnuplot-nox): train\n"
    "loss, test accuracy, learning rate and samples/s against the step, one\n"
    "panel each. A quick look without a browser; for live curves use the\n"
    "coordinator's /status page or TensorBoard on WORKDIR/tensorboard.\n";

constexpr absl::Duration kGnuplotTimeout = absl::Seconds(60);

// Runs argv (no shell) and waits at most `timeout`; then kills it.
absl::Status RunTool(Env* env, const std::vector<std::string>& argv, absl::Duration timeout) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (const int err = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ); err != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run ", argv[0], " (", std::strerror(err),
                                                      "); install it: apt-get install gnuplot-nox"));
  }
  const absl::Time deadline = MonotonicNow(env) + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (MonotonicNow(env) > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(absl::StrCat(argv[0], " did not finish in ", absl::FormatDuration(timeout)));
    }
    env->SleepForMicros(20'000);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " failed (exit status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                            ")"));
  }
  return absl::OkStatus();
}

// gnuplot's single-quoted string: a quote is doubled.
std::string Quoted(const std::string& s) { return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'"); }

absl::Status Plot(const Args& args) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("expected: shardline plot WORKDIR --out curves.png");
  const std::string out = args.Get("out");
  if (out.empty()) return absl::InvalidArgumentError("--out is required");
  Env* env = Env::Default();
  const std::string jsonl = args.positional[0] + "/metrics.jsonl";
  ASSIGN_OR_RETURN(std::vector<metrics::MetricRecord> records, ReadMetricRecords(env, jsonl));
  std::string train, eval;
  for (const metrics::MetricRecord& r : records) {
    auto cell = [](bool has, float v) { return has && std::isfinite(v) ? absl::StrFormat("%.9g", v) : std::string("NaN"); };
    if (r.split() == metrics::MetricRecord::train) {
      absl::StrAppend(&train, r.step(), " ", cell(r.has_loss(), r.loss()), " ", cell(r.has_lr(), r.lr()), " ",
                      cell(r.has_samples_per_second(), r.samples_per_second()), "\n");
    } else if (r.split() == metrics::MetricRecord::eval) {
      absl::StrAppend(&eval, r.step(), " ", cell(r.has_accuracy(), r.accuracy()), " ", cell(r.has_loss(), r.loss()), "\n");
    }
  }
  if (train.empty() && eval.empty()) return absl::FailedPreconditionError(absl::StrCat(jsonl, " has no train or eval lines yet"));
  char tmpl[] = "/tmp/shardline-plot-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary directory");
  const std::string tmp = tmpl;
  // gnuplot draws nothing from an empty file: a NaN row keeps a panel empty.
  RETURN_IF_ERROR(WriteFileAtomically(env, tmp + "/train.dat", train.empty() ? "0 NaN NaN NaN\n" : train));
  RETURN_IF_ERROR(WriteFileAtomically(env, tmp + "/eval.dat", eval.empty() ? "0 NaN NaN\n" : eval));
  const std::string t = Quoted(tmp + "/train.dat"), e = Quoted(tmp + "/eval.dat");
  const std::string script = absl::StrCat(
      "set terminal pngcairo size 1200,800 font 'sans,10'\n", "set output ", Quoted(out), "\n",
      "set multiplot layout 2,2 title ", Quoted(absl::StrCat("shardline: ", args.positional[0])), "\n",
      "set grid\nset key off\nset xlabel 'step'\n",
      "set title 'train loss'\nplot ", t, " using 1:2 with lines lw 2\n",
      "set title 'test accuracy'\nplot ", e, " using 1:2 with linespoints lw 2 pt 7\n",
      "set title 'learning rate'\nplot ", t, " using 1:3 with lines lw 2\n",
      "set title 'samples/s'\nplot ", t, " using 1:4 with lines lw 2\n", "unset multiplot\n");
  RETURN_IF_ERROR(WriteFileAtomically(env, tmp + "/curves.gp", script));
  const absl::Status ran = RunTool(env, {"gnuplot", tmp + "/curves.gp"}, kGnuplotTimeout);
  for (const char* f : {"/train.dat", "/eval.dat", "/curves.gp"}) std::remove((tmp + f).c_str());
  rmdir(tmp.c_str());
  RETURN_IF_ERROR(ran);
  std::printf("wrote %s (%zu train and eval points)\n", out.c_str(), records.size());
  return absl::OkStatus();
}

}  // namespace

int PlotCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"out"}, {}}, "shardline plot", &args);
  return RunCommand(parsed, args, kHelp, "shardline plot", Plot);
}

}  // namespace shardline
