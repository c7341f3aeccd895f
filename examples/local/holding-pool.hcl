# The broker's holding pool: a node pool with no nodes, where governed jobs
# wait until the broker admits them (docs/nomad-integration.md). The broker
# creates it too when missing; up.sh applies it with the namespaces.
#   nomad node pool apply holding-pool.hcl
node_pool "gputide-queue" {
  description = "gputide: jobs waiting for the broker's admission"
}
