# Benchmark: the whole Philly trace (82,247 jobs, 2017-09-04 to 2017-12-22)
# on a 1,024-GPU modelled cluster with the reference tree scaled up 8x.
# Needs ../shared/traces (no sample fallback: the whole trace is the point).
name      = "philly-full"
quota     = "quota.hcl"
time_zone = "America/Los_Angeles"
start     = "2026-09-07 00:00" # a Monday, as 2017-09-04
length    = "2640h"            # 110 days: the whole trace
seed      = 1

broker {
  interval     = "30s"
  kill_timeout = "30s"
  prewarm      = true
}

cluster {
  nodes "h100" {
    count = 128
    gpus  = 8
  }
}

inference "chat" {
  namespace = "workspace-a"
  gpus      = 8
  default   = 8
  windows = {
    day     = "mon-fri 08:00-22:00 32"
    weekend = "sat,sun 10:00-20:00 16"
  }
}

training "philly" {
  trace         = "../../../../../shared/traces/philly/philly.csv"
  trace_start   = "2017-09-04 00:00:00"
  expect_rows   = 82247
  idle_fraction = 0.6
  max_gpus      = 128
  # Every virtual cluster: the six of the reference to workspace-b, the rest to workspace-c.
  workspaces = {
    "6c71a0" = "workspace-b"
    "103959" = "workspace-b"
    "11cb48" = "workspace-b"
    "b436b2" = "workspace-b"
    "e13805" = "workspace-b"
    "ed69ec" = "workspace-b"
    "*"      = "workspace-c"
  }
}
