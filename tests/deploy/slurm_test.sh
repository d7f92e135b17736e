#!/usr/bin/env bash
# deploy/slurm/shardline.sbatch on a real single-node Slurm cluster, started
# here from Debian's packages (slurmctld, slurmd, munge) in a temporary
# directory: a 2-task job trains to the usual accuracy and commits its
# checkpoints; `scancel` of a running job ends it gracefully with a final
# checkpoint; so does the USR1 warning before a time limit. Every daemon
# started here is stopped by its PID.
#   slurm_test.sh SOURCE_DIR BIN_DIR
# Exit 77 (skipped) when the daemons cannot run here, with the reason.
set -uo pipefail
src=$1 bin=$2
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root to start slurmd"
for b in slurmctld slurmd sbatch srun scancel squeue munged; do
  command -v "$b" > /dev/null || skip "$b is not installed (apt-get install slurmctld slurmd slurm-client munge)"
done
id munge > /dev/null 2>&1 || skip "no munge user"

T=$(mktemp -d /tmp/shardline-slurm-XXXXXX)
chmod 0755 "$T"
cleanup() {
  for f in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munge/munged.pid"; do
    [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 1
  for f in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munge/munged.pid"; do
    [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  rm -rf "$T"
}
trap cleanup EXIT

# munge, with its own key, socket and files.
mkdir -p "$T/munge" && chown munge:munge "$T/munge" && chmod 0700 "$T/munge"
head -c 1024 /dev/urandom > "$T/munge/munge.key" && chown munge:munge "$T/munge/munge.key" && chmod 0400 "$T/munge/munge.key"
runuser -u munge -- munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" --seed-file="$T/munge/munged.seed" \
  || skip "munged does not start here: $(cat "$T/munge/munged.log" 2>/dev/null)"
chmod 0755 "$T/munge"  # slurm (root) and job steps reach the socket

host=$(hostname -s)
# Ports outside the ephemeral range: one from bind(":0") can be handed to
# any outgoing connection before slurmctld or slurmd binds it.
ports=$("$bin/shardline" port --count 2) || fail "shardline port: no free ports"
ctld_port=$(echo "$ports" | sed -n 1p) slurmd_port=$(echo "$ports" | sed -n 2p)
mkdir -p "$T/state" "$T/spool"
cat > "$T/slurm.conf" <<CONF
ClusterName=shardlinetest
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=60
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
NodeName=$host CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$T/slurm.conf
slurmctld || skip "slurmctld does not start here: $(tail -5 "$T/slurmctld.log" 2>/dev/null)"
slurmd || skip "slurmd does not start here: $(tail -5 "$T/slurmd.log" 2>/dev/null)"
for _ in $(seq 300); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.1
done
sinfo -h -o %t | grep -q idle || skip "the node did not become idle: $(tail -5 "$T/slurmd.log")"

# 1. A whole job: the default config, 2 tasks.
export SHARDLINE_BIN=$bin SHARDLINE_WORKDIR=$T/run
timeout 600 sbatch --wait --ntasks=2 --output="$T/job1.out" "$src/deploy/slurm/shardline.sbatch" \
  "$src/deploy/configs/fmnist_mlp.textproto"
code=$?
[ "$code" = 0 ] || fail "the job exited with $code: $(tail -30 "$T/job1.out")"
accuracy=$(grep '"split":"eval"' "$T/run/metrics.jsonl" | tail -1 | grep -o '"accuracy":[0-9.]*' | cut -d: -f2)
python3 -c "import sys; sys.exit(0 if float('$accuracy') >= 0.88 else 1)" || fail "final test accuracy $accuracy < 0.88"
ls "$T/run/checkpoints"/step_*/COMMITTED > /dev/null 2>&1 || fail "no committed checkpoint in $T/run/checkpoints"
"$bin/shardline" ckpt verify "$T/run" > /dev/null || fail "ckpt verify failed"
echo "job 1: trained to accuracy $accuracy; $(ls -d "$T/run/checkpoints"/step_* | wc -l) checkpoints"

# 2. scancel of a running job: a graceful stop with a final checkpoint.
export SHARDLINE_WORKDIR=$T/run2
job=$(sbatch --parsable --ntasks=2 --output="$T/job2.out" "$src/deploy/slurm/shardline.sbatch" \
  "$src/deploy/configs/fmnist_mlp.textproto" --set train.total_steps=10000000 --set checkpoint.every_steps=500)
for _ in $(seq 1200); do
  grep -q "committed checkpoint at step 1000 " "$T/job2.out" 2>/dev/null && break
  sleep 0.1
done
grep -q "committed checkpoint at step 1000 " "$T/job2.out" || fail "job 2 did not commit step 1000: $(tail -20 "$T/job2.out")"
scancel "$job"
for _ in $(seq 1800); do
  [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break
  sleep 0.1
done
[ -z "$(squeue -h -j "$job" 2>/dev/null)" ] || fail "job 2 still running 180 s after scancel"
grep -q "signal received: every worker stops after step" "$T/job2.out" || fail "no graceful stop: $(tail -30 "$T/job2.out")"
grep -q "coordinator exited with status 0" "$T/job2.out" || fail "the coordinator did not exit 0: $(tail -30 "$T/job2.out")"
# The coordinator picks a stop step ahead of every worker it has heard
# from; the workers agree on it (or, if one was already past it, on where
# that one is) and save there.
stop=$(grep -o "every worker finished at step [0-9]*" "$T/job2.out" | grep -o "[0-9]*$")
[ -n "$stop" ] || fail "no worker finished: $(tail -30 "$T/job2.out")"
[ -f "$T/run2/checkpoints/$(printf 'step_%012d' "$stop")/COMMITTED" ] || fail "no committed checkpoint at the stop step $stop: $(ls "$T/run2/checkpoints")"
echo "job 2: cancelled; stopped gracefully at step $stop with a committed checkpoint"

# 3. The time limit: the USR1 warning before it is a graceful stop too, in
# time (a one-minute limit, the warning 45 s before it).
export SHARDLINE_WORKDIR=$T/run3
timeout 300 sbatch --wait --ntasks=2 --time=1 --signal=B:USR1@45 --output="$T/job3.out" \
  "$src/deploy/slurm/shardline.sbatch" "$src/deploy/configs/fmnist_mlp.textproto" \
  --set train.total_steps=10000000 --set checkpoint.every_steps=500
grep -q "signal received: every worker stops after step" "$T/job3.out" || fail "no graceful stop at the time limit: $(tail -30 "$T/job3.out")"
grep -q "coordinator exited with status 0" "$T/job3.out" || fail "job 3's coordinator did not exit 0: $(tail -30 "$T/job3.out")"
stop=$(grep -o "every worker finished at step [0-9]*" "$T/job3.out" | grep -o "[0-9]*$")
[ -n "$stop" ] && [ -f "$T/run3/checkpoints/$(printf 'step_%012d' "$stop")/COMMITTED" ] \
  || fail "job 3 left no committed checkpoint at its stop step '$stop'"
echo "job 3: warned before its time limit; stopped gracefully at step $stop with a committed checkpoint"
echo PASSED
