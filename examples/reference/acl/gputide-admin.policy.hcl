# GPU pool administrators: the broker treats every token holding this
# policy (directly or through a role) as an admin when its agent config
# says admin_policy = "gputide-admin": quota moves and scale, the whole
# tree, GET /v1/plan and /v1/snapshot (DESIGN §9).
#   nomad acl policy apply -description "gputide admins" gputide-admin acl/gputide-admin.policy.hcl
#   nomad acl token create -name alice -policy gputide-admin
#
# In Nomad it reads every workspace and the nodes; it changes nothing
# there.
namespace "*" {
  policy = "read"
}

node {
  policy = "read"
}

node_pool "*" {
  policy = "read"
}
