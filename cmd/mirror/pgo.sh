#!/usr/bin/env bash
# Writes cmd/mirror/default.pgo, the CPU profile `go build` and `go run`
# of ./cmd/mirror optimise with (profile-guided optimisation: hot calls
# inlined, hot interface calls devirtualised). Run it from anywhere in the
# repository after a change that moves the turn's hot path; a profile that
# has gone stale only optimises less (TestDefaultPGO says when
# it no longer covers the turn).
#
# The profile is of the gateway under BenchmarkExternalOpenAI's load, at
# 100 and at 1000 chats: the test binary as the gateway, a fake OpenAI
# server and a load client as separate processes. It is stored as the
# merged profile with the machine's paths taken out (the binary's path; the
# source paths are relative in a -trimpath build): TestDefaultPGO checks.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -trimpath -pgo=off -o "$tmp/mirror.test" .
for n in 100 1000; do
  # The test binary is the gateway (MIRROR_BENCH_GW_PROFILE), and also
  # what the benchmark would otherwise build: no build here reads the
  # profile being replaced.
  MIRROR_BENCH_BIN="$tmp/mirror.test" MIRROR_BENCH_GW_PROFILE="$tmp/p$n" MIRROR_BENCH_DURATION=20s "$tmp/mirror.test" \
    -test.run '^$' -test.bench "ExternalOpenAI/chats=$n\$" -test.benchtime 1x | grep Benchmark
done
go tool pprof -proto "$tmp/p100.cpu" "$tmp/p1000.cpu" >"$tmp/merged.pprof" 2>/dev/null
"$tmp/mirror.test" -test.run '^TestDefaultPGO$' -update-pgo "$tmp/merged.pprof"
echo "wrote $(pwd)/default.pgo"
