#!/usr/bin/env bash
# Starts gputide's local stack on this machine, on 127.0.0.1 only:
#
#   examples/local/up.sh [-acl]      # or: make local  (make local ACL=1)
#   examples/local/down.sh           # or: make local-down
#
# In order, waiting for each part to answer: Consul (the broker's store),
# Nomad (a dev agent: server and client, the mock device plugin's 8 GPUs),
# the workspaces (namespaces) and the holding pool, with -acl Nomad's ACLs
# (bootstrap, the example policies, named tokens), the broker (`gputide
# agent` on the Consul store; it seeds the quota tree from quota.hcl), the
# Nomad Autoscaler with the three gputide plugins. Then it prints every
# address and the tokens.
#
# Agents: NOMAD_BIN, CONSUL_BIN and NOMAD_AUTOSCALER_BIN, else the project's
# pinned Nomad (../shared/nomad/nomad-bin beside the repository) and the
# builds that .ci/run caches (e2e/tools/consul/build.sh,
# e2e/tools/autoscaler/build.sh: they build into ~/.cache/gputide-e2e when
# missing, several minutes each). bin/ comes from `make build`, run when a
# binary is missing. Ports and the state folder: env.sh (all overridable
# from the environment). Everything the stack writes is under
# $GPUTIDE_LOCAL_DIR (default out/local); down.sh stops it and removes it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$here/env.sh"

acl=false
for arg in "$@"; do
	case "$arg" in
	-acl | --acl) acl=true ;;
	-h | -help | --help)
		sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "up.sh: unknown argument $arg (usage: up.sh [-acl])" >&2
		exit 2
		;;
	esac
done

state="$GPUTIDE_LOCAL_DIR"
started_at=$(date +%s)

say() { printf '==> %s\n' "$*"; }
die() {
	echo "up.sh: $*" >&2
	exit 1
}

# --- Already running? Ports free? --------------------------------------------
for part in "${gputide_local_parts[@]}"; do
	pidfile="$state/pids/$part.pid"
	if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
		die "the local stack is already running ($part, pid $(cat "$pidfile")); stop it with examples/local/down.sh"
	fi
done
if [[ -e "$state" ]]; then
	die "$state is left from an earlier stack: run examples/local/down.sh first (it removes it)"
fi
for port in "$GPUTIDE_LOCAL_NOMAD_HTTP" "$GPUTIDE_LOCAL_NOMAD_RPC" "$GPUTIDE_LOCAL_NOMAD_SERF" \
	"$GPUTIDE_LOCAL_CONSUL_HTTP" "$GPUTIDE_LOCAL_CONSUL_SERVER" "$GPUTIDE_LOCAL_CONSUL_SERF_LAN" \
	"$GPUTIDE_LOCAL_CONSUL_SERF_WAN" "$GPUTIDE_LOCAL_BROKER_HTTP" "$GPUTIDE_LOCAL_AUTOSCALER_HTTP"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "port $port on 127.0.0.1 is taken; set another in the environment (see examples/local/env.sh)"
	fi
done

# --- Binaries ----------------------------------------------------------------
bin="$GPUTIDE_LOCAL_BIN"
if [[ ! -x "$bin/gputide" || ! -x "$bin/nomad-device-gputide" || ! -x "$bin/plugins/gputide-apm" ||
	! -x "$bin/plugins/gputide-schedule" || ! -x "$bin/plugins/gputide-idle" ]]; then
	say "$bin is incomplete: make build BIN=$bin"
	make -C "$repo" build BIN="$bin"
fi
if [[ -z "${NOMAD_BIN:-}" ]]; then
	[[ -x "$repo/../shared/nomad/nomad-bin" ]] ||
		die "NOMAD_BIN is unset and ../shared/nomad/nomad-bin is not beside the repository: set NOMAD_BIN to a Nomad v1.11 binary"
	NOMAD_BIN="$("$repo/../shared/nomad/nomad-bin")"
fi
if [[ -z "${CONSUL_BIN:-}" ]]; then
	say "CONSUL_BIN unset: e2e/tools/consul/build.sh (builds Consul v1.14.11 when missing, several minutes)"
	CONSUL_BIN="$(bash "$repo/e2e/tools/consul/build.sh" | tail -n 1)"
