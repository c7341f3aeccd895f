# ACL policy of the Nomad Autoscaler's token: it reads jobs and their scaling
# policies and scales them in the governed namespaces, and nothing else (no
# submit-job, no node or agent rights).
#
#   nomad acl policy apply -description "gputide autoscaler" gputide-autoscaler autoscaler-acl.hcl
#   nomad acl token create -name gputide-autoscaler -policy gputide-autoscaler
#
# The same token reaches the broker through gputide-apm (the agent's
# nomad_token): read-job on a namespace lets it read that namespace's
# idle_fit; any valid token reads the quota figures.
namespace "workspace-a" {
  capabilities = ["read-job", "list-scaling-policies", "read-scaling-policy", "read-job-scaling", "scale-job"]
}

namespace "workspace-b" {
  capabilities = ["read-job", "list-scaling-policies", "read-scaling-policy", "read-job-scaling", "scale-job"]
}

namespace "workspace-c" {
  capabilities = ["read-job", "list-scaling-policies", "read-scaling-policy", "read-job-scaling", "scale-job"]
}
