terraform {
  required_version = ">= 1.6.0"

  required_providers {
    vault = {
      source  = "hashicorp/vault"
      version = ">= 4.2.0, < 6.0.0"
    }
    nomad = {
      source  = "hashicorp/nomad"
      version = ">= 2.3.0, < 3.0.0"
    }
    consul = {
      source  = "hashicorp/consul"
      version = ">= 2.21.0, < 3.0.0"
    }
  }
}

provider "vault" {
  address = var.vault_addr
}

provider "nomad" {
  address = var.nomad_addr
}

# Consul is optional here (consul_addr): without it the apps use Nomad's
# service discovery and the provider, which the hashistack module requires,
# is never called. Its token comes from CONSUL_HTTP_TOKEN.
provider "consul" {
  address = var.consul_addr == "" ? "127.0.0.1:8500" : var.consul_addr
}

module "hashistack" {
  source = "../../modules/hashistack"

  nomad_addr         = var.nomad_addr
  create_kv_mount    = false # a Vault dev server has secret/ (KV v2) already
  server_job_id      = "svc"
  nomad_namespace    = var.apps_namespace
  nomad_acl_enabled  = var.nomad_acl_enabled
  nomad_raw_exec     = true # the apps run with raw_exec (apps_driver below)
  consul_acl_enabled = var.consul_addr != "" && var.consul_acl_enabled
  consul_auth_method = var.consul_addr != "" && var.consul_acl_enabled ? "nomad-workloads" : ""
}

module "svc" {
  source = "../../modules/svc-nomad"

  job_name         = "svc"
  server_count     = 3
  server_addresses = ["127.0.0.1", "127.0.0.1", "127.0.0.1"]
  driver           = var.server_driver
  apps_driver      = "raw_exec"
  host_volume_root = var.state_root
  artifact_url     = var.artifact_url
  artifact_sha256  = var.artifact_sha256

  vault_addr         = var.vault_addr
  nomad_addr         = var.nomad_addr
  vault_role         = module.hashistack.server_role
  kv_mount           = module.hashistack.kv_mount
  kv_prefix          = module.hashistack.kv_prefix
  apps_role          = module.hashistack.apps_role
  apps_namespace     = module.hashistack.nomad_namespace
  service_provider   = var.consul_addr == "" ? "nomad" : "consul"
  consul_addr        = var.consul_addr
  nomad_acl_enabled  = var.nomad_acl_enabled
  consul_acl_enabled = var.consul_addr != "" && var.consul_acl_enabled

  # The servers read the adapters' tokens once the module has written them.
  depends_on = [module.hashistack]
}
