#!/bin/sh
# Installs what offcpu needs to build and test, from Debian 12 packages.
# Run as root. libc6-dbg lets offcpu name glibc's internal functions
# (start_thread...) and the tests check that it does; bpftrace is the
# independent measurement the rwsem tests compare against; chromium renders
# the SVG flame graphs and golang-go's `go tool pprof` reads the pprof files
# in the tests; xmllint (libxml2-utils) checks that SVGs are well-formed XML;
# bash-completion exercises the completion script; libiberty-dev demangles
# Rust names;
# libclang-rt-14-dev is libFuzzer and the sanitizers (tools/fuzz.sh);
# clang-tidy checks function sizes (tools/tidy.sh); protobuf-compiler's protoc
# decodes the timeline's Perfetto traces against Perfetto's schema.
# speedscope, the viewer the timeline's JSON is opened in (tests), comes from
# npm into /opt/offcpu-test (the tests skip without it; nothing downloads at
# build or test time). npm is nodejs's own (nodesource's nodejs ships it):
# Debian's npm package conflicts with it, so it is not installed here; where
# there is no npm the step is skipped with a note.
# With --bench, also what the benchmark (tools/bench/bench.py) needs: it
# compares with libbpf-tools, drives the pipe load with linux-perf and the
# server loads with redis-server, redis-tools and postgresql (pgbench is in
# postgresql-contrib's set on older releases); the bench starts the servers
# itself, not as services. CI does not install them: the tests do not need
# them.
# libdw-dev reads DWARF (inlined functions, source lines), libdebuginfod-dev
# fetches debug files (debuginfod serves them in its test) and python3.11-dbg
# is the debug info of Debian's python3, which the tests compare with gdb.
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  cmake make g++ clang clang-tidy llvm pkg-config libclang-rt-14-dev \
  libbpf-dev bpftool libelf-dev zlib1g-dev liblzma-dev libcli11-dev libgtest-dev libiberty-dev \
  libc6-dbg libdw-dev libdebuginfod-dev debuginfod python3.11-dbg bpftrace chromium golang-go libxml2-utils bash-completion man-db \
  protobuf-compiler >/dev/null
SPEEDSCOPE_VERSION=1.25.0
if command -v npm >/dev/null 2>&1; then
  mkdir -p /opt/offcpu-test
  npm install --silent --no-audit --no-fund --prefix /opt/offcpu-test \
    "speedscope@$SPEEDSCOPE_VERSION" >/dev/null
else
  echo "install-deps: no npm: speedscope not installed (its test will skip)" >&2
fi
if [ "${1:-}" = --bench ]; then
  apt-get install -y -qq --no-install-recommends \
    linux-perf libbpf-tools redis-server redis-tools postgresql postgresql-contrib >/dev/null
  # The packages' own services are not needed: the bench starts its own.
  systemctl disable --now redis-server postgresql >/dev/null 2>&1 || true
fi
