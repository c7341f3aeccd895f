# The local stack's quota tree: the reference tree (examples/reference/
# quota.hcl, 128 GPUs) scaled to the 8 mock GPUs of one Nomad client.
#
#   Quota1    8 GPUs  workspace-a  team A: inference (child-level preemption)
#   Quota1.1  3 GPUs  workspace-b  team B: training
#   Quota1.2  5 GPUs  workspace-c  team C: a notebook and training
#
# up.sh's broker seeds Consul with this file when Consul has no tree (its
# first start); afterwards the tree lives in Consul: `gputide quota move
# -from Quota1.2 -to Quota1.1 -gpus 1` (use case 2), not an edit here.

settings {
  # The reference spares allocations younger than 10m (L5); 0 here, so that
  # the use cases run at once on a fresh stack.
  min_runtime = "0s"
  # Debt from lowering a quota is protected this long (L9).
  debt_grace = "2m"
  # The autoscaler agent's default_evaluation_interval (autoscaler.hcl).
  autoscaler_evaluation_interval = "30s"
}

quota "Quota1" {
  gpus             = 8
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = 3
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = 5
    namespaces = ["workspace-c"]
  }
}
