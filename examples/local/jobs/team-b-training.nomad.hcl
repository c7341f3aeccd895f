# Team B's training in workspace-b (Quota1.1, 3 GPUs): one worker of 3 GPUs,
# a batch job preempted whole (L5). The worker checkpoints on SIGINT; its
# kill_timeout of 2m needs the client's max_kill_timeout raised (nomad.hcl).
job "training" {
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
      kill_timeout = "2m"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo checkpointing; sleep 2; echo checkpoint saved; exit 0' INT TERM; echo training on $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32

        device "nvidia/gpu" {
          count = 3
        }
      }
    }
  }
}
