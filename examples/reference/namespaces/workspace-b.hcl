# Team B's workspace: training batch jobs, bound to quota Quota1.1 (48 GPUs).
#   nomad namespace apply namespaces/workspace-b.hcl
name        = "workspace-b"
description = "Team B: training (quota Quota1.1)"

meta {
  gputide_quota = "Quota1.1"
}
