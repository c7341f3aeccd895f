# gputide agent configuration for the reference scenario:
#   gputide agent -config examples/reference/broker.hcl [-dry-run]
nomad {
  # http or https with a host. Left out: NOMAD_ADDR, else
  # http://127.0.0.1:4646; set here, it wins over NOMAD_ADDR. Userinfo
  # (http://user:pw@host) is accepted and never printed.
  # address = "http://127.0.0.1:4646"
  # token = ""   # default: NOMAD_TOKEN; a management token, or one whose
  #              # policy gives, on the governed namespaces, list-jobs,
  #              # read-job, submit-job, alloc-lifecycle (alloc stop),
  #              # scale-job, list-scaling-policies and read-scaling-policy;
  #              # node { policy = "read" }, node_pool "*" read and
  #              # node_pool "<holding_pool>" write (it creates the holding
  #              # pool): acl/gputide-broker.policy.hcl, each rule with the
  #              # broker call that needs it. See docs/nomad-integration.md.
  # region = ""
}

# The quota tree. Without a consul block (below) the file is the tree: edit
# it live (use case 2) and the broker reloads it when it changes; an invalid
# tree is rejected and the running tree kept (L1). With a consul block it
# only seeds the store's tree when Consul has none (the first start); from
# then on the tree lives in Consul and edits of this file are not read
# (the broker logs the difference at start): change it with `gputide quota
# move|scale|apply` (docs/api.md). Optional with a consul block.
quota_file = "quota.hcl"

# Namespaces to govern (default: every namespace bound in the tree); each
# must be bound in the tree.
namespaces = ["workspace-a", "workspace-b", "workspace-c"]

# The node pool with no nodes that governed jobs are submitted into: a Nomad
# pool name, not "default" or "all".
holding_pool = "gputide-queue"

# The node pools a job may name in meta gputide_pool (default ["default"]);
# another pool, or one Nomad does not have, is a meta error: the job is left
# unadmitted (Nomad CE checks no node-pool ACL at registration).
admit_pools = ["default"]

# Plan on every Nomad event and at least this often (1s at least).
interval = "30s"

# Overrides the tree's settings.min_runtime (L5).
min_runtime = "10m"

# L12: never act on state older than this; stop acting while Nomad is
# unreachable. 1s at least (Nomad is probed every third of it).
staleness = "15s"

# The broker's HTTP API (docs/api.md): metrics, health, the reads and
# writes of "gputide quota|queue|preemptions|job plan|reservation", and the
# status page /ui/. A loopback address, unless tls is set:
http_bind = "127.0.0.1:4780"
# tls {
#   cert_file = "broker.pem"
#   key_file  = "broker-key.pem"
# }

# Who may use the API (docs/acl.md). With Nomad ACLs on, callers send their
# Nomad token; holders of this Nomad policy are the broker's admins:
# admin_policy = "gputide-admin"
# With Nomad ACLs off (a dev agent), every request but health needs this
# token (default GPUTIDE_ADMIN_TOKEN; give it to the CLI with -token or
# NOMAD_TOKEN), and without it nothing can be written; the reads may be
# opened to all:
# admin_token            = ""
# open_reads_without_acl = false

# trace, debug, info, warn, error or off.
log_level = "info"

# Write each snapshot and plan into this folder, to replay one with
# "gputide plan <file>" (docs/snapshot-format.md, docs/planning.md). For
# debugging: a pair of files, snapshot-<stamp>.json and plan-<stamp>.json,
# for every plan with an action (waits included). After each dump the
# broker removes its oldest dump files (by the UTC stamp in the name) down
# to dump_max_files: default 1000 (the last 500 plans), 0 never prunes.
# Other files in the folder are left alone.
# dump_dir       = "/var/lib/gputide/dumps"
# dump_max_files = 1000

# The leader prunes the preemption history older than this (and beyond
# 100,000 entries).
# history_retention = "2160h"

# The durable store and the leader lock (DESIGN §6, L12). Without it the
# broker's state lives in memory (bookings, intents and history die with the
# process) and only one broker may run. With it, quota_file only seeds the
# store's tree when Consul has none; the tree is then read from Consul and
# watched, and any number of brokers may run: the holder of the session lock
# on <prefix>leader acts, the others plan, serve reads and stand by.
# consul {
#   address = "127.0.0.1:8500"   # default: CONSUL_HTTP_ADDR, else this
#   token   = ""                 # default: CONSUL_HTTP_TOKEN; never logged
#   prefix  = "gputide/"
# }
