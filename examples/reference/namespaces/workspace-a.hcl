# Team A's workspace: inference services, bound to quota Quota1 (128 GPUs,
# child-level preemption) in quota.hcl.
#   nomad namespace apply namespaces/workspace-a.hcl
name        = "workspace-a"
description = "Team A: inference services (quota Quota1)"

meta {
  gputide_quota = "Quota1"
}
