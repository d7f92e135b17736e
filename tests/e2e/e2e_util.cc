#include "tests/e2e/e2e_util.h"

#include <signal.h>
#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/net/stable_port.h"
#include "gtest/gtest.h"
#include "tests/e2e/subprocess.h"

namespace shardline {

std::string ConfigPath(const std::string& name) {
  return absl::StrCat(SHARDLINE_SOURCE_DIR, "/deploy/configs/", name, ".textproto");
}
std::string DefaultConfig() { return ConfigPath("fmnist_mlp"); }

namespace {
void AddSets(const std::vector<std::string>& sets, std::vector<std::string>* argv) {
  for (const std::string& s : sets) {
    argv->push_back("--set");
    argv->push_back(s);
  }
}
}  // namespace

std::vector<std::string> LaunchArgv(const std::string& dir, int workers, const std::vector<std::string>& sets,
                                    int max_restarts, const std::string& config) {
  std::vector<std::string> argv = {BinPath("shardline"), "launch", "--config", config.empty() ? DefaultConfig() : config, "--workers",
                                   std::to_string(workers), "--workdir", dir, "--max_restarts",
                                   std::to_string(max_restarts)};
  AddSets(sets, &argv);
  return argv;
}

std::vector<std::string> TrainArgv(const std::string& dir, const std::vector<std::string>& sets) {
  std::vector<std::string> argv = {BinPath("shardline"), "train", "--config", DefaultConfig(), "--workdir", dir};
  AddSets(sets, &argv);
  return argv;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> ReadLines(const std::string& path) {
  return absl::StrSplit(ReadAll(path), '\n', absl::SkipEmpty());
}

double JsonField(const std::string& line, const std::string& key) {
  const std::string pattern = absl::StrCat("\"", key, "\":");
  const size_t at = line.find(pattern);
  if (at == std::string::npos) return NAN;
  return std::strtod(line.c_str() + at + pattern.size(), nullptr);
}

std::vector<std::string> SplitLines(const std::string& metrics_path, const std::string& split) {
  std::vector<std::string> out;
  for (const std::string& l : ReadLines(metrics_path)) {
    if (absl::StrContains(l, absl::StrCat("\"split\":\"", split, "\""))) out.push_back(l);
  }
  return out;
}

int64_t LoggedStep(const std::string& dir) {
  const std::vector<std::string> train = SplitLines(dir + "/metrics.jsonl", "train");
  return train.empty() ? 0 : static_cast<int64_t>(JsonField(train.back(), "step"));
}

bool WaitForStep(const std::string& dir, int64_t step, absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end; absl::SleepFor(absl::Milliseconds(20))) {
    if (LoggedStep(dir) >= step) return true;
  }
  return false;
}

bool WaitForText(const std::string& path, const std::string& needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (access(path.c_str(), F_OK) == 0 && (needle.empty() || absl::StrContains(ReadAll(path), needle))) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(25));
  }
  return false;
}

int FreePort() {
  absl::StatusOr<int> port = PickStablePort(Env::Default(), "127.0.0.1");
  if (!port.ok()) {
    ADD_FAILURE() << port.status();
    return 0;
  }
  return *port;
}

std::vector<pid_t> FindProcesses(const std::vector<std::string>& parts) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::string cmdline = ReadAll(absl::StrCat("/proc/", pid, "/cmdline"));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    bool all = !cmdline.empty();
    for (const std::string& p : parts) all = all && absl::StrContains(cmdline, p);
    if (all) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

std::vector<pid_t> LaunchedWorker(const std::string& workdir, int rank) {
  return FindProcesses({"shardline-worker", absl::StrCat("--rank ", rank), ReadAll(workdir + "/coordinator.address")});
}

bool SignalLaunchedWorker(const std::string& workdir, int rank, int signal) {
  const std::vector<pid_t> pids = LaunchedWorker(workdir, rank);
  return pids.size() == 1 && kill(pids[0], signal) == 0;
}

std::vector<pid_t> LaunchedCoordinator(const std::string& workdir) {
  return FindProcesses({"shardline-coordinator", "--workdir " + workdir});
}

bool SignalLaunchedCoordinator(const std::string& workdir, int signal) {
  const std::vector<pid_t> pids = LaunchedCoordinator(workdir);
  return pids.size() == 1 && kill(pids[0], signal) == 0;
}

double PromValue(const std::string& page, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::StartsWith(line, absl::StrCat(name, " "))) {
      return std::strtod(std::string(line.substr(name.size() + 1)).c_str(), nullptr);
    }
  }
  return NAN;
}

int64_t WorldChangeStep(const std::string& coordinator_log, int from, int to) {
  const std::string mark = absl::StrCat("the world changed size: ", from, " -> ", to, " workers at step ");
  const size_t at = coordinator_log.find(mark);
  if (at == std::string::npos) return -1;
  const size_t begin = at + mark.size();
  int64_t step = -1;
  return absl::SimpleAtoi(coordinator_log.substr(begin, coordinator_log.find(' ', begin) - begin), &step) ? step
                                                                                                          : -1;
}

}  // namespace shardline
