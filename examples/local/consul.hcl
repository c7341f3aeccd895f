# Consul agent of the local stack: one server on loopback, the broker's
# durable store and leader lock (docs/store.md). A template: up.sh replaces
# each ${GPUTIDE_LOCAL_*} with its value (env.sh) and writes the result to
# $GPUTIDE_LOCAL_DIR/conf/consul.hcl, then runs
# `consul agent -config-file <that>`.
#
# Every port is set here, so that another Consul on this machine (on the
# default 8300-8302, 8500-8503 and 8600) does not clash: DNS, gRPC, gRPC TLS
# and HTTPS are off, as e2e/tools/consul/ci-agent.sh does.

node_name        = "gputide-local"
datacenter       = "dc1"
data_dir         = "${GPUTIDE_LOCAL_DIR}/consul/data"
server           = true
bootstrap_expect = 1
bind_addr        = "127.0.0.1"
client_addr      = "127.0.0.1"
advertise_addr   = "127.0.0.1"
log_level        = "WARN"

# No call to checkpoint-api.hashicorp.com.
disable_update_check = true

ports {
  http     = ${GPUTIDE_LOCAL_CONSUL_HTTP}
  server   = ${GPUTIDE_LOCAL_CONSUL_SERVER}
  serf_lan = ${GPUTIDE_LOCAL_CONSUL_SERF_LAN}
  serf_wan = ${GPUTIDE_LOCAL_CONSUL_SERF_WAN}
  https    = -1
  dns      = -1
  grpc     = -1
  grpc_tls = -1
}