fi
if [[ -z "${NOMAD_AUTOSCALER_BIN:-}" ]]; then
	say "NOMAD_AUTOSCALER_BIN unset: e2e/tools/autoscaler/build.sh (builds nomad-autoscaler v0.5.0 when missing, about 5 minutes)"
	NOMAD_AUTOSCALER_BIN="$(bash "$repo/e2e/tools/autoscaler/build.sh" | tail -n 1)"
fi
for b in "$NOMAD_BIN" "$CONSUL_BIN" "$NOMAD_AUTOSCALER_BIN"; do
	[[ -x "$b" ]] || die "$b: not an executable"
done
say "nomad:      $NOMAD_BIN"
say "consul:     $CONSUL_BIN"
say "autoscaler: $NOMAD_AUTOSCALER_BIN"

mkdir -p "$state"/{conf,logs,pids,dumps,consul,nomad/data,nomad/plugins}
chmod 700 "$state"
cp "$bin/nomad-device-gputide" "$state/nomad/plugins/"
: >"$state/gpu-faults"

# --- On failure: show the failing part's log, then stop everything ---------
current=""
on_exit() {
	local rc=$?
	if [[ $rc -ne 0 ]]; then
		if [[ -n "$current" && -f "$state/logs/$current.log" ]]; then
			echo "up.sh: $current failed; the end of $state/logs/$current.log:" >&2
			tail -n 40 "$state/logs/$current.log" >&2
		fi
		echo "up.sh: failed after $(($(date +%s) - started_at)) s; stopping what was started (down.sh)" >&2
		"$here/down.sh" >&2 || true
	fi
}
trap on_exit EXIT

# --- Configs: the templates with ${GPUTIDE_LOCAL_*} replaced ---------------
export GPUTIDE_LOCAL_REPO="$repo" GPUTIDE_LOCAL_ACL="$acl" GPUTIDE_LOCAL_BROKER_AUTH
if $acl; then
	GPUTIDE_LOCAL_BROKER_AUTH='admin_policy = "gputide-admin"'
else
	GPUTIDE_LOCAL_BROKER_AUTH='open_reads_without_acl = true'
fi
render() {
	local src="$1" dst="$2" text var
	text="$(<"$src")"
	for var in GPUTIDE_LOCAL_DIR GPUTIDE_LOCAL_BIN GPUTIDE_LOCAL_REPO GPUTIDE_LOCAL_ACL GPUTIDE_LOCAL_BROKER_AUTH \
		GPUTIDE_LOCAL_NOMAD_HTTP GPUTIDE_LOCAL_NOMAD_RPC GPUTIDE_LOCAL_NOMAD_SERF \
		GPUTIDE_LOCAL_CONSUL_HTTP GPUTIDE_LOCAL_CONSUL_SERVER GPUTIDE_LOCAL_CONSUL_SERF_LAN \
		GPUTIDE_LOCAL_CONSUL_SERF_WAN GPUTIDE_LOCAL_BROKER_HTTP GPUTIDE_LOCAL_AUTOSCALER_HTTP; do
		text="${text//"\${$var}"/${!var}}"
	done
	# shellcheck disable=SC2016 # the placeholder's text, not an expansion
	if [[ "$text" == *'${GPUTIDE_LOCAL_'[A-Z]* ]]; then
		die "$src: a placeholder is left after rendering"
	fi
	printf '%s\n' "$text" >"$dst"
}
for c in consul nomad broker autoscaler; do
	render "$here/$c.hcl" "$state/conf/$c.hcl"
done

# start NAME CMD...: runs CMD in the background, its output in logs/NAME.log,
# its pid in pids/NAME.pid. On its own line, so that $! is the agent's pid.
start() {
	local name="$1"
	shift
	current="$name"
	"$@" </dev/null >"$state/logs/$name.log" 2>&1 &
	echo $! >"$state/pids/$name.pid"
}

# wait_for NAME SECONDS CMD...: polls CMD until it succeeds; fails when the
# part's process has exited or the time is up.
wait_for() {
	local name="$1" secs="$2" deadline
	shift 2
	deadline=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		if ! kill -0 "$(cat "$state/pids/$name.pid")" 2>/dev/null; then
			die "$name exited"
		fi
		if (($(date +%s) > deadline)); then
			die "$name did not answer within $secs s"
		fi
		sleep 0.5
	done
}

