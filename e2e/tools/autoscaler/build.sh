#!/usr/bin/env bash
# Builds the Nomad Autoscaler v0.5.0 agent from the Go module proxy (this tools module
# pins it; `go install ...@v0.5.0` does not work, see
# ../shared/reference/nomad-stack-facts.md) into
# ${GPUTIDE_E2E_CACHE:-~/.cache/gputide-e2e}/nomad-autoscaler-0.5.0/nomad-autoscaler,
# only when that file is missing (a cold build takes about 5 minutes on 2 cores).
# Prints the binary's path on its last line of stdout; build output goes to stderr.
set -euo pipefail
cd "$(dirname "$0")"
version=0.5.0
dir="${GPUTIDE_E2E_CACHE:-$HOME/.cache/gputide-e2e}/nomad-autoscaler-${version}"
bin="$dir/nomad-autoscaler"
if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	echo "building nomad-autoscaler v${version} into $dir" >&2
	# Build to a temporary name, then rename: an interrupted build leaves no binary
	# that a later run would take for a finished one.
	go build -trimpath \
		-ldflags "-X github.com/hashicorp/nomad-autoscaler/version.GitDescribe=v${version}" \
		-o "$bin.tmp.$$" github.com/hashicorp/nomad-autoscaler >&2
	mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
