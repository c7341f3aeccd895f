# The quota tree of the openb scenario (examples/openb/scenario.hcl): the
# Alibaba openb cluster scaled down by 150, 45 GPUs of seven models (G2,
# T4, P100, V100M16, G3, V100M32, A10), shared by the trace's QoS classes:
#
#   Quota1    45 GPUs  workspace-a  LS and Guaranteed pods (latency-sensitive, serving)
#   Quota1.1   8 GPUs  workspace-b  BE pods (best-effort, batch; half of them idle jobs)
#   Quota1.2  16 GPUs  workspace-c  Burstable pods
#
# Child-level preemption on Quota1 lets the latency-sensitive pods take
# GPUs back from the best-effort and burstable ones (DESIGN L5 step 2).
#
# One flavor per model (DESIGN L13), in the inventory's order, and each
# node's GPUs per flavor (the scenario keeps 2 P100, 2 G3, 1 V100M32, 1
# V100M16, 32 G2, 6 T4 and 1 A10). The pods name no model, so each allows
# every flavor in this order (the scenario's openb block names none).

flavor "p100" {
  models = ["P100"]
}
flavor "g3" {
  models = ["G3"]
}
flavor "v100m32" {
  models = ["V100M32"]
}
flavor "v100m16" {
  models = ["V100M16"]
}
flavor "g2" {
  models = ["G2"]
}
flavor "t4" {
  models = ["T4"]
}
flavor "a10" {
  models = ["A10"]
}

settings {
  min_runtime = "10m"
  debt_grace  = "10m"
}

quota "Quota1" {
  gpus             = { p100 = 2, g3 = 2, v100m32 = 1, v100m16 = 1, g2 = 32, t4 = 6, a10 = 1 }
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = { g2 = 6, t4 = 2 }
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = { g2 = 12, t4 = 2, p100 = 2 }
    namespaces = ["workspace-c"]
  }
}
