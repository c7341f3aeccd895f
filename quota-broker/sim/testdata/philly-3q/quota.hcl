# The reference quota tree scaled up 6x for a 768-GPU cluster, min_runtime 1h.
settings {
  min_runtime = "1h"
  debt_grace  = "10m"
}

quota "Quota1" {
  gpus             = 768
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = 288
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = 480
    namespaces = ["workspace-c"]
  }
}
