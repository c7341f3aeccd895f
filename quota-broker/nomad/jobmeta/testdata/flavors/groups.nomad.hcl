# One group per way a job can ask for GPUs of a flavor (DESIGN L13), for
# build's flavor tests (flavors_test.go). The expected flavors of each group
# under the tree h100, a100, a100-1g are in the group's meta "want"; under
# a tree without flavors, in "want_implicit". groups.json is this file as
# Nomad v1.11.3 parses it, `nomad job run -output groups.nomad.hcl`, less
# its null and empty fields. (A device constraint takes only attribute,
# operator and value: the job-level shorthand set_contains_any = "..."
# parses there as value = "" with operator "=", which no device matches.)
job "flavors" {
  type      = "batch"
  node_pool = "gputide-queue"

  group "plain" {
    meta {
      want          = "h100,a100,a100-1g"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          count = 4
        }
      }
    }
  }

  group "type-only" {
    meta {
      want          = "h100,a100,a100-1g"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "gpu" {}
      }
    }
  }

  group "whole-only" {
    meta {
      want          = "h100,a100"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          count = 8
          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "40 GiB"
          }
          constraint {
            attribute = "${device.attr.mig}"
            value     = "false"
          }
          affinity {
            attribute = "${device.attr.nvlink_bandwidth}"
            operator  = ">="
            value     = "900 GB/s"
            weight    = 50
          }
        }
      }
    }
  }

  group "h100-by-name" {
    meta {
      want          = "h100"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu/NVIDIA H100 80GB HBM3" {
          count = 2
        }
      }
    }
  }

  group "mig-by-name" {
    meta {
      want          = "a100-1g"
      want_implicit = ""
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu/NVIDIA A100-SXM4-40GB MIG 1g.5gb" {}
      }
    }
  }

  group "mig-profile" {
    meta {
      want          = "a100-1g"
      want_implicit = ""
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.attr.mig_profile}"
            operator  = "=="
            value     = "1g.5gb"
          }
        }
      }
    }
  }

  group "not-mig-profile" {
    meta {
      want          = "h100,a100"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.attr.mig_profile}"
            operator  = "!="
            value     = "1g.5gb"
          }
        }
      }
    }
  }

  group "any-mig" {
    meta {
      want          = "a100-1g"
      want_implicit = ""
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.attr.mig_profile}"
            operator  = "is_set"
          }
        }
      }
    }
  }

  group "model-regexp" {
    meta {
      want          = "a100,a100-1g"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.model}"
            operator  = "regexp"
            value     = "A100"
          }
        }
      }
    }
  }

  group "model-not" {
    meta {
      want          = "a100,a100-1g"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.model}"
            operator  = "!="
            value     = "NVIDIA H100 80GB HBM3"
          }
        }
      }
    }
  }

  group "model-any-of" {
    meta {
      want          = "h100,a100"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.model}"
            operator  = "set_contains_any"
            value     = "NVIDIA H100 80GB HBM3,NVIDIA A100-SXM4-40GB"
          }
        }
      }
    }
  }

  group "model-contains" {
    meta {
      want          = "h100"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.model}"
            operator  = "set_contains"
            value     = "NVIDIA H100 80GB HBM3"
          }
        }
      }
    }
  }

  group "model-equals" {
    meta {
      want          = "a100"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.model}"
            value     = "NVIDIA A100-SXM4-40GB"
          }
        }
      }
    }
  }

  group "unknown-operator" {
    meta {
      want          = "h100,a100,a100-1g"
      want_implicit = "gpu"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.model}"
            operator  = ">"
            value     = "NVIDIA B"
          }
        }
      }
    }
  }

  group "other-vendor" {
    meta {
      want          = ""
      want_implicit = ""
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "gpu" {
          constraint {
            attribute = "${device.vendor}"
            value     = "amd"
          }
        }
      }
    }
  }

  group "two-tasks" {
    meta {
      want          = "h100"
      want_implicit = "gpu"
    }
    task "a" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu/NVIDIA H100 80GB HBM3" {}
      }
    }
    task "b" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.attr.mig}"
            value     = "false"
          }
        }
      }
    }
  }

  group "no-gpu" {
    meta {
      want          = "none"
      want_implicit = "none"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "true" }
      resources {
        device "amd/gpu" {}
      }
    }
  }
}
