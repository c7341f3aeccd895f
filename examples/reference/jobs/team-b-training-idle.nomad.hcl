# Team B's opportunistic training (DESIGN §1, day/night): it opts into idle
# resources, so it runs on GPUs that nobody entitled uses (borrowing beyond
# Quota1.1), is never the cause of a preemption, and is the first victim
# when entitled work needs the GPUs back (L4, L5 step 1). Its workers are
# independent (gputide_elastic), so they are preempted one by one.
#
# The scaling block's policy (as in ../autoscaler/idle-scaling.hcl) grows the
# group by the broker's idle_fit. It lives in the job, in Nomad, because the
# broker reads policies from Nomad only: a group is an idle group of the plan
# (and GET /v1/idle-fit answers for it) only with such a policy there.
job "training-idle" {
  namespace = "workspace-b"
  type      = "batch"
  priority  = 30
  node_pool = "gputide-queue"

  meta {
    gputide_pool    = "default"
    gputide_idle    = "true"
    gputide_elastic = "true"
  }

  group "worker" {
    count = 8

    # min >= 1: a batch job at count 0 is dead and can be garbage-collected.
    scaling {
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
      }
    }

    task "train" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "1m"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo checkpointing; sleep 2; exit 0' INT TERM; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 8
        }
      }
    }
  }
}
