# The Nomad Autoscaler v0.5.0 with the gputide plugins, as a Nomad service job
# (DESIGN §8, issue 11; the agent config is examples/reference/autoscaler/agent.hcl).
#
#   nomad acl policy apply gputide-autoscaler examples/reference/autoscaler/autoscaler-acl.hcl
#   nomad acl token create -name gputide-autoscaler -policy gputide-autoscaler
#   nomad var put -namespace=default nomad/jobs/nomad-autoscaler token=<its secret ID>
#   nomad job run \
#     -var 'autoscaler_url=https://.../nomad-autoscaler_linux_amd64.tar.gz' \
#     -var 'plugins_url=https://.../gputide-autoscaler-plugins_linux_amd64.tar.gz' \
#     jobs/nomad-autoscaler.nomad.hcl
#
# autoscaler_url: an archive holding the nomad-autoscaler binary (v0.5.0;
# e2e/tools/autoscaler/build.sh builds one). plugins_url: an archive holding
# gputide-apm, gputide-schedule and gputide-idle (`make build`, bin/plugins/).
# One instance: the file policies and the schedule must not be applied twice.
variable "autoscaler_url" {
  type        = string
  description = "URL of an archive (go-getter syntax) holding the nomad-autoscaler v0.5.0 binary"
}

variable "plugins_url" {
  type        = string
  description = "URL of an archive (go-getter syntax) holding the gputide autoscaler plugins"
}

variable "nomad_addr" {
  type    = string
  default = "http://127.0.0.1:4646"
}

variable "broker_addr" {
  type    = string
  default = "http://127.0.0.1:4780"
}

job "nomad-autoscaler" {
  namespace = "default"
  type      = "service"
  priority  = 85

  group "autoscaler" {
    count = 1

    restart {
      attempts = 10
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    task "agent" {
      driver = "exec"

      artifact {
        source = var.autoscaler_url
      }

      artifact {
        source      = var.plugins_url
        destination = "local/plugins"
      }

      config {
        command = "local/nomad-autoscaler"
        args    = ["agent", "-config", "local/agent.hcl"]
      }

      # The autoscaler's token (autoscaler-acl.hcl), from a Nomad variable; the
      # agent reads NOMAD_TOKEN and hands it to the plugins as nomad_token.
      template {
        destination = "secrets/nomad.env"
        env         = true
        data        = <<-EOT
        {{ with nomadVar "nomad/jobs/nomad-autoscaler" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }

      template {
        destination = "local/agent.hcl"
        data        = <<-EOT
        log_level  = "INFO"
        plugin_dir = "local/plugins"

        nomad {
          address   = "${var.nomad_addr}"
          namespace = ["workspace-a", "workspace-b", "workspace-c"]
        }

        http {
          bind_address = "127.0.0.1"
          bind_port    = 8080
        }

        policy {
          dir                         = "local/policies"
          default_evaluation_interval = "1m"
          default_cooldown            = "1m"
        }

        apm "gputide-apm" {
          driver = "gputide-apm"
          config = {
            address = "${var.broker_addr}"
            timeout = "5s"
          }
        }

        strategy "gputide-schedule" {
          driver = "gputide-schedule"
        }

        strategy "gputide-idle" {
          driver = "gputide-idle"
        }
        EOT
      }

      # File policies go here (templates or artifacts); jobs' own scaling
      # blocks are read from Nomad.
      template {
        destination = "local/policies/README"
        data        = "File policies of the autoscaler (examples/reference/autoscaler/*-scaling.hcl).\n"
      }

      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      resources {
        cpu    = 200
        memory = 256
      }
    }
  }
}
