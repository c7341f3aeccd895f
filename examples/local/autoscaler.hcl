# Nomad Autoscaler v0.5.0 agent of the local stack, with the three gputide
# plugins of `make build` (bin/plugins, or $GPUTIDE_LOCAL_BIN/plugins). A template: up.sh replaces each
# ${GPUTIDE_LOCAL_*} with its value (env.sh) and writes the result to
# $GPUTIDE_LOCAL_DIR/conf/autoscaler.hcl. Its Nomad token is NOMAD_TOKEN
# (with -acl, a token of examples/reference/autoscaler/autoscaler-acl.hcl).
# The reference config, with every choice explained, is
# examples/reference/autoscaler/agent.hcl.

log_level  = "INFO"
plugin_dir = "${GPUTIDE_LOCAL_BIN}/plugins"

nomad {
  address   = "http://127.0.0.1:${GPUTIDE_LOCAL_NOMAD_HTTP}"
  namespace = ["workspace-a", "workspace-b", "workspace-c"]
}

http {
  bind_address = "127.0.0.1"
  bind_port    = ${GPUTIDE_LOCAL_AUTOSCALER_HTTP}
}

# Policies come from the jobs' scaling blocks (the Nomad source): the broker
# reads them there too. The interval is the tree's
# settings { autoscaler_evaluation_interval } (quota.hcl).
policy {
  default_evaluation_interval = "30s"
  default_cooldown            = "30s"
}

apm "gputide-apm" {
  driver = "gputide-apm"
  config = {
    address = "http://127.0.0.1:${GPUTIDE_LOCAL_BROKER_HTTP}"
    timeout = "5s"
  }
}

strategy "gputide-schedule" {
  driver = "gputide-schedule"
}

strategy "gputide-idle" {
  driver = "gputide-idle"
}
