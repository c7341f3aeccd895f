# Team B's opportunistic training in workspace-b: it opts into idle GPUs
# (gputide_idle), so it runs on GPUs nobody entitled uses, borrowing beyond
# Quota1.1 (use case 3), never causes a preemption and is the first victim
# when entitled work needs the GPUs back (L4, L5 step 1). Its workers are
# independent (gputide_elastic): stopped one by one. The scaling block's
# gputide-idle check grows the group by the broker's idle_fit (what fits now
# on free GPUs); the broker shrinks it.
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
    count = 1

    # min >= 1: a batch job at count 0 is dead and can be garbage-collected.
    scaling {
      enabled = true
      min     = 1
      max     = 8

      policy {
        evaluation_interval  = "30s"
        cooldown             = "30s"
        cooldown_on_scale_up = "1m"
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
      kill_timeout = "30s"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo checkpointing; sleep 2; exit 0' INT TERM; echo borrowing $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
