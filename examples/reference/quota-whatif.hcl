# A what-if tree for the reference scenario (gputide sim -compare-quota):
# team B gets 8 GPUs of team C's from the start (Quota1.1 56 instead of
# 48, Quota1.2 72 instead of 80), what the scenario's quota move does on
# its second day.

settings {
  min_runtime = "10m"
  debt_grace  = "10m"
}

quota "Quota1" {
  gpus             = 128
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = 56
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = 72
    namespaces = ["workspace-c"]
  }
}
