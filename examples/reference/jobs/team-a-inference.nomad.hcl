# Team A's inference service (DESIGN §1), in workspace-a (quota Quota1, the
# highest priority). Submitted into the broker's holding pool; the broker
# admits it into meta.gputide_pool when quota allows, taking GPUs back from
# team B's and team C's training if it must (use case 1).
#
# The scaling block holds the Nomad Autoscaler's day/night policy (the
# gputide-schedule strategy, as in ../autoscaler/inference-scaling.hcl). It
# lives in the job, in Nomad, because the broker reads policies from Nomad
# only: it pre-warms the scheduled scale-ups of this policy (DESIGN L5
# "Pre-warm"), and would not see a file policy. Counts change in place and do
# not need the broker's admission again; extra allocations that do not fit
# are admitted, and make room, like any other pending work. Preview it:
#   NOMAD_NAMESPACE=workspace-a gputide schedule preview -policy team-a-inference.nomad.hcl
#
# To change a window once the job is admitted, do not run this file again:
# the job would go back to the holding pool with a deployment that cannot
# finish, and the Autoscaler does not scale a job with an active
# deployment. Change the policy of the job in Nomad (`nomad job inspect`,
# edit, `nomad job run -json`), as "Changing a window" in
# autoscaler-plugin/README.md shows, and this file for the next submission.
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

      policy {
        evaluation_interval = "1m"
        cooldown            = "1m"
        on_check_error      = "fail"

        check "day-night" {
          source = "gputide-apm"
          query  = "schedule"

          strategy "gputide-schedule" {
            window_day     = "mon-fri 08:00-22:00 4"
            window_weekend = "sat,sun 10:00-20:00 2"
            default_count  = 1
            timezone       = "Europe/Berlin"
            holidays       = "2026-12-25,2026-12-26,2027-01-01"
            ramp           = "6m"
          }
        }
      }
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
