#!/usr/bin/env bash
# Run HERE (a machine with Node and a compiler, no GPU needed) before the device run: builds
# what must travel to the GPU machine, which has no Node. Then, on the device:
#   run(command: "bash .gpu/run.sh", carry: ["build/Release", "dist", ".gpu/node.xz", ".gpu/probe-bin"], timeout_s: 540)
# The addon is built against this Node, and this Node travels (ABI match).
set -euo pipefail
cd "$(dirname "$0")/.."
npm run build >/dev/null
cc -O2 -Wall -o .gpu/probe-bin .gpu/probe.c -ldl
[ -f .gpu/node.xz ] && [ .gpu/node.xz -nt "$(command -v node)" ] || xz -T4 -6 -c "$(command -v node)" > .gpu/node.xz
du -sh build/Release dist .gpu/node.xz .gpu/probe-bin
# The stand-in run of the same script: every phase's plumbing, with fakecuda as the "device".
echo "prepared; node $(node --version); total carried: $(du -sch build/Release dist .gpu/node.xz .gpu/probe-bin | tail -1)"
