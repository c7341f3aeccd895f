# Team A's inference service (DESIGN §1), in workspace-a (quota Quota1, the
# highest priority). Submitted into the broker's holding pool; the broker
# admits it into meta.gputide_pool when quota allows, taking GPUs back from
# team B's and team C's training if it must (use case 1).
#
# The scaling block is for the Nomad Autoscaler's day/night schedule
# strategy (08:00-22:00 local time). Counts change in place and do not need
# the broker's admission again; extra allocations that do not fit are
# admitted, and make room, like any other pending work.
#
# The task is a stand-in that holds its GPUs and answers SIGINT the way a
# server drains: replace it with the real server.
job "inference" {
  namespace = "workspace-a"
  type      = "service"
  priority  = 80
  node_pool = "gputide-queue"

  meta {
    gputide_pool = "default"
  }

  group "server" {
    count = 2

    scaling {
      enabled = true
      min     = 0
      max     = 8
    }

    task "server" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo draining; sleep 1; exit 0' INT TERM; echo serving on $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 4
        }
      }
    }
  }
}
