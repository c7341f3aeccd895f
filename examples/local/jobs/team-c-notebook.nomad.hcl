# A team C notebook in workspace-c (Quota1.2): a service with one GPU,
# preempted one allocation at a time, and only by work entitled above it
# (team A, through Quota1's child-level preemption).
job "notebook" {
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
        args    = ["-c", "trap 'echo saving notebook; exit 0' INT TERM; echo notebook on $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
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
