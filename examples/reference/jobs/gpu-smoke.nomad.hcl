# gpu-smoke: a two-GPU smoke test for the nomad-device-gputide device plugin.
#
# Runs anywhere the plugin runs, including the mock backend on a laptop: the
# task uses raw_exec (enabled in examples/reference/nomad-client.hcl), prints
# the GPUs Nomad reserved for it and writes its environment to
# alloc/env.txt. The end-to-end test in e2e/deviceplugin_test.go submits this
# file as it is.
#
#   nomad job run examples/reference/jobs/gpu-smoke.nomad.hcl
#   nomad alloc logs <alloc-id>     # NVIDIA_VISIBLE_DEVICES=GPU-...,GPU-...
job "gpu-smoke" {
  type = "batch"

  group "smoke" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "show-gpus" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; env | sort > ${NOMAD_ALLOC_DIR}/env.txt"]
      }

      resources {
        cpu    = 50
        memory = 32

        # Two GPUs of one model with at least 40 GiB of memory and compute
        # capability 8.0 (Ampere) or newer. Attribute units are Nomad's, so
        # "40 GiB" compares with the plugin's "memory = 40960 MiB".
        device "nvidia/gpu" {
          count = 2

          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "40 GiB"
          }

          constraint {
            attribute = "${device.attr.compute_capability}"
            operator  = "version"
            value     = ">= 8.0"
          }
        }
      }
    }
  }
}
