variable "vault_addr" {
  description = "Vault's address as this machine reaches it: a port forward to the first VM (aws ssm start-session … portNumber=8200)."
  type        = string
  default     = "http://127.0.0.1:8200"
}

variable "nomad_addr" {
  description = "Nomad's address as this machine reaches it: a port forward to the first VM (portNumber=4646)."
  type        = string
  default     = "http://127.0.0.1:4646"
}

variable "consul_addr" {
  description = "Consul's address as this machine reaches it: a port forward to the first VM (portNumber=8500)."
  type        = string
  default     = "127.0.0.1:8500"
}

variable "nomad_addr_for_vault" {
  description = "Nomad's address as Vault reaches it, to fetch Nomad's JWKS: the first step's nomad_addr output (http://<first VM's private address>:4646)."
  type        = string
}
