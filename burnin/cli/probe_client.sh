#!/bin/bash
# burnin probe client: asks the resident probe (`burnin probe --serve`) to probe this node now.
# Written by `burnin probe --client` (docs/probe.md); use it where a site runs `burnin probe`:
# Slurm's HealthCheckProgram, a prolog. Usage: SCRIPT [--drain] [--undrain]
# Prints the probe's one line and exits with its code (0 healthy, 1 failed, 2 incomplete).
# Whenever the resident probe does not answer with a verdict (not running, restarting, its address
# file unreadable, a wrong token, no answer in time), the one-shot `burnin probe` judges the node,
# with the options the server was given (ONE_SHOT, written in by `burnin probe --client`).
ADDRESS=${BURNIN_PROBE_ADDRESS:-@ADDRESS@}
BURNIN=${BURNIN:-@BURNIN@}
WAIT=${BURNIN_PROBE_WAIT:-60}
ONE_SHOT=(@ONE_SHOT@)
FLAGS=
for ARG in "$@"; do
    case "$ARG" in
        --drain) FLAGS+=" drain" ;;
        --undrain) FLAGS+=" undrain" ;;
        *) echo "burnin probe client: unknown argument '$ARG' (it takes --drain and --undrain)" >&2; exit 2 ;;
    esac
done
if read -r PORT TOKEN _ 2>/dev/null < "$ADDRESS" && [[ "$PORT" =~ ^[0-9]+$ && -n "$TOKEN" ]] &&
        { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null; then
    printf 'burnin-probe/1 %s%s\n' "$TOKEN" "$FLAGS" >&3
    if read -r -t "$WAIT" CODE LINE <&3 && [[ "$CODE" == [012] ]]; then
        printf '%s\n' "$LINE"
        exit "$CODE"
    fi
    exec 3<&-
fi
exec "$BURNIN" probe "${ONE_SHOT[@]}" "$@"
