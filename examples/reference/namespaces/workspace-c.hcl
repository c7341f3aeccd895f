# Team C's workspace: dev instances and training, bound to quota Quota1.2
# (80 GPUs).
#   nomad namespace apply namespaces/workspace-c.hcl
name        = "workspace-c"
description = "Team C: dev instances and training (quota Quota1.2)"

meta {
  gputide_quota = "Quota1.2"
}
