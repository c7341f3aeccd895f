# The quota tree of the mixed scenario (examples/mixed/scenario.hcl): a
# cluster of two GPU generations, 8 nodes of 8 H100 and 8 nodes of 8 A100,
# two of the A100 nodes cut into 1g.10gb MIG slices (7 per GPU, 112 in all)
# for team C's notebooks.
#
#   Quota1    workspace-a  team A: inference on H100 by day
#   Quota1.1  workspace-b  team B: training, on H100 or A100
#   Quota1.2  workspace-c  team C: training on H100 or A100, notebooks on 1g slices
#
# Three flavors (DESIGN L13): a device counts in the first flavor it
# matches, so a 1g.10gb slice of an A100 counts in a100-1g, never in a100
# (a100 has no mig_profile: whole GPUs only). Each node's nominal is per
# flavor, and law L1 holds per flavor: the children's h100 (24 + 16) fit
# in the root's 64, their a100 (24 + 24) in its 48.

flavor "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}

flavor "a100" {
  models = ["NVIDIA A100-SXM4-80GB"]
}

flavor "a100-1g" {
  models      = ["NVIDIA A100-SXM4-80GB"]
  mig_profile = "1g.10gb"
}

settings {
  min_runtime = "10m"
  debt_grace  = "10m"
  autoscaler_evaluation_interval = "1m"
}

quota "Quota1" {
  gpus             = { h100 = 64, a100 = 48, a100-1g = 112 }
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = { h100 = 24, a100 = 24 }
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = { h100 = 16, a100 = 24, a100-1g = 112 }
    namespaces = ["workspace-c"]
  }
}
