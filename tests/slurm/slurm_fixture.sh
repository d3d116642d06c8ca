#!/usr/bin/env bash
# A private two-node Slurm on this machine, for tests: munged with its own key and
# socket, slurmctld, and two slurmd "nodes" (n1, n2) on this host, every file in one
# `mktemp -d` folder; nothing in /etc, /run or /var is read or written.
#
# As a library (what the CTest cases do):
#   source tests/slurm/slurm_fixture.sh
#   slurm_start || exit $?     # 77 (skip) with one line saying why when it cannot run here
#   ... srun / sbatch / sinfo (SLURM_CONF is exported) ...
#   (slurm_stop runs on EXIT, INT and TERM; a watcher stops the daemons even when the
#    test's shell is killed with SIGKILL, e.g. by a CTest timeout)
# As a command, for developers:
#   eval "$(tests/slurm/slurm_fixture.sh start)"   # prints export SLURM_CONF=... SLURM_FIXTURE_DIR=...
#   srun --mpi=pmix -N 2 -n 2 hostname
#   tests/slurm/slurm_fixture.sh stop "$SLURM_FIXTURE_DIR"
#
# Two slurmd on one host share the system temporary folder, where PMIx makes its
# per-step folder (spmix_appdir_*): the second one's task launch fails with "File
# exists". Each slurmd therefore runs in its own mount namespace with a private tmpfs
# on PMIxCliTmpDirBase (mpi.conf).

SLURM_FIXTURE_START_TIMEOUT=${SLURM_FIXTURE_START_TIMEOUT:-30}   # seconds until both nodes are idle

_slurm_say() { echo "slurm-fixture: $*" >&2; }

# The reason this machine cannot run the fixture, or nothing.
slurm_unavailable() {
  local p
  for p in munged munge unmunge slurmctld slurmd srun sinfo scontrol sbatch squeue unshare mount; do
    command -v "$p" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$p" >/dev/null 2>&1 ||
      { echo "'$p' is not installed (tools/install-deps.sh installs slurm-wlm and munge)"; return; }
  done
  [ "$(id -u)" -eq 0 ] || { echo "slurmd must run as root here (it starts every node's tasks), and this is uid $(id -u)"; return; }
  local plugdir
  plugdir=$(dirname "$(find /usr/lib -name 'mpi_pmix.so' -path '*slurm*' 2>/dev/null | head -n 1)" 2>/dev/null)
  [ -n "$plugdir" ] && [ -e "$plugdir/mpi_pmix.so" ] ||
    { echo "Slurm's PMIx plugin (mpi_pmix.so, package slurm-wlm-basic-plugins) is not installed"; return; }
  local probe
  probe=$(mktemp -d "${TMPDIR:-/tmp}/slurm_probe_XXXX") || { echo "cannot make a temporary folder"; return; }
  if ! unshare -m --propagation private sh -c "mount -t tmpfs tmpfs '$probe'" >/dev/null 2>&1; then
    rmdir "$probe"
    echo "cannot mount a tmpfs in a private mount namespace (unshare -m needs CAP_SYS_ADMIN; a container without it cannot run two slurmd)"
    return
  fi
  rmdir "$probe"
}

# Three consecutive free TCP ports (slurmctld, n1, n2), from a random start so that
# fixtures of two checkouts do not pick the same ones.
_slurm_free_ports() {
  local used base try p ok
  used=$( (ss -Htan 2>/dev/null || netstat -tan 2>/dev/null) | awk '{print $4}' | sed 's/.*://' | sort -u)
  for try in $(seq 1 50); do
    base=$((20000 + RANDOM % 20000))
    ok=1
    for p in $base $((base + 1)) $((base + 2)); do
      if grep -qx "$p" <<<"$used"; then ok=0; break; fi
    done
    [ $ok -eq 1 ] && { echo "$base"; return 0; }
  done
  return 1
}

