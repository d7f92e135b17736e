#!/usr/bin/env python3
"""Checks that the product code reads clocks and files only through the Env
(common/platform/env.h, clock.h): no direct std::chrono clock, absl::Now(),
absl::SleepFor, iostream file or stdio fopen outside the Env
implementations, so a test's Env can move time and fail files everywhere;
and that the Env is chosen once, where a process makes its options (a
main, a `shardline` command's entry point, the fault-injecting chooser):
nowhere else names Env::Default(), so no clock or sleep is hidden from a
test (LevelDB's habit).

usage: clocks_and_files_test.py SOURCE_ROOT

Before checking the tree, it checks itself on a small tree with one direct
clock read, so it cannot pass by finding nothing.
"""
import os
import re
import sys
import tempfile

CHECKED = ("common", "worker", "coordinator")
# The Env implementations and the platform primitives under them.
EXEMPT = {
    "common/platform/posix_env.cc",  # the POSIX Env: the clocks and files themselves
    "common/platform/clock.h",       # the Env's clocks as absl types
    "common/platform/mutex.h",       # absl::Mutex deadlines are absl::Now()-based by contract
    # SentencePiece's helper process reads the trainer's input files itself: it
    # cannot link the Env (common links protobuf 3.21, which libsentencepiece's
    # own protobuf 3.14 cannot share a process with: worker/data/spm_protocol.h).
    "worker/data/spm_bridge.cc",
    # A log line's own timestamp: the logger runs before any Env exists and
    # on every thread, as LevelDB's PosixLogger stamps with gettimeofday.
    "common/platform/logging.cc",
}
DIRECT = re.compile(
    r"std::chrono::(steady|system|high_resolution)_clock::now|absl::Now\(\)|absl::SleepFor\(|std::[io]?fstream|\bfopen\("
    # POSIX clocks and sleeps (issue 62: clock_gettime and usleep in
    # spm_client.cc went unseen).
    r"|\bclock_gettime\(|\bgettimeofday\(|\busleep\(|\bnanosleep\(|std::this_thread::sleep_for")
DEFAULT_ENV = re.compile(r"\bEnv::Default\(\)")


def chooses_env(rel):
    """Where the process's Env may be chosen: entry points and the chooser."""
    return (rel.endswith("_main.cc") or rel.startswith("worker/cli/") or
            rel in ("common/platform/posix_env.cc", "common/faults/slow_disk_env.cc"))


def violations(root):
    found = []
    for top in CHECKED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if rel in EXEMPT:
                    continue
                for n, line in enumerate(open(os.path.join(root, rel), encoding="utf-8", errors="replace"), 1):
                    code = line.split("//", 1)[0]
                    m = DIRECT.search(code)
                    if m:
                        found.append(f"{rel}:{n}: {m.group(0)} outside the Env (use common/platform/clock.h or Env)")
                    if DEFAULT_ENV.search(code) and not chooses_env(rel):
                        found.append(f"{rel}:{n}: Env::Default() outside an entry point (take the Env as a "
                                     "parameter or an option: it is chosen once, where options are made)")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for rel, text in {
            "common/platform/posix_env.cc": "auto t = std::chrono::steady_clock::now();\n",
            "worker/train/loop.cc": "// absl::Now() in a comment is fine\nStopwatch w;\n",
            "coordinator/job.cc": "  const absl::Time now = absl::Now();\n",
            "worker/train/exchange.cc": "  // Env::Default() in a comment is fine\n  Stopwatch w(Env::Default());\n",
            "worker/cli/train_command.cc": "  Env* env = Env::Default();\n",
            "worker/data/spm_client.cc": "int64_t t = 0;\n  usleep(10000);\n",
        }.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            open(os.path.join(root, rel), "w").write(text)
        got = sorted(violations(root))
        if len(got) != 3 or not got[0].startswith("coordinator/job.cc:1:") or \
                not got[1].startswith("worker/data/spm_client.cc:2: usleep(") or \
                not got[2].startswith("worker/train/exchange.cc:2: Env::Default()"):
            raise SystemExit("self-test failed: expected coordinator/job.cc:1, worker/data/spm_client.cc:2 and "
                             f"worker/train/exchange.cc:2, got {got}")


def main():
    self_test()
    found = violations(sys.argv[1])
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} direct clock, sleep or file calls outside the Env, or Envs not passed in")
        return 1
    print("every clock, sleep and file call of the product code goes through an Env it was given")
    return 0


if __name__ == "__main__":
    sys.exit(main())
