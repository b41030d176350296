# The second step of examples/aws: prepare the cluster's Vault, Nomad and
# Consul for svc with the hashistack module. Run it once the VMs are up,
# through port forwards to the first VM (README.md, "Step 2"): the Vault
# provider needs a reachable, initialised Vault and a token when it is
# configured, which the first step cannot give it in the same plan.
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

# The token comes from VAULT_TOKEN (the root token in the first VM's
# /root/vault-init.json); it is never a variable, so never in state.
provider "vault" {
  address = var.vault_addr
}

# Nomad's and Consul's management tokens come from NOMAD_TOKEN and
# CONSUL_HTTP_TOKEN (the first VM's /root/nomad-bootstrap.json and
# /root/consul-bootstrap.json), never from variables.
provider "nomad" {
  address = var.nomad_addr
}

provider "consul" {
  address = var.consul_addr
}

module "hashistack" {
  source = "../../../modules/hashistack"

  # What Vault fetches Nomad's JWKS from: the first VM's private address
  # (the first step's nomad_addr output), not the port forward.
  nomad_addr = var.nomad_addr_for_vault
  # The first VM's bootstrap enabled secret/ (KV v2) to keep svc's
  # cluster secret there before this step could run.
  create_kv_mount = false
  kv_mount        = "secret"
  kv_prefix       = "svc"
  # svc runs under systemd, not as a Nomad job: no job may use the
  # servers' JWT role, so bind it to a job ID nothing registers.
  server_job_id = "svc-servers-run-under-systemd"
  # The VMs log in with the aws auth method (cloud-init's svc-node role),
  # so the AppRole secret_id this module makes is not used: keep only a
  # short-lived wrapping token of it in state.
  approle_secret_id_wrapping_ttl = "1m"

  # The VMs run Nomad and Consul with ACLs (cloud-init): svc's Nomad token
  # (its apps' namespace, default here: svc itself is not a Nomad job) and
  # the routes adapter's Consul token, written to Vault where the VMs' svc
  # reads them at start; and the auth method the apps' services register
  # in Consul with (the VMs' Nomad names it in consul.service_auth_method).
  nomad_acl_enabled  = true
  consul_acl_enabled = true
  consul_auth_method = "nomad-workloads"
}
