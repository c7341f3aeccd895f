# Team C's training (DESIGN §1), in workspace-c (quota Quota1.2): 2 workers
# x 8 GPUs, a batch job preempted whole, with time to checkpoint.
job "training" {
  namespace = "workspace-c"
  type      = "batch"
  priority  = 50
  node_pool = "gputide-queue"

  meta {
    gputide_pool = "default"
  }

  group "worker" {
    count = 2

    task "train" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "2m"

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
