variable "vault_addr" {
  description = "The Vault dev server's address (vault server -dev); the provider's token comes from VAULT_TOKEN."
  type        = string
  default     = "http://127.0.0.1:8200"
}

variable "nomad_addr" {
  description = "The Nomad dev agent's address (nomad agent -dev)."
  type        = string
  default     = "http://127.0.0.1:4646"
}

variable "artifact_url" {
  description = "URL of the svc binary the Nomad client downloads, e.g. file:///path/to/bin/svc or a local HTTP server's URL."
  type        = string
}

variable "artifact_sha256" {
  description = "SHA-256 of that binary in hex (sha256sum bin/svc)."
  type        = string
}

variable "state_root" {
  description = "Directory holding the three servers' host volumes svc-state-1..3 (the dev agent's host_volume paths)."
  type        = string
  default     = "/tmp/svc-state"
}

variable "nomad_acl_enabled" {
  description = "The Nomad agent runs with ACLs (acl { enabled = true }): the Nomad provider's token comes from NOMAD_TOKEN (a management token, e.g. from nomad acl bootstrap), and svc gets a token of its own (the hashistack module's policy)."
  type        = bool
  default     = false
}

variable "consul_addr" {
  description = "A Consul agent's HTTP API address (http://127.0.0.1:8500): the apps register their services there and svc routes with the consul routes adapter. Empty (the default) for Nomad's own service discovery, with no Consul."
  type        = string
  default     = ""
}

variable "consul_acl_enabled" {
  description = "The Consul agent runs with ACLs (default deny): the Consul provider's token comes from CONSUL_HTTP_TOKEN (a management token), svc's routes adapter gets a read-only token, and Nomad's workload identities get the nomad-workloads auth method to register the apps' services (the Nomad agent's consul block names it)."
  type        = bool
  default     = false
}

variable "apps_namespace" {
  description = "Nomad namespace of svc's app jobs; the hashistack module creates it unless it is default. With ACLs, a namespace other than the servers' (default) keeps svc's token away from its own job."
  type        = string
  default     = "default"
}

variable "server_driver" {
  description = "Task driver of the three svc servers: raw_exec (the default here) or exec, which the svc-nomad module defaults to in production: each server runs chrooted with its state in its host volume mounted at /srv/svc (Nomad's exec driver needs Linux, root and cgroups)."
  type        = string
  default     = "raw_exec"
}
