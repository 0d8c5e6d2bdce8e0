#!/usr/bin/env bash
# stage.sh: builds the grove binary and the GPU test binaries here and copies them, stripped,
# into .device/ (git-ignored) for tools/ge/gpu_check.sh on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release 2>&1 | tail -1
GROVE_TEST_GPU=1 cargo test --release --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
' >.device.list
mkdir -p .device
strip -o .device/grove target/release/grove
while read -r name exe; do
    case " ${TESTS:-map_trees cuda_evolve cuda_map cuda_vary backends cuda_kernels cuda_control} " in
        *" $name "*) strip -o ".device/$name" "$exe" ;;
    esac
done <.device.list
rm -f .device.list
du -sh .device
