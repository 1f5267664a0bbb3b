#!/bin/bash
# bench/nhc-like.sh: the bash baseline bench/probe compares `burnin probe` with.
#
# Written for burnin (no NHC code in it), it does the work LBNL NHC 1.4.x does for its
# basic host checks and a GPU count, the way NHC does it: one bash process with a
# watchdog timer, checks read from a configuration one line at a time and run through
# eval, each data source gathered once into bash arrays with `read` loops, `ps`
# run once for the process checks, and the GPUs counted through `nvidia-smi -L`.
#
#   check_fs_mount      /proc/self/mounts
#   check_ps_service    ps axo user,uid,pid,ppid,...,args (one run, parsed per line)
#   check_hw_cpuinfo    /proc/cpuinfo: sockets, cores, threads
#   check_hw_physmem    /proc/meminfo: MemTotal
#   check_hw_swap       /proc/meminfo: SwapTotal
#   check_hw_eth        /proc/net/dev: the interface is there
#   check_hw_ib         sysfs: every InfiniBand port's state, phys_state and rate
#   check_gpu_count     nvidia-smi -L | wc -l
#
# Reads below $BURNIN_ROOT where a simulated node has the file (meminfo, InfiniBand),
# the host's own /proc otherwise; nvidia-smi is the one on PATH (a simulated node's shim).
# Exit 0 when every check passed, 1 with `ERROR: <check>: <why>` otherwise.
# Usage: bench/nhc-like.sh SOCKETS CORES THREADS RAM_MIN_KB RAM_MAX_KB GPUS IB_RATE USER:PROCESS...

set -f
ROOT="${BURNIN_ROOT:-/}"
ROOT="${ROOT%/}"
EXPECT_SOCKETS="$1" EXPECT_CORES="$2" EXPECT_THREADS="$3" RAM_MIN="$4" RAM_MAX="$5" EXPECT_GPUS="$6" EXPECT_IB_RATE="$7"
shift 7
SERVICES=("$@")  # USER:PROCESS, one check_ps_service each
TIMEOUT=30

# ---------------------------------------------------------------- watchdog, like NHC's
sleep "$TIMEOUT" &
WATCHDOG=$!
trap 'kill -9 $WATCHDOG >&/dev/null' EXIT

die() {
    echo "ERROR: $CHECK: $*"
    exit 1
}

file_below_root() {  # $1: /proc/... -> the simulated node's copy when it has one
    if [[ -e "$ROOT$1" ]]; then echo "$ROOT$1"; else echo "$1"; fi
}

# ---------------------------------------------------------------- data gathering
HW_SOCKETS=0 HW_CORES=0 HW_THREADS=0 HW_RAM_TOTAL=0 HW_SWAP_TOTAL=0
declare -a MNT_DIR MNT_TYPE MNT_OPTS PS_USER PS_ARGS PS_COMMAND PS_PIDS ETH_DEV IB_STATE IB_PHYS IB_RATE IB_PORT

gather_cpu() {
    local DATA PROCESSORS=0 SIBLINGS=0 CORES=0
    local -a FIELD SEEN
    DATA=$(< /proc/cpuinfo)
    while read -r -a FIELD; do
        if [[ "${FIELD[0]} ${FIELD[1]}" == "processor :" ]]; then
            ((PROCESSORS++))
        elif [[ "${FIELD[0]} ${FIELD[1]} ${FIELD[2]}" == "physical id :" ]]; then
            if [[ -z "${SEEN[${FIELD[3]}]}" ]]; then SEEN[${FIELD[3]}]=1; ((HW_SOCKETS++)); fi
        elif [[ "${FIELD[0]} ${FIELD[1]}" == "siblings :" ]]; then
            SIBLINGS=${FIELD[2]}
        elif [[ "${FIELD[0]} ${FIELD[1]} ${FIELD[2]}" == "cpu cores :" ]]; then
            CORES=${FIELD[3]}
        fi
    done <<< "$DATA"
    if ((HW_SOCKETS == 0)); then HW_SOCKETS=$PROCESSORS HW_CORES=$PROCESSORS HW_THREADS=$PROCESSORS; return; fi
    HW_CORES=$((HW_SOCKETS * CORES)) HW_THREADS=$((HW_SOCKETS * SIBLINGS))
}

gather_mem() {
    local DATA
    local -a FIELD
    DATA=$(< "$(file_below_root /proc/meminfo)")
    while read -r -a FIELD; do
        case "${FIELD[0]}" in
            MemTotal:) HW_RAM_TOTAL=${FIELD[1]} ;;
            SwapTotal:) HW_SWAP_TOTAL=${FIELD[1]} ;;
        esac
    done <<< "$DATA"
}

gather_mounts() {
    local -a FIELD
    while read -r -a FIELD; do
        MNT_DIR+=("${FIELD[1]}") MNT_TYPE+=("${FIELD[2]}") MNT_OPTS+=("${FIELD[3]}")
    done < /proc/self/mounts
}