_slurm_write_conf() {  # DIR CTLD_PORT
  local d=$1 port=$2 host
  host=$(hostname -s)
  cat >"$d/slurm.conf" <<EOF
# written by tests/slurm/slurm_fixture.sh
ClusterName=vexptest
SlurmctldHost=$host
SlurmctldPort=$port
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long a requeued job waits before it may start again (Slurm's
# default, 120 s, would make every requeue test wait two minutes).
AuthInfo=socket=$d/run/munge.sock,cred_expire=20
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.%n.log
PlugStackConfig=$d/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
KillWait=5
InactiveLimit=0
MailProg=/bin/true
NodeName=n[1-2] NodeHostname=$host CPUs=1 RealMemory=100 Port=$((port + 1))-$((port + 2)) State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF
  printf 'PMIxCliTmpDirBase=%s/pmix\n' "$d" >"$d/mpi.conf"
  : >"$d/plugstack.conf"
}

# Stops what the fixture in DIR started and removes DIR. Safe to call twice.
slurm_stop_dir() {
  local d=$1 f pid i
  [ -n "$d" ] && [ -d "$d" ] && [ -f "$d/.slurm_fixture" ] || return 0
  if [ -f "$d/slurm.conf" ]; then
    SLURM_CONF="$d/slurm.conf" timeout 10 scancel -u "$(id -un)" >/dev/null 2>&1
    SLURM_CONF="$d/slurm.conf" timeout 10 scontrol shutdown >/dev/null 2>&1
  fi
  # Whatever did not stop within 10 s is killed; the private tmpfs of each slurmd
  # goes with the last process of its mount namespace.
  for i in $(seq 1 100); do
    local alive=0
    for f in "$d"/run/slurmctld.pid "$d"/run/slurmd.*.pid; do
      [ -f "$f" ] || continue
      pid=$(cat "$f" 2>/dev/null)
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1
    done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for f in "$d"/run/slurmctld.pid "$d"/run/slurmd.*.pid "$d"/run/munged.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null)
    [ -n "$pid" ] || continue
    if [ "${f##*/}" = munged.pid ]; then kill "$pid" 2>/dev/null; else kill -9 "$pid" 2>/dev/null; fi
  done
  # Tasks of a step still running (its test was killed) carry this cluster's
  # SLURM_CONF and a job id in their environment; they would keep their node's
  # namespace alive.
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}; pid=${pid%/environ}
    [ "$pid" = "${BASHPID:-$$}" ] && continue
    grep -qazxF "SLURM_CONF=$d/slurm.conf" "$f" 2>/dev/null && grep -qaz '^SLURM_JOB_ID=' "$f" 2>/dev/null &&
      kill -9 "$pid" 2>/dev/null
  done
  if [ -f "$d/run/watcher.pid" ]; then
    pid=$(cat "$d/run/watcher.pid")
    [ "$pid" != "${BASHPID:-$$}" ] && kill "$pid" 2>/dev/null
  fi
  for i in $(seq 1 50); do
    pid=$(cat "$d/run/munged.pid" 2>/dev/null)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -rf "$d"
}

slurm_stop() {
  [ -n "${SLURM_FIXTURE_DIR:-}" ] || return 0
  local t0=$SECONDS
  slurm_stop_dir "$SLURM_FIXTURE_DIR"
  _slurm_say "stopped in $((SECONDS - t0)) s"
  SLURM_FIXTURE_DIR=""
}

_slurm_fail_start() {  # REASON: prints the daemons' last log lines, stops, returns 1
  _slurm_say "cannot start: $1"
  local f
  for f in "$SLURM_FIXTURE_DIR"/log/*.log; do
    [ -f "$f" ] || continue
    echo "--- ${f##*/} (last lines)" >&2
    tail -n 15 "$f" >&2
  done
  slurm_stop
  return 1
}

