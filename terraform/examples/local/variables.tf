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
