#!/usr/bin/env bash
# The one device check for tensorproc's CUDA tensors (docs/cuda.md, "What is left to check on
# a device"). Run from the repository root on the GPU machine after .gpu/prepare.sh here:
#   run(command: "bash .gpu/run.sh", carry: ["build/Release", "dist", ".gpu/node.xz", ".gpu/probe-bin"], timeout_s: 540)
# Phases, each capped, about 8 minutes at worst:
#   0 environment  1 driver probe (C, no toolkit: the driver facts the design rests on)
#   2 tensorproc doctor  3 tensorproc's CUDA tests on the real driver (a skip is a failure)
#   4 CUDA bench (W-cuda) beside torch (bench/anchors/torch-cuda.py)
# Writes summary.txt env.txt probe-build.txt probe.txt doctor.txt tests.txt bench.json to $OUT.
# TP_GPU_STANDIN=<libfakecuda.so> runs it all against the stand-in (a rehearsal on any machine).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cd "$(dirname "$0")/.."
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
cap() { local s=$1; shift; timeout --kill-after=5 "$s" "$@"; }
if [ -n "${TP_GPU_STANDIN:-}" ]; then export TENSORPROC_CUDA_LIBRARY=$TP_GPU_STANDIN; log "REHEARSAL against the stand-in $TP_GPU_STANDIN"; fi

log "phase 0: environment"
{ uname -a; head -2 /etc/os-release 2>/dev/null; ldd --version 2>&1 | head -1
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_mode --format=csv 2>&1 | head -3
  command -v nvcc >/dev/null && nvcc --version | tail -2; command -v cc gcc g++ python3 node || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1
  id -u; ulimit -n; df -h /dev/shm | tail -1; } > "$OUT/env.txt" 2>&1
head -4 "$OUT/env.txt" | tee -a "$OUT/summary.txt"

log "phase 1: driver probe"
PROBE=/tmp/tp-probe
if command -v cc >/dev/null && cc -O2 -Wall -o "$PROBE" .gpu/probe.c -ldl 2>"$OUT/probe-build.txt"; then echo "probe built here" >> "$OUT/summary.txt"
else cp .gpu/probe-bin "$PROBE" && chmod +x "$PROBE" && echo "probe: carried binary" >> "$OUT/summary.txt"; fi
cap 100 "$PROBE" > "$OUT/probe.txt" 2>&1; rc=$?
log "probe exit $rc (0 pass, 1 failed checks, 77 no driver, 124 timeout)"
grep -E '^(CHECK .*FAIL|SUMMARY|SKIP)' "$OUT/probe.txt" | tee -a "$OUT/summary.txt"

log "phase 2: node and doctor"
NODE=$(command -v node || true)
if [ -z "$NODE" ] || [ "$("$NODE" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -lt 20 ]; then
  if [ -f .gpu/node.xz ]; then xz -dc .gpu/node.xz > /tmp/tp-node && chmod +x /tmp/tp-node && NODE=/tmp/tp-node; else NODE=; fi
fi
if [ -z "$NODE" ] || [ ! -f build/Release/tensorproc.node ] || [ ! -d dist/test/cuda ]; then
  log "no node, addon or dist carried: phases 2-4 skipped (run .gpu/prepare.sh, carry build/Release dist .gpu/node.xz)"
  exit 1
fi
mkdir -p /tmp/tp-bin && ln -sf "$NODE" /tmp/tp-bin/node && export PATH=/tmp/tp-bin:$PATH
"$NODE" --version | tee -a "$OUT/summary.txt"
cap 60 "$NODE" dist/src/cli/main.js doctor > "$OUT/doctor.txt" 2>&1
grep -iE 'cuda|addon|FAIL' "$OUT/doctor.txt" | tee -a "$OUT/summary.txt"

log "phase 3: CUDA tests (real driver; TENSORPROC_REQUIRE_CUDA=1: a skip is a failure)"
if [ -n "${TP_GPU_STANDIN:-}" ]; then REAL=0; else REAL=1; fi
TP_CUDA_REAL=$REAL TENSORPROC_REQUIRE_CUDA=1 cap 200 "$NODE" test/run.mjs test/cuda/ > "$OUT/tests.txt" 2>&1; rc=$?
log "tests exit $rc"; grep -E '^# (tests|pass|fail|skipped)|^not ok|^ *not ok' "$OUT/tests.txt" | tee -a "$OUT/summary.txt"

log "phase 4: CUDA bench (W-cuda) beside torch"
rm -f "$OUT/bench.json"
cap 180 "$NODE" dist/bench/cuda.js ${TP_GPU_STANDIN:+--quick} --json "$OUT/bench.json" 2>&1 | tail -20 | tee -a "$OUT/summary.txt"
log "done"
