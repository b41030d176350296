variable "nomad_addr" {
  description = "Nomad's HTTP API address as Vault reaches it; Vault fetches Nomad's JWKS from <nomad_addr>/.well-known/jwks.json."
  type        = string

  validation {
    condition     = can(regex("^https?://", var.nomad_addr))
    error_message = "nomad_addr must be an http:// or https:// URL."
  }
}

variable "nomad_jwks_ca_pem" {
  description = "PEM of the CA that signed Nomad's certificate, for Vault to fetch the JWKS over TLS; empty for the system's roots."
  type        = string
  default     = ""
}

variable "kv_mount" {
  description = "Path of the KV version 2 mount svc keeps secrets in (the vault adapter's mount, the nomad adapter's vault_mount)."
  type        = string
  default     = "secret"
}

variable "create_kv_mount" {
  description = "Create the KV version 2 mount; false when it exists already (a Vault dev server has secret/)."
  type        = bool
  default     = true
}

variable "kv_prefix" {
  description = "Path under the mount below which svc keeps values (the vault adapter's prefix, the nomad adapter's vault_prefix)."
  type        = string
  default     = "svc"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", var.kv_prefix))
    error_message = "kv_prefix must be path segments of A-Z a-z 0-9 . _ - separated by /, without leading or trailing /."
  }
}

variable "jwt_auth_path" {
  description = "Mount path of the JWT auth method Nomad's workload identities log in with (the clients' vault.jwt_auth_backend_path)."
  type        = string
  default     = "jwt-nomad"
}

variable "workload_audience" {
  description = "Audience of the workload identities Nomad signs for Vault (the servers' vault.default_identity.aud)."
  type        = string
  default     = "vault.io"
}

variable "apps_role" {
  description = "Name of the JWT role and policy svc's app workloads log in with (the nomad adapter's vault_role)."
  type        = string
  default     = "svc-apps"
}

variable "server_role" {
  description = "Name of the JWT role and policy the svc servers' Nomad job logs in with, to read the cluster secret, the key-encryption key and the adapters' tokens."
  type        = string
  default     = "svc-server"
}

variable "server_job_id" {
  description = "Nomad job ID of the svc servers (the svc-nomad module's job_name); only this job may log in with server_role."
  type        = string
  default     = "svc"
}

variable "approle_path" {
  description = "Mount path of the AppRole auth method svc logs in with (the vault adapter's approle_mount)."
  type        = string
  default     = "approle"
}

variable "approle_secret_id_wrapping_ttl" {
  description = "When set (e.g. \"10m\"), the AppRole secret_id is response-wrapped: the output holds a single-use wrapping token instead of the secret_id, and it expires after this duration. Empty for an unwrapped secret_id."
  type        = string
  default     = ""

  validation {
    condition     = var.approle_secret_id_wrapping_ttl == "" || can(regex("^[0-9]+[smh]$", var.approle_secret_id_wrapping_ttl))
    error_message = "approle_secret_id_wrapping_ttl must be empty or a duration such as 300s, 10m or 1h."
  }
}

variable "nomad_acl_enabled" {
  description = "Nomad runs with ACLs: create svc's Nomad ACL policy and token."
  type        = bool
  default     = false
}

variable "nomad_raw_exec" {
  description = "With nomad_acl_enabled: svc's apps run with the raw_exec driver (the nomad adapter's driver setting), so svc's token also gets alloc-node-exec, which Nomad asks of an exec into a task without filesystem isolation (svc exec)."
  type        = bool
  default     = false
}

variable "nomad_namespace" {
  description = "Nomad namespace svc's app jobs run in (the nomad adapter's namespace); created unless it is \"default\"."
  type        = string
  default     = "default"

  validation {
    condition     = can(regex("^[a-zA-Z0-9-]{1,128}$", var.nomad_namespace))
    error_message = "nomad_namespace must be 1 to 128 of a-z A-Z 0-9 -."
  }
}

variable "consul_acl_enabled" {
  description = "Consul runs with ACLs: create the routes adapter's Consul ACL policy and token."
  type        = bool
  default     = false
}

variable "service_prefix" {
  description = "Prefix of the Consul service names svc's jobs register (the routes adapter reads them)."
  type        = string
  default     = "svc-"
}

variable "consul_auth_method" {
  description = "With consul_acl_enabled: name of a Consul JWT auth method to create for Nomad's workload identities (the Nomad servers' consul.service_auth_method, nomad-workloads by default), with the binding rule that lets each Nomad service register itself, as `nomad setup consul` makes them. Empty (the default) when Nomad is already set up for Consul."
  type        = string
  default     = ""

  validation {
    condition     = var.consul_auth_method == "" || can(regex("^[A-Za-z0-9_-]{1,128}$", var.consul_auth_method))
    error_message = "consul_auth_method must be empty or 1 to 128 of A-Z a-z 0-9 _ -."
  }
}

variable "consul_workload_audience" {
  description = "Audience of the workload identities Nomad signs for Consul (the Nomad servers' consul.service_identity.aud); used with consul_auth_method."
  type        = string
  default     = "consul.io"
}
