#!/usr/bin/env bash
# Builds the Consul v1.14.11 agent from the Go module proxy into a cache
# outside the clone, only when it is missing, and prints the binary's path.
#
#   bash e2e/tools/consul/build.sh          # prints ~/.cache/gputide-e2e/consul-1.14.11/consul
#
# Consul v1.15 and later pull in consul/envoyextensions and consul/troubleshoot,
# which are not under an open-source licence: the build fails if the module
# graph names either. GPUTIDE_E2E_CACHE overrides the cache root.
set -euo pipefail
cd "$(dirname "$0")"

version=1.14.11
cache="${GPUTIDE_E2E_CACHE:-$HOME/.cache/gputide-e2e}/consul-$version"
bin="$cache/consul"

# -e: inet.af/netaddr (a coredns requirement outside the build) is no longer
# served; its row is listed with an error instead of failing the listing.
modules="$(go list -m -e all)"
if grep -E 'github.com/hashicorp/consul/(envoyextensions|troubleshoot)( |$)' <<<"$modules" >&2; then
	echo "build.sh: the module graph names a Consul module that is not open source (above)" >&2
	exit 1
fi
if ! grep -qx "github.com/hashicorp/consul v$version" <<<"$modules"; then
	echo "build.sh: go.mod does not pin github.com/hashicorp/consul v$version" >&2
	exit 1
fi

if [[ ! -x "$bin" ]]; then
	mkdir -p "$cache"
	echo "build.sh: building consul v$version into $bin (several minutes)" >&2
	go build -trimpath -o "$bin.tmp" \
		-ldflags "-X github.com/hashicorp/consul/version.GitCommit=v$version -X github.com/hashicorp/consul/version.Version=$version -X github.com/hashicorp/consul/version.VersionPrerelease=" \
		github.com/hashicorp/consul
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
