# A team C dev instance (DESIGN §1): a notebook-style service with one GPU,
# in workspace-c (quota Quota1.2, 80 GPUs). As a service, it is preempted
# one allocation at a time, only by work entitled above it (team A, through
# Quota1's child-level preemption).
job "dev-notebook" {
  namespace = "workspace-c"
  type      = "service"
  priority  = 60
  node_pool = "gputide-queue"

  meta {
    gputide_pool = "default"
  }

  group "notebook" {
    count = 1

    task "jupyter" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo saving notebook; exit 0' INT TERM; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
