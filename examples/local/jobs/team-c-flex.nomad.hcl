# Team C's flex request (L11): 4 GPUs that may wait whole for up to 30m and
# run for at most 1h. The broker admits it only when all of it fits; past
# gputide_flex_max_wait it is stopped unplaced, past gputide_flex_max_run it
# is stopped (its status in the job's meta).
job "flex" {
  namespace = "workspace-c"
  type      = "batch"
  priority  = 40
  node_pool = "gputide-queue"

  meta {
    gputide_pool          = "default"
    gputide_flex_max_wait = "30m"
    gputide_flex_max_run  = "1h"
  }

  group "worker" {
    count = 1

    task "train" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo checkpointing; sleep 2; echo checkpoint saved; exit 0' INT TERM; echo training on $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32

        device "nvidia/gpu" {
          count = 4
        }
      }
    }
  }
}
