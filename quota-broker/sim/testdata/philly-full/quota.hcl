# The reference quota tree scaled up 8x for a 1,024-GPU cluster.
settings {
  min_runtime = "10m"
  debt_grace  = "10m"
}

quota "Quota1" {
  gpus             = 1024
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = 384
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = 640
    namespaces = ["workspace-c"]
  }
}
