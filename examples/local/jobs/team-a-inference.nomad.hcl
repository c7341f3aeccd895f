# Team A's inference service in workspace-a (Quota1, 8 GPUs, child-level
# preemption): one replica of 4 GPUs. Submitted into the broker's holding
# pool; the broker admits it into meta.gputide_pool, taking GPUs back from
# team B's and team C's training when it must (use case 1).
#
# Its scaling block is the day/night policy (the gputide-schedule strategy
# of the stack's Autoscaler). As shipped, the window and the night both ask
# for 1 replica, so the stack behaves the same at any hour;
# docs/quickstart.md ("A day/night window") moves the window to the next
# minutes with 2 replicas. Change a window without re-running this file
# (`nomad job run` would move the job back to the holding pool and leave its
# deployment waiting there): see "Changing a window" in
# autoscaler-plugin/README.md.
job "inference" {
  namespace = "workspace-a"
  type      = "service"
  priority  = 80
  node_pool = "gputide-queue"

  meta {
    gputide_pool = "default"
  }

  group "server" {
    count = 1

    scaling {
      enabled = true
      min     = 1
      max     = 2

      policy {
        evaluation_interval = "30s"
        cooldown            = "30s"
        on_check_error      = "fail"

        check "day-night" {
          source = "gputide-apm"
          query  = "schedule"

          strategy "gputide-schedule" {
            window_day    = "mon-sun 09:00-17:00 1"
            default_count = 1
            timezone      = "UTC"
          }
        }
      }
    }

    task "server" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "5s"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo draining; sleep 1; exit 0' INT TERM; echo serving on $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
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
