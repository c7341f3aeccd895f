# The Alibaba openb trace (clusterdata cluster-trace-gpu-v2023, the FGD
# paper, ATC'23) replayed on a heterogeneous cluster: the trace's own GPU
# inventory (1,213 nodes, 6,212 GPUs of seven models) scaled down by 150,
# each model keeping its share, and its 8,152 pods over 149.3 days.
# See docs/simulator.md ("Alibaba openb") and docs/benchmarks.md.
#
#   gputide sim -scenario examples/openb/scenario.hcl -compare
#
# The trace lives beside the repository (../shared/traces/alibaba/v2023,
# research or study use only; its rows are not shipped here): without it
# the scenario does not load.

name      = "openb"
quota     = "quota.hcl"
time_zone = "Asia/Shanghai"
start     = "2026-12-07 00:00" # trace second 0
length    = "3585h"            # the trace's 149.3 days; `gputide sim -days N` overrides it
seed      = 1

broker {
  interval     = "30s"
  kill_timeout = "30s"
  prewarm      = false # no scheduled scale-ups here
}

cluster {
  # One node group per model of the trace's GPU node list, named by the
  # model (plan.GPU.Model = "G2", ...). Each model keeps its GPUs / 150 in
  # nodes of its usual size (G2 8, T4 2, V100M16 4, ...), rounded to the
  # nearest node; a model whose share rounds to no node keeps one node of
  # its share's GPUs (at least one). 150 puts the cluster (45 GPUs) below
  # the trace's peak demand (70 GPUs) and above its mean (16.6): queues
  # form at the peaks. The report's inputs list every model before and
  # after.
  inventory "openb" {
    nodes      = "../../../shared/traces/alibaba/v2023/openb_node_list_gpu_node.csv"
    scale_down = 150
  }
}

# Every pod that ran on GPUs is a batch job of one allocation of its
# num_gpu GPUs, created at start + creation_time, running for
# deletion_time - scheduled_time. Pods that never ran (no scheduled_time)
# and CPU-only pods are left out; a pod sharing its GPU (gpu_milli < 1000)
# holds one whole GPU. gpu_spec is empty in every row: every pod may run
# on every model, so it allows every flavor of quota.hcl (one per model) in
# the tree's order (no flavors attribute). The QoS class chooses the
# workspace.
openb "pods" {
  trace       = "../../../shared/traces/alibaba/v2023/openb_pod_list_default.csv"
  expect_rows = 8152
  time_scale  = 1
  priority    = 50
  checkpoint  = "30m"
  workspaces = {
    LS         = "workspace-a"
    Guaranteed = "workspace-a"
    BE         = "workspace-b"
    Burstable  = "workspace-c"
  }
  # Half of the best-effort pods opt into borrowing (gputide_idle).
  idle_fraction = { BE = 0.5 }
}