# Starts the cluster and exports SLURM_CONF and SLURM_FIXTURE_DIR. Returns 77 with
# one line on stderr when this machine cannot run it, 1 when a daemon did not start.
slurm_start() {
  local why t0=$SECONDS port d host
  why=$(slurm_unavailable)
  if [ -n "$why" ]; then
    echo "SKIP: no Slurm test cluster here: $why" >&2
    return 77
  fi
  PATH="$PATH:/usr/sbin:/sbin"
  port=$(_slurm_free_ports) || { _slurm_say "no three free TCP ports found"; return 1; }
  d=$(mktemp -d "${TMPDIR:-/tmp}/vexp_slurm_XXXXXX") || return 1
  export SLURM_FIXTURE_DIR=$d
  : >"$d/.slurm_fixture"
  # munged insists that every folder above its socket is searchable by all, and
  # that its key is readable by its owner only.
  chmod 711 "$d"
  mkdir -p "$d/run" "$d/key" "$d/log" "$d/state" "$d/spool" "$d/pmix"
  chmod 755 "$d/run"
  chmod 700 "$d/key"
  head -c 1024 /dev/urandom >"$d/key/munge.key"
  chmod 400 "$d/key/munge.key"
  _slurm_write_conf "$d" "$port"
  export SLURM_CONF=$d/slurm.conf

  # The watcher: when the shell that started the fixture goes away without stopping
  # it (SIGKILL), it stops the daemons and removes the folder.
  local owner=${BASHPID:-$$} self
  self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
  if [ "${SLURM_FIXTURE_WATCH:-1}" = 1 ]; then
    setsid bash -c 'echo $$ >"$2/run/watcher.pid"; while kill -0 "$1" 2>/dev/null && [ -d "$2" ]; do sleep 1; done
      exec bash "$3" stop "$2"' watcher "$owner" "$d" "$self" </dev/null >/dev/null 2>&1 &
  fi

  munged --socket="$d/run/munge.sock" --key-file="$d/key/munge.key" --pid-file="$d/run/munged.pid" \
    --log-file="$d/log/munged.log" --seed-file="$d/key/munged.seed" >/dev/null 2>&1 ||
    { _slurm_fail_start "munged did not start"; return 1; }
  munge -S "$d/run/munge.sock" -n 2>/dev/null | unmunge -S "$d/run/munge.sock" >/dev/null 2>&1 ||
    { _slurm_fail_start "munge -n | unmunge fails on the private socket"; return 1; }
  slurmctld -f "$d/slurm.conf" >"$d/log/slurmctld.out" 2>&1 ||
    { _slurm_fail_start "slurmctld exited $?"; return 1; }
  local n
  for n in n1 n2; do
    mkdir -p "$d/spool/$n"
    unshare -m --propagation private sh -c \
      "mount -t tmpfs -o size=64m,mode=1777 tmpfs '$d/pmix' && exec slurmd -f '$d/slurm.conf' -N $n" \
      >"$d/log/slurmd.$n.out" 2>&1 ||
      { _slurm_fail_start "slurmd -N $n did not start"; return 1; }
  done
  local i state=""
  for ((i = 0; i < SLURM_FIXTURE_START_TIMEOUT * 5; i++)); do
    state=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort | tr '\n' ' ')
    [ "$state" = "n1 idle n2 idle " ] && break
    sleep 0.2
  done
  [ "$state" = "n1 idle n2 idle " ] ||
    { _slurm_fail_start "nodes not idle after ${SLURM_FIXTURE_START_TIMEOUT} s (sinfo: ${state:-nothing})"; return 1; }
  _slurm_say "2 nodes idle in $((SECONDS - t0)) s ($d, slurmctld port $port)"
  trap slurm_stop EXIT
  trap 'slurm_stop; exit 130' INT
  trap 'slurm_stop; exit 143' TERM
  return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
  start)
    # No watcher: this shell ends at once, the cluster stays until `stop`.
    SLURM_FIXTURE_WATCH=0 slurm_start >&2 || exit $?
    trap - EXIT INT TERM
    printf 'export SLURM_CONF=%q SLURM_FIXTURE_DIR=%q\n' "$SLURM_CONF" "$SLURM_FIXTURE_DIR"
    ;;
  stop)
    [ -n "${2:-}" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
    slurm_stop_dir "$2"
    ;;
  check)
    why=$(slurm_unavailable)
    [ -z "$why" ] || { echo "SKIP: $why"; exit 77; }
    echo "this machine can run the Slurm test fixture"
    ;;
  *)
    echo "usage: $0 start | stop DIR | check   (or source it: slurm_start / slurm_stop)" >&2
    exit 2
    ;;
  esac
fi
