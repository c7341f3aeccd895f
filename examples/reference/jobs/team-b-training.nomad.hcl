# Team B's training (DESIGN §1), in workspace-b (quota Quota1.1, 48 GPUs):
# a distributed job of 4 workers x 8 GPUs. It is a batch job, so the broker
# preempts it whole (L5): all workers stop together and it waits in the
# holding pool to be admitted again as one.
#
# The workers checkpoint on SIGINT: kill_timeout gives them 2 minutes
# (L8). Replace the stand-in with the real trainer.
job "training" {
  namespace = "workspace-b"
  type      = "batch"
  priority  = 50
  node_pool = "gputide-queue"

  meta {
    gputide_pool = "default"
  }

  group "worker" {
    count = 4

    task "train" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "2m"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo checkpointing; sleep 2; echo checkpoint saved; exit 0' INT TERM; while :; do sleep 1; done"]
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
