#!/usr/bin/env bash
# A one-node Slurm cluster kept in one folder: to try carve-array.sh on one
# machine before a real cluster, and for gpucarve's CI (tests/schedulers.rs).
# Needs Debian's slurm-wlm and munge; run as root (the daemons run as the
# calling user). Nothing outside DIR is written: munge key and socket,
# slurm.conf, state, spool, logs and pid files all live in DIR.
#
#   eval "$(examples/slurm/local-cluster.sh start /tmp/cluster)"   # sets SLURM_CONF
#   sbatch --wait --array=1-4 --cpus-per-task=1 --mem=1G \
#       examples/slurm/carve-array.sh /evidence/disk.dd /tmp/case
#   gpucarve merge /tmp/case/part{1..4} -o /tmp/case/all
#   examples/slurm/local-cluster.sh stop /tmp/cluster
#
# Ports: SLURMCTLD_PORT (default 6817) and SLURMD_PORT (default 6818).
set -euo pipefail

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# Stops the daemon whose pid file is $1 (only that process), waiting up to 10 s.
stop_pid() {
    local f=$1 pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f")
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -f "$f"
}

case $cmd in
stop)
    stop_pid "$dir/slurmd.pid"
    stop_pid "$dir/slurmctld.pid"
    stop_pid "$dir/munge/munged.pid"
    exit 0
    ;;
start) ;;
*) usage ;;
esac

# The daemons are in /usr/sbin, which is not on every user's PATH.
PATH=$PATH:/usr/sbin:/sbin
for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool not found (apt-get install slurm-wlm munge)" >&2
        exit 1
    }
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chmod 700 "$dir/munge"
if [ ! -s "$dir/munge/munge.key" ]; then
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
fi
munged --force \
    --socket="$dir/munge/munge.socket" \
    --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" \
    --seed-file="$dir/munge/munged.seed" \
    --log-file="$dir/log/munged.log"

host=$(hostname -s)
# The node as slurmd sees this machine (CPUs, sockets, memory), so that the
# node is not drained for claiming more than it has.
node=$(slurmd -C | head -n1)
cat >"$dir/slurm.conf" <<CONF
ClusterName=gpucarve
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -i
slurmd
# Wait until the node takes jobs.
for _ in $(seq 300); do
    state=$(sinfo -h -o %T 2>/dev/null | head -n1 || true)
    case $state in
    idle* | mixed* | allocated*)
        echo "export SLURM_CONF=$dir/slurm.conf"
        exit 0
        ;;
    esac
    sleep 0.1
done
echo "$0: the node did not come up (state: ${state:-none}); logs in $dir/log:" >&2
tail -n 20 "$dir"/log/*.log >&2 || true
exit 1
