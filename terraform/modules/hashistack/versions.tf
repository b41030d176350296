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
