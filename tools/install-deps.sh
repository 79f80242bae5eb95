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
# clang-tidy checks function sizes (tools/tidy.sh).
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  cmake make g++ clang clang-tidy llvm pkg-config libclang-rt-14-dev \
  libbpf-dev bpftool libelf-dev zlib1g-dev liblzma-dev libcli11-dev libgtest-dev libiberty-dev \
  libc6-dbg bpftrace chromium golang-go libxml2-utils bash-completion man-db >/dev/null