nomad_url="http://127.0.0.1:$GPUTIDE_LOCAL_NOMAD_HTTP"
consul_url="http://127.0.0.1:$GPUTIDE_LOCAL_CONSUL_HTTP"
broker_url="http://127.0.0.1:$GPUTIDE_LOCAL_BROKER_HTTP"
autoscaler_url="http://127.0.0.1:$GPUTIDE_LOCAL_AUTOSCALER_HTTP"

# --- Consul ------------------------------------------------------------------
say "starting Consul on $consul_url"
start consul "$CONSUL_BIN" agent -config-file "$state/conf/consul.hcl"
consul_leader() { curl -sf "$consul_url/v1/status/leader" | grep -q '"[^"]'; }
wait_for consul 60 consul_leader

# --- Nomad -------------------------------------------------------------------
say "starting Nomad on $nomad_url (AWS_CA_BUNDLE unset for it)"
start nomad env -u AWS_CA_BUNDLE -u NOMAD_TOKEN -u NOMAD_ADDR "$NOMAD_BIN" agent -dev -bind 127.0.0.1 -config "$state/conf/nomad.hcl"
wait_for nomad 60 curl -sf "$nomad_url/v1/agent/health"

export NOMAD_ADDR="$nomad_url"
unset NOMAD_TOKEN NOMAD_NAMESPACE NOMAD_REGION
mgmt=""
nomad_cli() { "$NOMAD_BIN" "$@"; }
if $acl; then
	say "bootstrapping Nomad's ACLs"
	bootstrap() {
		mgmt="$(nomad_cli acl bootstrap -json | jq -er .SecretID)"
	}
	wait_for nomad 30 bootstrap
	export NOMAD_TOKEN="$mgmt"
fi

healthy_gpus() {
	local auth=()
	[[ -n "$mgmt" ]] && auth=(-H "X-Nomad-Token: $mgmt")
	local id
	id="$(curl -sf "${auth[@]}" "$nomad_url/v1/nodes" | jq -er '.[] | select(.Status == "ready") | .ID' | head -n 1)"
	[[ -n "$id" ]] || return 1
	local n
	n="$(curl -sf "${auth[@]}" "$nomad_url/v1/node/$id" |
		jq '[.NodeResources.Devices[]? | select(.Type == "gpu") | .Instances[] | select(.Healthy)] | length')"
	[[ "$n" == 8 ]]
}
say "waiting for the client's 8 mock GPUs"
wait_for nomad 90 healthy_gpus

# --- Workspaces and pools ---------------------------------------------------
current=""
say "creating the workspaces (namespaces) and the holding pool"
for ns in a b c; do
	nomad_cli namespace apply "$repo/examples/reference/namespaces/workspace-$ns.hcl" >/dev/null
done
nomad_cli node pool apply "$here/holding-pool.hcl" >/dev/null

# --- ACL policies and tokens ------------------------------------------------
tokens="$state/tokens.env"
token_of() { # NAME POLICY
	nomad_cli acl token create -name "$1" -policy "$2" -json | jq -er .SecretID
}
broker_token="" autoscaler_token="" admin="" team_a="" team_b="" team_c=""
if $acl; then
	say "applying the example ACL policies (examples/reference/acl/) and creating tokens"
	for t in a b c; do
		nomad_cli acl policy apply -description "Team ${t^^}" "team-$t" "$repo/examples/reference/acl/team-$t.policy.hcl" >/dev/null
	done
	nomad_cli acl policy apply -description "gputide admins" gputide-admin "$repo/examples/reference/acl/gputide-admin.policy.hcl" >/dev/null
	nomad_cli acl policy apply -description "gputide broker" gputide-broker "$repo/examples/reference/acl/gputide-broker.policy.hcl" >/dev/null
	nomad_cli acl policy apply -description "gputide autoscaler" gputide-autoscaler "$repo/examples/reference/autoscaler/autoscaler-acl.hcl" >/dev/null
	admin="$(token_of admin gputide-admin)"
	team_a="$(token_of team-a team-a)"
	team_b="$(token_of team-b team-b)"
	team_c="$(token_of team-c team-c)"
	broker_token="$(token_of gputide-broker gputide-broker)"
	autoscaler_token="$(token_of gputide-autoscaler gputide-autoscaler)"
else
	# ACLs off: the broker's own admin token guards its writes.
	admin="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
