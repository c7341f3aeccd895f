# Sourced by .ci/run (bash): builds or reuses the Consul v1.14.11 agent,
# starts one server on loopback for the store suite and stops it when the
# shell exits. Exports:
#   CONSUL_BIN           the agent binary (tests that kill or restart Consul start their own)
#   GPUTIDE_CONSUL_ADDR  host:port of the running server's HTTP API
# Ports are free ones picked at random; DNS and gRPC are off.

gputide_consul_root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONSUL_BIN="$(bash "$gputide_consul_root/build.sh")"
export CONSUL_BIN

# A free loopback port: random in 20000-59999, not already listening.
gputide_free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "ci-agent.sh: no free port found" >&2
	return 1
}

gputide_consul_dir="$(mktemp -d)"
gputide_consul_http="$(gputide_free_port)"
"$CONSUL_BIN" agent -server -bootstrap-expect=1 -data-dir "$gputide_consul_dir/data" \
	-node gputide-ci -bind 127.0.0.1 -client 127.0.0.1 -advertise 127.0.0.1 \
	-http-port "$gputide_consul_http" -dns-port -1 -grpc-port -1 -grpc-tls-port -1 \
	-serf-lan-port "$(gputide_free_port)" -serf-wan-port "$(gputide_free_port)" \
	-server-port "$(gputide_free_port)" -log-level warn >"$gputide_consul_dir/consul.log" 2>&1 &
gputide_consul_pid=$!

gputide_stop_consul() {
	if [[ -n "${gputide_consul_pid:-}" ]]; then
		kill "$gputide_consul_pid" 2>/dev/null || true
		wait "$gputide_consul_pid" 2>/dev/null || true
		gputide_consul_pid=""
	fi
	rm -rf "$gputide_consul_dir"
}
trap gputide_stop_consul EXIT

# Wait (up to 60 s) until the server has elected itself leader.
gputide_consul_leader=""
for _ in $(seq 600); do
	gputide_consul_leader="$( (exec 3<>"/dev/tcp/127.0.0.1/$gputide_consul_http" &&
		printf 'GET /v1/status/leader HTTP/1.0\r\n\r\n' >&3 && tail -n 1 <&3) 2>/dev/null | tr -d '"\r')" || true
	[[ -n "$gputide_consul_leader" ]] && break
	if ! kill -0 "$gputide_consul_pid" 2>/dev/null; then
		break
	fi
	sleep 0.1
done
if [[ -z "$gputide_consul_leader" ]]; then
	echo "ci-agent.sh: consul did not start; its log:" >&2
	cat "$gputide_consul_dir/consul.log" >&2
	exit 1
fi
export GPUTIDE_CONSUL_ADDR="127.0.0.1:$gputide_consul_http"
echo "consul $("$CONSUL_BIN" version | head -n 1) at $GPUTIDE_CONSUL_ADDR (leader $gputide_consul_leader)"
