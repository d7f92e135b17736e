// `shardline`: the user-facing tool. Dispatches to a subcommand.
#include <cstdio>
#include <cstring>

#include "common/platform/process_init.h"
#include "common/encoding/text_escape.h"
#include "worker/cli/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: shardline <command> [flags]\n"
    "\n"
    "commands:\n"
    "  launch  a coordinator and N workers on this host:\n"
    "          shardline launch --config deploy/configs/fmnist_mlp.textproto --workers 2 --workdir DIR\n"
    "                           [--max_restarts K] [--set a.b=value ...]\n"
    "  ckpt    inspect checkpoints: shardline ckpt list|verify|export DIR\n"
    "  status  the job at a glance: shardline status --coordinator HOST:PORT | --workdir DIR\n"
    "  trace   one Chrome/Perfetto trace of the traced steps: shardline trace merge DIR --out trace.json\n"
    "  plot    the curves as a PNG (gnuplot): shardline plot DIR --out curves.png\n"
    "  credential  a rank's credential from the job token: shardline credential --rank R --out FILE\n"
    "  data    the language models' text corpus: shardline data austen --out DIR\n"
    "  sample  text from a GPT's checkpoint: shardline sample --workdir DIR --prompt TEXT [--tokens N]\n"
    "  plan    each worker's memory, term by term, before a job starts:\n"
    "          shardline plan --config F --workers N [--set a.b=value ...]\n"
    "  numerics  this host's numerics fingerprint for a job, to compare hosts:\n"
    "          shardline numerics --config F --workers N [--set a.b=value ...]\n"
    "  port    free TCP ports a restarted server can bind again: shardline port [--count N]\n"
    "  train   train in this process (a world of one):\n"
    "          shardline train --config deploy/configs/fmnist_mlp.textproto --workdir DIR\n"
    "                          [--set a.b=value ...]\n"
    "\n"
    "Run 'shardline <command> --help' for the command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  shardline::InitProcess(argv[0]);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "train") == 0) return shardline::TrainCommand(argc, argv);
  if (std::strcmp(argv[1], "launch") == 0) return shardline::LaunchCommand(argc, argv);
  if (std::strcmp(argv[1], "ckpt") == 0) return shardline::CkptCommand(argc, argv);
  if (std::strcmp(argv[1], "status") == 0) return shardline::StatusCommand(argc, argv);
  if (std::strcmp(argv[1], "trace") == 0) return shardline::TraceCommand(argc, argv);
  if (std::strcmp(argv[1], "plot") == 0) return shardline::PlotCommand(argc, argv);
  if (std::strcmp(argv[1], "port") == 0) return shardline::PortCommand(argc, argv);
  if (std::strcmp(argv[1], "data") == 0) return shardline::DataCommand(argc, argv);
  if (std::strcmp(argv[1], "plan") == 0) return shardline::PlanCommand(argc, argv);
  if (std::strcmp(argv[1], "numerics") == 0) return shardline::NumericsCommand(argc, argv);
  if (std::strcmp(argv[1], "sample") == 0) return shardline::SampleCommand(argc, argv);
  if (std::strcmp(argv[1], "credential") == 0) return shardline::CredentialCommand(argc, argv);
  std::fprintf(stderr, "shardline: unknown command '%s'\n\n%s", shardline::EscapeControl(argv[1], 200).c_str(), kUsage);
  return 2;
}