fi
umask 077
cat >"$tokens" <<EOF
# The local stack's tokens (up.sh$($acl && echo ' -acl')). Secrets: keep this file to yourself.
GPUTIDE_LOCAL_TOKEN_ADMIN=$admin
GPUTIDE_LOCAL_TOKEN_TEAM_A=$team_a
GPUTIDE_LOCAL_TOKEN_TEAM_B=$team_b
GPUTIDE_LOCAL_TOKEN_TEAM_C=$team_c
GPUTIDE_LOCAL_TOKEN_MANAGEMENT=$mgmt
GPUTIDE_LOCAL_TOKEN_BROKER=$broker_token
GPUTIDE_LOCAL_TOKEN_AUTOSCALER=$autoscaler_token
EOF
cat >"$state/env" <<EOF
# source $state/env: the local stack's nomad, consul and gputide on PATH and
# their addresses (no token: pass -token, or set NOMAD_TOKEN).
export PATH="$bin:$(dirname "$NOMAD_BIN"):$(dirname "$CONSUL_BIN"):\$PATH"
export NOMAD_ADDR=$nomad_url
export CONSUL_HTTP_ADDR=127.0.0.1:$GPUTIDE_LOCAL_CONSUL_HTTP
export GPUTIDE_ADDR=$broker_url
EOF
umask 022

# --- The broker (its tree: quota.hcl, seeded into Consul) ------------------
say "starting the broker on $broker_url (Consul store; the tree seeded from examples/local/quota.hcl)"
if $acl; then
	start broker env NOMAD_TOKEN="$broker_token" "$bin/gputide" agent -config "$state/conf/broker.hcl"
else
	start broker env -u NOMAD_TOKEN GPUTIDE_ADMIN_TOKEN="$admin" "$bin/gputide" agent -config "$state/conf/broker.hcl"
fi
broker_acting() {
	curl -sf "$broker_url/v1/agent/health" | jq -e '.acting and .is_leader and .store == "consul"'
}
wait_for broker 60 broker_acting
broker_tree() {
	curl -sf -H "X-Nomad-Token: $admin" "$broker_url/v1/quotas" | jq -e '[.quotas[].name] == ["Quota1", "Quota1.1", "Quota1.2"]'
}
wait_for broker 30 broker_tree

# --- The Nomad Autoscaler ---------------------------------------------------
say "starting the Nomad Autoscaler on $autoscaler_url (plugins: $bin/plugins)"
if $acl; then
	start autoscaler env -u AWS_CA_BUNDLE NOMAD_TOKEN="$autoscaler_token" "$NOMAD_AUTOSCALER_BIN" agent -config "$state/conf/autoscaler.hcl"
else
	start autoscaler env -u AWS_CA_BUNDLE -u NOMAD_TOKEN "$NOMAD_AUTOSCALER_BIN" agent -config "$state/conf/autoscaler.hcl"
fi
wait_for autoscaler 60 curl -sf "$autoscaler_url/v1/health"
current=""

# --- Ready -------------------------------------------------------------------
cat <<EOF

gputide local stack ready in $(($(date +%s) - started_at)) s$($acl && echo ', Nomad ACLs on').
  Nomad        $nomad_url
  Consul       $consul_url
  broker       $broker_url   (status page: $broker_url/ui/)
  autoscaler   $autoscaler_url
  state        $state   (logs/, conf/, tokens.env; removed by down.sh)

EOF
if $acl; then
	cat <<EOF
Tokens (also in $tokens):
  admin   $admin   (policy gputide-admin: the broker's admins; reads all of Nomad)
  team A  $team_a   (policy team-a: workspace-a)
  team B  $team_b   (policy team-b: workspace-b)
  team C  $team_c   (policy team-c: workspace-c)
  Nomad's bootstrap (management) token: GPUTIDE_LOCAL_TOKEN_MANAGEMENT in the same file.

EOF
else
	cat <<EOF
Nomad's ACLs are off (up.sh -acl turns them on). The broker's admin token,
for its writes (gputide quota move, -token or NOMAD_TOKEN):
  admin   $admin   (also in $tokens)

EOF
fi
cat <<EOF
  source $state/env     # nomad, consul, gputide on PATH; NOMAD_ADDR, CONSUL_HTTP_ADDR, GPUTIDE_ADDR
  gputide quota status -token <admin>
  nomad job run examples/local/jobs/team-c-training.nomad.hcl
Next steps: docs/quickstart.md. Stop and remove everything: examples/local/down.sh
EOF
