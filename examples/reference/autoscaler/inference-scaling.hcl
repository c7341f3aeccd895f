# Team A's inference (examples/reference/jobs/team-a-inference.nomad.hcl)
# follows the day: 4 replicas on weekdays 08:00-22:00 Berlin time, 2 on
# weekend days 10:00-20:00, 1 at night, stepping one replica every 2 minutes
# (ramp). An Autoscaler file policy; the same `policy { ... }` body is in the
# job's own `scaling` block (jobs/team-a-inference.nomad.hcl, the Nomad
# source), which is the one to use with the broker: it reads policies from
# Nomad only, and pre-warms their scheduled scale-ups. This file is for a job
# without one: loading both would give the group two policies. Preview it:
#
#   gputide schedule preview -policy inference-scaling.hcl -days 7
#
# on_check_error = "fail" so that a bad setting stops scaling loudly instead of
# skipping the check; cooldown at or below evaluation_interval so that each
# ramp step is applied (DESIGN §8).
scaling "team-a-inference" {
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

    target "nomad-target" {
      Namespace = "workspace-a"
      Job       = "inference"
      Group     = "server"
    }
  }
}
