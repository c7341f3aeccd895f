# shellcheck shell=bash
# Sourced by up.sh and down.sh: the local stack's state folder and every port
# it listens on, in one place. Each is overridable from the environment; the
# defaults clash with no default port of Nomad (4646-4648), Consul
# (8300-8302, 8500-8503, 8600), the Nomad Autoscaler (8080) or the broker
# (4780), so a stack of those can run beside this one. Everything listens on
# 127.0.0.1 only.

# All state (data dirs, rendered configs, logs, pids, tokens) lives here;
# down.sh removes it.
GPUTIDE_LOCAL_DIR="${GPUTIDE_LOCAL_DIR:-$repo/out/local}"

# The gputide binaries of `make build`: gputide, nomad-device-gputide and
# plugins/ (the Autoscaler plugins). up.sh runs `make build` when one is
# missing from the default folder.
GPUTIDE_LOCAL_BIN="${GPUTIDE_LOCAL_BIN:-$repo/bin}"

# Nomad: HTTP API, RPC, Serf.
GPUTIDE_LOCAL_NOMAD_HTTP="${GPUTIDE_LOCAL_NOMAD_HTTP:-14646}"
GPUTIDE_LOCAL_NOMAD_RPC="${GPUTIDE_LOCAL_NOMAD_RPC:-14647}"
GPUTIDE_LOCAL_NOMAD_SERF="${GPUTIDE_LOCAL_NOMAD_SERF:-14648}"

# Consul: HTTP API, server RPC, Serf LAN and WAN. DNS, gRPC, gRPC TLS and
# HTTPS are off (-1) in consul.hcl.
GPUTIDE_LOCAL_CONSUL_HTTP="${GPUTIDE_LOCAL_CONSUL_HTTP:-18500}"
GPUTIDE_LOCAL_CONSUL_SERVER="${GPUTIDE_LOCAL_CONSUL_SERVER:-18300}"
GPUTIDE_LOCAL_CONSUL_SERF_LAN="${GPUTIDE_LOCAL_CONSUL_SERF_LAN:-18301}"
GPUTIDE_LOCAL_CONSUL_SERF_WAN="${GPUTIDE_LOCAL_CONSUL_SERF_WAN:-18302}"

# The broker's HTTP API and status page, and the Nomad Autoscaler's HTTP API.
GPUTIDE_LOCAL_BROKER_HTTP="${GPUTIDE_LOCAL_BROKER_HTTP:-14780}"
GPUTIDE_LOCAL_AUTOSCALER_HTTP="${GPUTIDE_LOCAL_AUTOSCALER_HTTP:-18080}"

export GPUTIDE_LOCAL_DIR GPUTIDE_LOCAL_BIN GPUTIDE_LOCAL_NOMAD_HTTP GPUTIDE_LOCAL_NOMAD_RPC GPUTIDE_LOCAL_NOMAD_SERF \
	GPUTIDE_LOCAL_CONSUL_HTTP GPUTIDE_LOCAL_CONSUL_SERVER GPUTIDE_LOCAL_CONSUL_SERF_LAN \
	GPUTIDE_LOCAL_CONSUL_SERF_WAN GPUTIDE_LOCAL_BROKER_HTTP GPUTIDE_LOCAL_AUTOSCALER_HTTP

# The stack's parts, in start order (up.sh checks none is running).
# shellcheck disable=SC2034 # used by up.sh
gputide_local_parts=(consul nomad broker autoscaler)
