# The quota tree of the reference scenario (DESIGN §1).
#
# A cluster of 128 GPUs shared by three teams. Each team's workspace is a
# Nomad namespace bound to one quota node:
#
#   Quota1    128 GPUs  workspace-a  team A: inference services
#   Quota1.1   48 GPUs  workspace-b  team B: training batch jobs
#   Quota1.2   80 GPUs  workspace-c  team C: dev instances and training
#
# Child-level preemption on Quota1 lets team A's inference take GPUs back
# from the training of teams B and C (use case 1). Use case 2 moves 8 GPUs
# from Quota1.2 to Quota1.1 (48 -> 56, 80 -> 72) in one change.

settings {
  # Allocations younger than this are spared by preemption while an older
  # victim set suffices (DESIGN L5).
  min_runtime = "10m"
  # Debt created by lowering a quota is protected for this long (DESIGN L9).
  debt_grace = "10m"
  # The Nomad Autoscaler agent's policy.default_evaluation_interval
  # (examples/reference/autoscaler/agent.hcl): a scheduled scale-up's
  # pre-warm holds last until its boundary + this (for policies that set no
  # evaluation_interval) + settle (DESIGN L5 pre-warm).
  autoscaler_evaluation_interval = "1m"
}

quota "Quota1" {
  gpus             = 128
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = 48
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = 80
    namespaces = ["workspace-c"]
  }
}
