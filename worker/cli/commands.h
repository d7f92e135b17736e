// Subcommands of the `shardline` tool. Each returns the process exit code.
#ifndef SHARDLINE_WORKER_CLI_COMMANDS_H_
#define SHARDLINE_WORKER_CLI_COMMANDS_H_

namespace shardline {

// shardline train --config F --workdir DIR [--set a.b=value ...]
int TrainCommand(int argc, char** argv);

// shardline launch --config F --workers N --workdir DIR [--max_restarts K] [--set ...]
int LaunchCommand(int argc, char** argv);

// shardline ckpt list|verify|export DIR ...
int CkptCommand(int argc, char** argv);

// shardline status --coordinator HOST:PORT | --workdir DIR [--json]
int StatusCommand(int argc, char** argv);

// shardline trace merge WORKDIR --out trace.json
int TraceCommand(int argc, char** argv);

// shardline plot WORKDIR --out curves.png
int PlotCommand(int argc, char** argv);

// shardline credential --rank R --out FILE [--token_file F]
int CredentialCommand(int argc, char** argv);

// shardline port [--host ADDRESS] [--count N]
int PortCommand(int argc, char** argv);

// shardline data austen --out DIR [--rdb PATH]
int DataCommand(int argc, char** argv);

// shardline plan --config F [--workers N] [--set ...]
int PlanCommand(int argc, char** argv);

// shardline numerics --config F [--workers N] [--set ...]
int NumericsCommand(int argc, char** argv);

// shardline sample --workdir DIR [--step S] | --safetensors F --config F [--prompt ...]
int SampleCommand(int argc, char** argv);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CLI_COMMANDS_H_
