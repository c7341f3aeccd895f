# gpu-train-8: a training job that takes all eight GPUs of one NVSwitch node
# (DGX A100/H100 class), through the nomad-device-gputide plugin.
#
# The docker driver sees NVIDIA_VISIBLE_DEVICES in the reservation and runs
# the container with its nvidia runtime (docker plugin option
# nvidia_runtime, default "nvidia"), which needs the NVIDIA container
# toolkit on the client. Jobs governed by the gputide broker are submitted
# into the holding pool instead (node_pool = "gputide-queue"; see the team
# jobspecs next to this file).
job "gpu-train-8" {
  type = "batch"

  group "train" {
    task "train" {
      driver = "docker"

      config {
        image   = "nvcr.io/nvidia/pytorch:24.05-py3"
        command = "nvidia-smi"
        args    = ["topo", "-m"]
      }

      resources {
        cpu    = 16000
        memory = 65536

        device "nvidia/gpu" {
          count = 8

          # Only whole GPUs with at least 40 GiB, not MIG slices.
          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "40 GiB"
          }

          constraint {
            attribute = "${device.attr.mig}"
            value     = "false"
          }

          # All eight on one NVSwitch fabric, for NCCL all-reduce.
          constraint {
            attribute = "${device.attr.nvlink_topology}"
            value     = "nvswitch"
          }

          # Prefer the faster fabric when both kinds of node are free.
          affinity {
            attribute = "${device.attr.nvlink_bandwidth}"
            operator  = ">="
            value     = "900 GB/s"
            weight    = 50
          }
        }
      }
    }
  }
}
