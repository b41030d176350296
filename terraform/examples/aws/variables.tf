variable "region" {
  description = "AWS region of the cluster, e.g. eu-central-1."
  type        = string
}

variable "name" {
  description = "Name of the cluster: a prefix of every resource's name and the svc:cluster tag on each."
  type        = string
  default     = "svc"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,20}$", var.name))
    error_message = "name must be 1 to 21 of a-z 0-9 -, beginning with a letter."
  }
}

variable "server_count" {
  description = "Number of VMs, each a Consul, Nomad and Vault server, a Nomad client and an svc node (one Raft voter): 3 or 5."
  type        = number
  default     = 3

  validation {
    condition     = contains([3, 5], var.server_count)
    error_message = "server_count must be 3 or 5 (an odd cluster that survives one or two losses)."
  }
}

variable "instance_type" {
  description = "EC2 instance type of the VMs; its architecture must match architecture and the svc binary."
  type        = string
  default     = "t3.medium"
}

variable "architecture" {
  description = "CPU architecture of the Ubuntu image: amd64 (t3, m6i…) or arm64 (t4g, m7g…)."
  type        = string
  default     = "amd64"

  validation {
    condition     = contains(["amd64", "arm64"], var.architecture)
    error_message = "architecture must be amd64 or arm64."
  }
}

variable "disk_gb" {
  description = "Size of each VM's root disk (encrypted gp3), in GiB: the stack, svc's state and builds, the apps."
  type        = number
  default     = 30
}

variable "vpc_cidr" {
  description = "The private network's address range (a /16); the VMs get fixed addresses .10, .11 in one /24 per zone."
  type        = string
  default     = "10.42.0.0/16"

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0)) && endswith(var.vpc_cidr, "/16")
    error_message = "vpc_cidr must be an IPv4 /16, e.g. 10.42.0.0/16."
  }
}

variable "api_cidrs" {
  description = "IPv4 ranges allowed to reach svc's API and console (svc_http_port) on the VMs' public addresses, e.g. [\"203.0.113.7/32\"]. Nothing else is reachable from outside."
  type        = list(string)

  validation {
    condition     = length(var.api_cidrs) > 0 && alltrue([for c in var.api_cidrs : can(cidrhost(c, 0))])
    error_message = "api_cidrs must list at least one IPv4 CIDR such as 203.0.113.7/32."
  }
}

variable "open_app_ports" {
  description = "Also open svc's app ports (9000-9019, port routing) to api_cidrs, to reach deployed apps directly."
  type        = bool
  default     = true
}

variable "svc_http_port" {
  description = "svc's API and console port (svc's server.addr default is :8080)."
  type        = number
  default     = 8080
}

variable "svc_cluster_port" {
  description = "svc's Raft (cluster) port. Not 8300: Consul's server RPC port is on the same VMs. Private: the traffic is authenticated, not encrypted."
  type        = number
  default     = 7000

  validation {
    condition     = var.svc_cluster_port >= 1024 && var.svc_cluster_port <= 65535 && !(var.svc_cluster_port >= 8200 && var.svc_cluster_port <= 8600) && !(var.svc_cluster_port >= 4646 && var.svc_cluster_port <= 4648)
    error_message = "svc_cluster_port must be from 1024 to 65535 and clash with none of Vault's, Consul's or Nomad's ports."
  }
}

variable "svc_url" {
  description = "HTTPS URL of the svc binary (linux, the VMs' architecture) each VM downloads, e.g. a release asset."
  type        = string

  validation {
    condition     = can(regex("^https?://", var.svc_url))
    error_message = "svc_url must be an https:// (or http://) URL."
  }
}

variable "svc_sha256" {
  description = "SHA-256 of the svc binary in hex (sha256sum svc); a VM refuses a download that does not match."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.svc_sha256))
    error_message = "svc_sha256 must be 64 lowercase hex digits."
  }
}

variable "nomad_version" {
  description = "Nomad's package version in HashiCorp's apt repository (apt-cache madison nomad), e.g. 1.9.7-1."
  type        = string
  default     = "1.9.7-1"
}

variable "consul_version" {
  description = "Consul's package version in HashiCorp's apt repository (apt-cache madison consul), e.g. 1.20.5-1."
  type        = string
  default     = "1.20.5-1"
}

variable "vault_version" {
  description = "Vault's package version in HashiCorp's apt repository (apt-cache madison vault), e.g. 1.18.5-1."
  type        = string
  default     = "1.18.5-1"
}

variable "hashicorp_apt_key_fingerprint" {
  description = "Fingerprint of HashiCorp's apt signing key (https://www.hashicorp.com/trust/security); a VM refuses a key at apt.releases.hashicorp.com/gpg with another."
  type        = string
  default     = "798AEC654E5C15428C8E42EEAA16FCBCA621E701"

  validation {
    condition     = can(regex("^[0-9A-F]{40}$", var.hashicorp_apt_key_fingerprint))
    error_message = "hashicorp_apt_key_fingerprint must be 40 uppercase hex digits, without spaces."
  }
}
