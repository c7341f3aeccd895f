# A second, small training job of team B (1 GPU): beside team B's training
# (3 GPUs) it is over Quota1.1 (3 GPUs) and waits until a quota move gives
# Quota1.1 more (use case 2).
job "extra" {
  namespace = "workspace-b"
  type      = "batch"
  priority  = 50
  node_pool = "gputide-queue"

  meta {
    gputide_pool = "default"
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
          count = 1
        }
      }
    }
  }
}
