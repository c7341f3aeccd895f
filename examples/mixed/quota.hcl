# The quota tree of the mixed scenario (examples/mixed/scenario.hcl): a
# cluster of two GPU generations, 8 nodes of 8 H100 and 8 nodes of 8 A100,
# two of the A100 nodes cut into 1g.10gb MIG slices (7 per GPU, 112 in all)
# for team C's notebooks.
#
#   Quota1    workspace-a  team A: inference on H100 by day
#   Quota1.1  workspace-b  team B: training, on H100 or A100
#   Quota1.2  workspace-c  team C: training on H100 or A100, notebooks on 1g slices
#
# What it should be (DESIGN L13, issue 17 item 1): three flavors, and each
# node's nominal per flavor:
#
#   flavor "h100"    { models = ["NVIDIA H100 80GB HBM3"] }
#   flavor "a100"    { models = ["NVIDIA A100-SXM4-80GB"] }
#   flavor "a100-1g" {
#     models      = ["NVIDIA A100-SXM4-80GB"]
#     mig_profile = "1g.10gb"
#   }
#
#   quota "Quota1" {
#     gpus = { h100 = 64, a100 = 48, a100-1g = 112 }
#     quota "Quota1.1" { gpus = { h100 = 24, a100 = 24 } }
#     quota "Quota1.2" { gpus = { h100 = 16, a100 = 24, a100-1g = 112 } }
#   }
#
# Until the quota file and the core have flavors, this tree counts every
# device instance as one GPU, a 1g.10gb slice as much as an H100: 64 H100 +
# 48 whole A100 + 112 slices = 224, and team C's 56 + 112. Which devices a
# job may use is kept apart by placement instead (the H100 model for
# inference, the node pool "mig" for the notebooks, the default pool, H100
# and whole A100, for training).

settings {
  min_runtime = "10m"
  debt_grace  = "10m"
  autoscaler_evaluation_interval = "1m"
}

quota "Quota1" {
  gpus             = 224
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = 48
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = 152 # 40 whole GPUs + the 112 slices
    namespaces = ["workspace-c"]
  }
}
