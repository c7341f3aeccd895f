# Nomad Autoscaler v0.5.0 agent config for gputide (DESIGN §8, issue 11).
#
#   NOMAD_TOKEN=<token of the autoscaler ACL policy, autoscaler-acl.hcl> \
#     nomad-autoscaler agent -config agent.hcl
#
# plugin_dir holds the three gputide plugins (`make build` puts them in
# bin/plugins/). The agent merges its Nomad settings, the token included, into
# every plugin block as nomad_* keys: gputide-apm sends that token to the broker
# unless its block sets `token`. The token is read from the environment
# (NOMAD_TOKEN), never written here.

log_level  = "INFO"
plugin_dir = "./bin/plugins"

nomad {
  address = "http://127.0.0.1:4646"
  # The governed namespaces, whose scaling policies the autoscaler reads (its
  # ACL policy, autoscaler-acl.hcl, covers these and no other).
  namespace = ["workspace-a", "workspace-b", "workspace-c"]
}

http {
  bind_address = "127.0.0.1"
  bind_port    = 8080
}

policy {
  # File policies, next to the policies of jobs' scaling blocks (the Nomad
  # source). The reference jobs carry theirs (jobs/team-a-inference,
  # jobs/team-b-training-idle): the broker reads policies from Nomad only.
  # inference-scaling.hcl and idle-scaling.hcl show the same policies as
  # files; put one here only for a job whose scaling block has no policy.
  dir                         = "./policies"
  default_evaluation_interval = "1m"
  default_cooldown            = "1m"
}

# The broker's figures, and the `schedule` query answered locally so that
# day/night scaling goes on while the broker is down.
apm "gputide-apm" {
  driver = "gputide-apm"
  config = {
    address = "http://127.0.0.1:4780"
    timeout = "5s"
  }
}

# Day/night counts in local time; its settings are each check's strategy block.
strategy "gputide-schedule" {
  driver = "gputide-schedule"
}

# Elastic idle batch groups grow by the broker's idle_fit.
strategy "gputide-idle" {
  driver = "gputide-idle"
}

# Scaling goes through the builtin Nomad target ("nomad-target"); there is no
# gputide target.