gather_ps() {
    local IFS LINE
    local -a LINES FIELD
    IFS=$'\n'
    LINES=( $(COLUMNS=1024 ps axo 'user:32,uid,pid,ppid,pcpu,pmem,rss,vsz,bsdtime,args') )
    IFS=$' \t\n'
    for LINE in "${LINES[@]:1}"; do
        FIELD=( $LINE )
        PS_PIDS+=("${FIELD[2]}")
        PS_USER[${FIELD[2]}]="${FIELD[0]}"
        PS_ARGS[${FIELD[2]}]="${FIELD[*]:9}"
        PS_COMMAND[${FIELD[2]}]="${FIELD[9]}"
    done
}

gather_eth() {
    local -a FIELD
    while read -r -a FIELD; do
        [[ "${FIELD[0]}" == *:* ]] && ETH_DEV+=("${FIELD[0]%%:*}")
    done < /proc/net/dev
}

gather_ib() {
    local PORT LINE
    set +f
    local -a PORTS=( "$ROOT"/sys/class/infiniband/*/ports/* )
    set -f
    for PORT in "${PORTS[@]}"; do
        [[ -e "$PORT" ]] || break
        IFS=' :' read -r -a LINE < "$PORT/state"; IB_STATE+=("${LINE[1]}")
        IFS=' :' read -r -a LINE < "$PORT/phys_state"; IB_PHYS+=("${LINE[1]}")
        read -r -a LINE < "$PORT/rate"; IB_RATE+=("${LINE[0]}")
        IB_PORT+=("$PORT")
    done
}

# ---------------------------------------------------------------- checks
check_fs_mount() {  # MOUNTPOINT [TYPE]
    local i
    ((${#MNT_DIR[@]})) || gather_mounts
    for i in "${!MNT_DIR[@]}"; do
        if [[ "${MNT_DIR[$i]}" == "$1" ]]; then
            [[ -z "$2" || "${MNT_TYPE[$i]}" == "$2" ]] && return 0
            die "$1 is ${MNT_TYPE[$i]}, not $2"
        fi
    done
    die "$1 is not mounted"
}

check_ps_service() {  # USER NAME: a process of USER whose command ends with NAME
    local PID
    ((${#PS_PIDS[@]})) || gather_ps
    for PID in "${PS_PIDS[@]}"; do
        [[ "${PS_USER[$PID]}" == "$1" && "${PS_COMMAND[$PID]}" == *"$2" ]] && return 0
    done
    die "no process $2 of $1"
}

check_hw_cpuinfo() {  # SOCKETS CORES THREADS
    ((HW_SOCKETS)) || gather_cpu
    ((HW_SOCKETS == $1)) || die "$HW_SOCKETS sockets, expected $1"
    ((HW_CORES == $2)) || die "$HW_CORES cores, expected $2"
    ((HW_THREADS == $3)) || die "$HW_THREADS threads, expected $3"
}

check_hw_physmem() {  # MIN_KB MAX_KB
    ((HW_RAM_TOTAL)) || gather_mem
    ((HW_RAM_TOTAL >= $1 && HW_RAM_TOTAL <= $2)) || die "RAM $HW_RAM_TOTAL kB outside $1..$2 kB"
}

check_hw_swap() {  # MIN_KB MAX_KB
    ((HW_RAM_TOTAL)) || gather_mem
    ((HW_SWAP_TOTAL >= $1 && HW_SWAP_TOTAL <= $2)) || die "swap $HW_SWAP_TOTAL kB outside $1..$2 kB"
}

check_hw_eth() {  # DEVICE
    local DEV
    ((${#ETH_DEV[@]})) || gather_eth
    for DEV in "${ETH_DEV[@]}"; do [[ "$DEV" == "$1" ]] && return 0; done
    die "no interface $1"
}

check_hw_ib() {  # RATE: every port ACTIVE, LinkUp, at RATE Gb/s
    local i
    ((${#IB_PORT[@]})) || gather_ib
    ((${#IB_PORT[@]})) || die "no InfiniBand port"
    for i in "${!IB_PORT[@]}"; do
        [[ "${IB_STATE[$i]}" == ACTIVE && "${IB_PHYS[$i]}" == LinkUp && "${IB_RATE[$i]}" == "$1" ]] ||
            die "${IB_PORT[$i]}: ${IB_STATE[$i]} ${IB_PHYS[$i]} ${IB_RATE[$i]} Gb/s, expected ACTIVE LinkUp $1"
    done
}

check_gpu_count() {  # GPUS
    local COUNT
    COUNT=$(nvidia-smi -L 2>/dev/null | wc -l)
    ((COUNT == $1)) || die "$COUNT GPUs, expected $1"
}

# ---------------------------------------------------------------- the configuration, run line by line
CONFIG="
check_fs_mount /
check_fs_mount /proc proc"
for SERVICE in "${SERVICES[@]}"; do
    CONFIG+="
check_ps_service ${SERVICE%%:*} ${SERVICE#*:}"
done
CONFIG+="
check_hw_cpuinfo $EXPECT_SOCKETS $EXPECT_CORES $EXPECT_THREADS
check_hw_physmem $RAM_MIN $RAM_MAX
check_hw_swap 0 1099511627776
check_hw_eth lo
check_hw_ib $EXPECT_IB_RATE
check_gpu_count $EXPECT_GPUS
"
COUNT=0
while read -r CHECK; do
    [[ -z "$CHECK" || "$CHECK" == \#* ]] && continue
    eval "$CHECK"
    ((COUNT++))
done <<< "$CONFIG"
echo "nhc-like: OK ($COUNT checks)"
