# Team B's elastic idle training (examples/reference/jobs/team-b-training-idle
# .nomad.hcl, gputide_idle and gputide_elastic) grows by the broker's idle_fit:
# the extra 8-GPU workers that fit now on free, healthy, unheld GPUs. The
# broker shrinks it (it stops idle workers when entitled work needs the GPUs,
# then lowers the count, never below 1).
#
# The same policy is in the job's own scaling block, and must be: the broker
# reads policies from Nomad only, and a group is an idle group (GET
# /v1/idle-fit answers for it) only with such a policy in Nomad. This file
# shows the policy on its own; do not load it next to the job's.
#
# min >= 1: a batch job at count 0 is dead and can be garbage-collected.
# cooldown_on_scale_up is the hysteresis: after a scale-up, no other for 2m,
# whatever the figure does meanwhile. With the broker down the check fails and
# the group keeps its count.
scaling "team-b-training-idle" {
  enabled = true
  min     = 1
  max     = 16

  policy {
    evaluation_interval  = "30s"
    cooldown             = "30s"
    cooldown_on_scale_up = "2m"
    on_check_error       = "fail"

    check "idle" {
      source = "gputide-apm"
      query  = "idle_fit{namespace=\"workspace-b\", job=\"training-idle\", group=\"worker\"}"

      strategy "gputide-idle" {}
    }

    target "nomad-target" {
      Namespace = "workspace-b"
      Job       = "training-idle"
      Group     = "worker"
    }
  }
}
