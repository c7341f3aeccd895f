# A training job of team B that may run on H100 or A100, A100 first (the
# flavor e2e of issue 17), for build's flavor tests (flavors_test.go).
# ordered.json is this file as Nomad v1.11.3 parses it, `nomad job run
# -output ordered.nomad.hcl`, less its null and empty fields.
job "train-b" {
  type      = "batch"
  node_pool = "gputide-queue"

  meta {
    gputide_flavors = "a100, h100"
  }

  group "worker" {
    count = 2
    task "train" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          count = 4
        }
      }
    }
  }

  group "eval" {
    task "eval" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.attr.mig}"
            value     = "false"
          }
        }
      }
    }
  }
}
