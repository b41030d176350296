variable "job_name" {
  description = "Nomad job ID of the svc servers; the hashistack module's server_job_id must match (only this job may read the servers' secrets)."
  type        = string
  default     = "svc"
}

variable "namespace" {
  description = "Nomad namespace the svc servers' job runs in."
  type        = string
  default     = "default"
}

variable "datacenters" {
  description = "Datacenters the svc servers' job may run in."
  type        = list(string)
  default     = ["*"]
}

variable "server_count" {
  description = "Number of svc servers, one Raft voter each: 3 or 5."
  type        = number
  default     = 3

  validation {
    condition     = contains([3, 5], var.server_count)
    error_message = "server_count must be 3 or 5 (a Raft cluster of an odd size that survives one or two losses)."
  }
}

variable "server_addresses" {
  description = "The Nomad client address each server runs on (its attr.unique.network.ip-address), one per server in order; the same address may repeat (one machine), since each server has its own ports."
  type        = list(string)

  validation {
    condition     = contains([3, 5], length(var.server_addresses))
    error_message = "server_addresses must list 3 or 5 addresses, one per server."
  }
}

variable "http_port" {
  description = "API port of the first server; server i listens on http_port + i."
  type        = number
  default     = 8080

  validation {
    condition     = var.http_port >= 1024 && var.http_port <= 65000
    error_message = "http_port must be from 1024 to 65000."
  }
}

variable "cluster_port" {
  description = "Raft (cluster) port of the first server; server i uses cluster_port + i. Keep these ports on a private network: the traffic is authenticated, not encrypted."
  type        = number
  default     = 8300

  validation {
    condition     = var.cluster_port >= 1024 && var.cluster_port <= 65000
    error_message = "cluster_port must be from 1024 to 65000."
  }
}

variable "artifact_url" {
  description = "URL of the svc binary (linux, the clients' architecture) the Nomad clients download."
  type        = string

  validation {
    condition     = can(regex("^(https?|file)://", var.artifact_url))
    error_message = "artifact_url must be an https://, http:// or file:// URL."
  }
}

variable "artifact_sha256" {
  description = "SHA-256 of the svc binary, in hex; Nomad refuses a download that does not match."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.artifact_sha256))
    error_message = "artifact_sha256 must be 64 lowercase hex digits."
  }
}

variable "driver" {
  description = "Task driver of the svc servers: exec (isolated) or raw_exec (a dev agent)."
  type        = string
  default     = "exec"

  validation {
    condition     = contains(["exec", "raw_exec"], var.driver)
    error_message = "driver must be exec or raw_exec."
  }
}

variable "host_volume_prefix" {
  description = "Server i keeps its state in the Nomad host volume <prefix>-<i> (declared on the client it runs on)."
  type        = string
  default     = "svc-state"
}

variable "cpu" {
  description = "CPU each svc server asks for, in MHz."
  type        = number
  default     = 1000
}

variable "memory_mb" {
  description = "Memory each svc server asks for, in MiB."
  type        = number
  default     = 1024
}

variable "vault_role" {
  description = "Vault JWT role the servers' tasks log in with (the hashistack module's server_role output)."
  type        = string
  default     = "svc-server"
}

variable "vault_addr" {
  description = "Vault's address as svc reaches it (the vault secrets adapter's address)."
  type        = string
}

variable "kv_mount" {
  description = "KV version 2 mount (the hashistack module's kv_mount output)."
  type        = string
  default     = "secret"
}

variable "kv_prefix" {
  description = "Path under the mount (the hashistack module's kv_prefix output). The servers read <mount>/data/<prefix>/server/cluster (fields secret and kek) and, with ACLs, <mount>/data/<prefix>/server/tokens (fields nomad and consul)."
  type        = string
  default     = "svc"
}

variable "apps_role" {
  description = "Vault role svc's app workloads log in with (the hashistack module's apps_role output; the nomad adapter's vault_role)."
  type        = string
  default     = "svc-apps"
}

variable "nomad_addr" {
  description = "Nomad's address as svc reaches it (the nomad runtime adapter's address)."
  type        = string
}

variable "apps_namespace" {
  description = "Nomad namespace of svc's app jobs (the hashistack module's nomad_namespace output)."
  type        = string
  default     = "default"
}

variable "apps_driver" {
  description = "Task driver of svc's app jobs (the nomad adapter's driver): exec or raw_exec."
  type        = string
  default     = "exec"

  validation {
    condition     = contains(["exec", "raw_exec"], var.apps_driver)
    error_message = "apps_driver must be exec or raw_exec."
  }
}

variable "service_provider" {
  description = "Where svc's app jobs register their services, and so which routes adapter svc uses: consul (the consul routes adapter) or nomad (Nomad's service discovery)."
  type        = string
  default     = "consul"

  validation {
    condition     = contains(["consul", "nomad"], var.service_provider)
    error_message = "service_provider must be consul or nomad."
  }
}

variable "consul_addr" {
  description = "Consul's address as svc reaches it (the consul routes adapter's address); used when service_provider is consul."
  type        = string
  default     = "http://127.0.0.1:8500"
}

variable "nomad_acl_enabled" {
  description = "Nomad runs with ACLs: the nomad adapters read their token from the servers' tokens path in Vault (field nomad)."
  type        = bool
  default     = false
}

variable "consul_acl_enabled" {
  description = "Consul runs with ACLs: the consul routes adapter reads its token from the servers' tokens path in Vault (field consul)."
  type        = bool
  default     = false
}

variable "artifact_base_url" {
  description = "svc's address as the Nomad clients reach it (the nomad adapter's artifact_url), e.g. a load balancer over all servers; empty for the first server's API address."
  type        = string
  default     = ""
}

variable "host_volume_root" {
  description = "With driver raw_exec only (it cannot mount volumes): the host directory holding each server's <host_volume_prefix>-<i> state directory, the host volumes' paths."
  type        = string
  default     = "/var/lib/svc-state"
}
