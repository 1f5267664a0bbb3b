#!/usr/bin/env bash
# Run on a lent GPU machine (the `device` tool), where only python3 and the NVIDIA
# driver can be counted on: the collector zipapp carries pynvml, so nothing is
# installed. Prepare here first:  PYTHON=.venv/bin/python bash bench/device-collect.sh --prepare
# then on the device:             bash bench/device-collect.sh
# It writes, under $OUT (or ./device-out): facts.json from the production
# collector, the fast probe's view of the same node, and raw tool outputs for the
# parser tests. Judge them here afterwards:
#   .venv/bin/burnin topologies --from-facts OUT/facts/NODE.json --name device-golden > device.yaml
#   .venv/bin/pytest suites/node --burnin-facts OUT/facts --burnin-topology device.yaml
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
payload="$here/build/device/collector.pyz"
if [ "${1:-}" = "--prepare" ]; then
    mkdir -p "$(dirname "$payload")"
    "${PYTHON:-python3}" -c "from burnin.transport.payload import collector_zipapp; import sys; \
sys.stdout.buffer.write(collector_zipapp())" > "$payload"
    echo "wrote $payload ($(wc -c < "$payload") bytes); carry build/device to the device"
    exit 0
fi
out=${OUT:-$here/device-out}
mkdir -p "$out/facts" "$out/raw"
node=$(hostname -s)
nvidia-smi -L > "$out/raw/nvidia-smi-L.txt" 2>&1
timeout 60 python3 "$payload" --sources all --timeout 20 > "$out/facts/$node.json" 2> "$out/collector.stderr"
echo "collector exit $? -> $out/facts/$node.json ($(wc -c < "$out/facts/$node.json") bytes)"
for cmd in "nvidia-smi -q" "nvidia-smi topo -m" "nvidia-smi nvlink --status" "nvidia-smi nvlink -e" \
           "nvidia-smi --query-gpu=name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max,vbios_version --format=csv" \
           "lscpu" "numactl --hardware" "ibstat" "lspci -vvv" "dmesg"; do
    file="$out/raw/$(echo "$cmd" | tr -c 'A-Za-z0-9' '_' | cut -c1-60).txt"
    timeout 60 $cmd > "$file" 2>&1
    echo "$cmd: exit $? ($(wc -l < "$file") lines)"
done
python3 - "$out/facts/$node.json" <<'PY'
import json, sys
facts = json.load(open(sys.argv[1]))
for name, status in facts["sources"].items():
    print(f"source {name:16} ok={status['ok']} {status['duration_s']:.3f}s {status['error'] or ''}")
nvml = facts.get("nvml") or {}
print("driver", nvml.get("driver_version"), "gpus", nvml.get("device_count"))
for gpu in nvml.get("gpus", []):
    print(" ", gpu.get("index"), gpu.get("name"), gpu.get("bus_id"), gpu.get("memory_total_mib"), "MiB",
          "pcie", gpu.get("pcie"), "nvlink", len(gpu.get("nvlink") or []), "errors", gpu.get("errors"))
PY
