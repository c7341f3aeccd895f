# Nomad client config with gputide's device plugin, for demos on machines
# without GPUs: the mock backend serves eight A100-SXM4-40GB GPUs (go-nvml's
# DGX A100 mock) with plausible attributes, health and statistics.
#
#   go build -o /opt/nomad/plugins/nomad-device-gputide ./device-plugin/cmd/nomad-device-gputide
#   env -u AWS_CA_BUNDLE nomad agent -dev -bind 127.0.0.1 -config examples/reference/nomad-client.hcl
#   nomad node status -verbose $(nomad node status -quiet)
#   echo "3 xid 79" >> /tmp/gputide-faults    # GPU 3 falls off the bus
#   echo "3 recover" >> /tmp/gputide-faults   # ... and is reset
#
# (With AWS_CA_BUNDLE set, the client's AWS fingerprinter fails and the agent
# exits: "failed to setup IMDS client". examples/local/ runs this set-up, with
# Consul, the broker and the Autoscaler, in one command: make local.)
#
# On real GPU nodes drop the mock_* lines (backend defaults to "nvml"). The
# full option reference is docs/device-plugin.md.

plugin_dir = "/opt/nomad/plugins"

client {
  enabled = true

  # The client caps every task's kill_timeout at max_kill_timeout, 30s by
  # default: the reference training jobs give their workers kill_timeout =
  # "2m" to checkpoint on SIGINT (L8), which the default would cut to 30s.
  # Raise it to the longest kill_timeout of the jobs the client runs.
  max_kill_timeout = "5m"
}

# The smoke job (jobs/gpu-smoke.nomad.hcl) runs with raw_exec.
plugin "raw_exec" {
  config {
    enabled = true
  }
}

# The block's name is the binary's file name in plugin_dir; Nomad 1.10 and
# later skip plugin binaries without a block.
plugin "nomad-device-gputide" {
  config {
    backend         = "mock"
    mock_profile    = "dgxa100" # 8 x A100; "dgxh100", "dgxh200", "dgxb200", or e.g. "dgxa100:4"
    mock_fault_file = "/tmp/gputide-faults"

    # Split GPU 7 into two MIG instances (its own groups in Nomad):
    # mock_mig = ["7:3g.20gb,3g.20gb"]

    fingerprint_period  = "1m"
    health_check_period = "5s"

    # Leave GPUs out of Nomad by UUID (GPU-... or MIG-...):
    # ignored_gpu_ids = []
  }
}
