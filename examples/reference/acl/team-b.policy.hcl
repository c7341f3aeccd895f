# Team B: manages its own workspace, workspace-b, and nothing else.
#   nomad acl policy apply -description "Team B" team-b acl/team-b.policy.hcl
#   nomad acl token create -name team-b -policy team-b
#
# Capabilities, not the "write" disposition: no scale-job (DESIGN §9 and
# issue 10: a team resizes its jobs through the broker's queue, never by
# scaling around it), no alloc-exec, no dispatch-job, no host volumes.
namespace "workspace-b" {
  capabilities = [
    "list-jobs",
    "read-job",
    "submit-job",
    "parse-job",
    "read-logs",
    "read-job-scaling",
    "list-scaling-policies",
    "read-scaling-policy",
  ]
}

# Listing the node pools lets "nomad job run" show where jobs may go; it
# gives no right on any job.
node_pool "*" {
  policy = "read"
}
