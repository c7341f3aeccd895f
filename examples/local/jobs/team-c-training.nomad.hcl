# Team C's training in workspace-c (Quota1.2, 5 GPUs): 2 workers x 2 GPUs, a
# batch job preempted whole (L5), with 2m to checkpoint. On a full node it
# is the victim of team A's inference (use case 1): exactly the 4 GPUs asked.
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
        args    = ["-c", "trap 'echo checkpointing; sleep 2; echo checkpoint saved; exit 0' INT TERM; echo training on $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32

        device "nvidia/gpu" {
          count = 2
        }
      }
    }
  }
}
