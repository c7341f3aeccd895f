# Nomad agent of the local stack: server and client in one dev agent
# (`nomad agent -dev -bind 127.0.0.1 -config <this, rendered>`), on loopback,
# with the mock device plugin's 8 A100s (docs/device-plugin.md) and raw_exec
# for the example jobs. A template: up.sh replaces each ${GPUTIDE_LOCAL_*}
# with its value (env.sh) and writes the result to
# $GPUTIDE_LOCAL_DIR/conf/nomad.hcl; ${GPUTIDE_LOCAL_ACL} is true with -acl.
#
# Start it with AWS_CA_BUNDLE unset: with it set, the client's AWS
# fingerprinter fails and the agent exits ("failed to setup IMDS client").

name       = "gputide-local"
data_dir   = "${GPUTIDE_LOCAL_DIR}/nomad/data"
plugin_dir = "${GPUTIDE_LOCAL_DIR}/nomad/plugins"
bind_addr  = "127.0.0.1"
log_level  = "INFO"

# No call to checkpoint-api.hashicorp.com.
disable_update_check = true

ports {
  http = ${GPUTIDE_LOCAL_NOMAD_HTTP}
  rpc  = ${GPUTIDE_LOCAL_NOMAD_RPC}
  serf = ${GPUTIDE_LOCAL_NOMAD_SERF}
}

advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

client {
  enabled = true
  # The example training jobs give their workers 2m to checkpoint
  # (kill_timeout = "2m"); the client caps every task's kill_timeout at
  # max_kill_timeout, 30s by default, which would kill them mid-checkpoint.
  max_kill_timeout = "5m"
}

acl {
  enabled = ${GPUTIDE_LOCAL_ACL}
}

# The stack's own Consul, not one on the default port; Nomad registers
# nothing there (the broker uses Consul, Nomad does not need it).
consul {
  address          = "127.0.0.1:${GPUTIDE_LOCAL_CONSUL_HTTP}"
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}

# The example jobs run with raw_exec: a shell loop that holds its GPUs.
plugin "raw_exec" {
  config {
    enabled = true
  }
}

# bin/nomad-device-gputide from `make build`, copied into plugin_dir by
# up.sh. The block's name is the binary's file name; Nomad 1.10 and later
# skip plugin binaries without a block.
plugin "nomad-device-gputide" {
  config {
    backend             = "mock"
    mock_profile        = "dgxa100" # 8 x A100-SXM4-40GB
    mock_fault_file     = "${GPUTIDE_LOCAL_DIR}/gpu-faults" # echo "3 xid 79" >> it: GPU 3 falls off the bus
    fingerprint_period  = "1m"
    health_check_period = "5s"
  }
}
