#!/usr/bin/env bash
# Stops gputide's local stack (examples/local/up.sh) and removes its state
# folder ($GPUTIDE_LOCAL_DIR, default out/local): the Autoscaler and the
# broker first (nothing scales or admits while jobs stop), then every job
# (stopped, their allocations waited for, then purged, so that Nomad leaves
# no task, logmon or mount behind), then Nomad and Consul. Any process still
# running from the state folder and any mount under it are then removed.
#   examples/local/down.sh      # or: make local-down
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$here/env.sh"
state="$GPUTIDE_LOCAL_DIR"

say() { printf '==> %s\n' "$*"; }

if [[ ! -d "$state" ]]; then
	say "no local stack ($state does not exist)"
	exit 0
fi

# mounts_under prints the mounts under the state folder, deepest first.
mounts_under() {
	awk -v d="$state/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r
}

pid_of() { [[ -f "$state/pids/$1.pid" ]] && cat "$state/pids/$1.pid"; }
alive() {
	local pid
	pid="$(pid_of "$1")" && [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}
# stop NAME SIGNAL SECONDS: signals the part and waits for it to exit, then
# kills it.
stop() {
	local name="$1" sig="$2" secs="$3" pid i
	alive "$name" || return 0
	pid="$(pid_of "$name")"
	say "stopping $name (pid $pid)"
	kill "-$sig" "$pid" 2>/dev/null || true
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "down.sh: $name did not exit within $secs s: killed" >&2
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.5
}

stop autoscaler INT 20
stop broker INT 20

# --- Jobs: stop all, wait for their allocations, purge ----------------------
if alive nomad; then
	token=""
	if [[ -f "$state/tokens.env" ]]; then
		token="$(sed -n 's/^GPUTIDE_LOCAL_TOKEN_MANAGEMENT=//p' "$state/tokens.env")"
	fi
	nomad_url="http://127.0.0.1:$GPUTIDE_LOCAL_NOMAD_HTTP"
	api() { # METHOD PATH
		curl -sf -X "$1" -H "X-Nomad-Token: $token" "$nomad_url$2"
	}
	jobs="$(api GET '/v1/jobs?namespace=*' | jq -r '.[] | "\(.Namespace) \(.ID)"' || true)"
	if [[ -n "$jobs" ]]; then
		say "stopping $(wc -l <<<"$jobs") jobs"
		while read -r ns id; do
			api DELETE "/v1/job/$id?namespace=$ns" >/dev/null || true
		done <<<"$jobs"
		live() {
			api GET '/v1/allocations?namespace=*' |
				jq -e '[.[] | select(.ClientStatus == "running" or .ClientStatus == "pending")] | length == 0' >/dev/null
		}
		for ((i = 0; i < 300; i++)); do
			live && break
			sleep 0.5
		done
		live || echo "down.sh: allocations still running after 150 s" >&2
		while read -r ns id; do
			api DELETE "/v1/job/$id?namespace=$ns&purge=true" >/dev/null || true
		done <<<"$jobs"
		# Let the client clean up the purged allocations: the server forgets
		# them first, then the client destroys each one's directory (its
		# logmon, its secrets and private mounts) on its own time, which on
		# a busy machine comes seconds later.
		for ((i = 0; i < 120; i++)); do
			[[ "$(api GET '/v1/allocations?namespace=*' | jq length)" == 0 && -z "$(mounts_under)" ]] && break
			sleep 0.5
		done
	fi
fi
stop nomad INT 60
stop consul INT 30

# --- Anything left: processes running from the state folder, mounts --------
# Tasks (and Nomad's logmon and executor) run with their working directory
# under the state folder; a part killed above may have left one.
left=()
for p in /proc/[0-9]*; do
	pid="${p#/proc/}"
	[[ "$pid" == "$$" ]] && continue
	cwd="$(readlink "$p/cwd" 2>/dev/null || true)"
	exe="$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null || true)"
	if [[ "$cwd" == "$state"/* || "$exe" == *"$state/"* ]]; then
		left+=("$pid")
	fi
done
if ((${#left[@]})); then
	echo "down.sh: processes left in $state: ${left[*]}: killed" >&2
	kill -KILL "${left[@]}" 2>/dev/null || true
	sleep 0.5
fi
mounts="$(mounts_under)"
if [[ -n "$mounts" ]]; then
	while read -r m; do
		echo "down.sh: unmounting $m" >&2
		umount "$m" 2>/dev/null || umount -l "$m" || true
	done <<<"$mounts"
fi

rm -rf "$state"
say "local stack stopped; $state removed"
