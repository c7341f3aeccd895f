# Team B's opportunistic training (DESIGN §1, day/night): it opts into idle
# resources, so it runs on GPUs that nobody entitled uses (borrowing beyond
# Quota1.1), is never the cause of a preemption, and is the first victim
# when entitled work needs the GPUs back (L4, L5 step 1). Its workers are
# independent (gputide_elastic), so they are preempted one by one.
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
