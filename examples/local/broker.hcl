# gputide agent (the broker) of the local stack, on the stack's Consul. A
# template: up.sh replaces each ${GPUTIDE_LOCAL_*} with its value (env.sh)
# and writes the result to $GPUTIDE_LOCAL_DIR/conf/broker.hcl, then runs
# `gputide agent -config <that>`. The full option reference is
# examples/reference/broker.hcl.

nomad {
  address = "http://127.0.0.1:${GPUTIDE_LOCAL_NOMAD_HTTP}"
  # token: NOMAD_TOKEN from up.sh; with -acl a token of the gputide-broker
  # policy (examples/reference/acl/gputide-broker.policy.hcl).
}

# With a consul block the quota file only seeds the store's tree when Consul
# has none (the first start after down.sh); the tree then lives in Consul:
# change it with `gputide quota move|scale|apply`, not by editing the file.
quota_file   = "${GPUTIDE_LOCAL_REPO}/examples/local/quota.hcl"
namespaces   = ["workspace-a", "workspace-b", "workspace-c"]
holding_pool = "gputide-queue"
admit_pools  = ["default"]
interval     = "10s"
staleness    = "15s"
http_bind    = "127.0.0.1:${GPUTIDE_LOCAL_BROKER_HTTP}"
log_level    = "info"

# Who may use the API (docs/acl.md): with -acl, holders of the Nomad policy
# gputide-admin are the broker's admins and every other caller sends its
# Nomad token; without, the admin token (GPUTIDE_ADMIN_TOKEN from up.sh)
# for writes and the reads open to all.
${GPUTIDE_LOCAL_BROKER_AUTH}

# Every plan with an action, and its snapshot, for `gputide plan <file>`.
dump_dir       = "${GPUTIDE_LOCAL_DIR}/dumps"
dump_max_files = 200

consul {
  address = "127.0.0.1:${GPUTIDE_LOCAL_CONSUL_HTTP}"
  prefix  = "gputide/"
}
