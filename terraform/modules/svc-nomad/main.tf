locals {
  servers = [for i in range(var.server_count) : {
    index        = i
    id           = "svc-${i + 1}"
    address      = var.server_addresses[i]
    http_port    = var.http_port + i
    cluster_port = var.cluster_port + i
    volume       = "${var.host_volume_prefix}-${i + 1}"
    work_dir     = var.driver == "exec" ? "/srv/svc" : "${var.host_volume_root}/${var.host_volume_prefix}-${i + 1}"
  }]

  peers         = join(",", [for s in local.servers : "${s.id}=${s.address}:${s.cluster_port}"])
  api_addresses = [for s in local.servers : "http://${s.address}:${s.http_port}"]
  artifact_base = var.artifact_base_url != "" ? var.artifact_base_url : local.api_addresses[0]
  server_path   = "${var.kv_mount}/data/${var.kv_prefix}/server"

  # The config file each server reads: the adapters declared, with their
  # credentials read from the environment the job's templates fill.
  config = templatefile("${path.module}/svc.yaml.tftpl", {
    vault_addr         = var.vault_addr
    kv_mount           = var.kv_mount
    kv_prefix          = var.kv_prefix
    nomad_addr         = var.nomad_addr
    apps_namespace     = var.apps_namespace
    apps_driver        = var.apps_driver
    apps_role          = var.apps_role
    service_provider   = var.service_provider
    consul_addr        = var.consul_addr
    artifact_base      = local.artifact_base
    nomad_acl_enabled  = var.nomad_acl_enabled
    consul_acl_enabled = var.consul_acl_enabled
  })
}

resource "nomad_job" "svc" {
  jobspec = templatefile("${path.module}/svc.nomad.hcl.tftpl", {
    job_name           = var.job_name
    namespace          = var.namespace
    datacenters        = jsonencode(var.datacenters)
    servers            = local.servers
    peers              = local.peers
    driver             = var.driver
    artifact_url       = var.artifact_url
    artifact_sha256    = var.artifact_sha256
    cpu                = var.cpu
    memory_mb          = var.memory_mb
    vault_role         = var.vault_role
    server_path        = local.server_path
    config             = local.config
    nomad_acl_enabled  = var.nomad_acl_enabled
    consul_acl_enabled = var.consul_acl_enabled && var.service_provider == "consul"
  })

  purge_on_destroy = true

  lifecycle {
    precondition {
      condition     = length(var.server_addresses) == var.server_count
      error_message = "server_addresses must list exactly server_count addresses."
    }
  }
}
