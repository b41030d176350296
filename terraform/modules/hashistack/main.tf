locals {
  # What the nomad runtime adapter's token may do in its namespace
  # (scheduler/nomad's ACLPolicy; terraform_test.go checks that
  # this policy is the adapter's).
  nomad_capabilities = ["list-jobs", "submit-job", "read-job", "read-logs", "alloc-exec", "alloc-lifecycle", "host-volume-create", "host-volume-read"]

  kv_mount = var.create_kv_mount ? vault_mount.kv[0].path : var.kv_mount
  data     = "${local.kv_mount}/data/${var.kv_prefix}"
  metadata = "${local.kv_mount}/metadata/${var.kv_prefix}"
}

# KV version 2, where svc keeps app secrets and its servers' own secrets.
resource "vault_mount" "kv" {
  count       = var.create_kv_mount ? 1 : 0
  path        = var.kv_mount
  type        = "kv"
  options     = { version = "2" }
  description = "svc: app secrets and the servers' secrets"
}

# The policies docs/cluster-mode.md lists.
resource "vault_policy" "apps" {
  name   = var.apps_role
  policy = <<-POLICY
    path "${local.data}/apps/*" {
      capabilities = ["read"]
    }
  POLICY
}

resource "vault_policy" "svc" {
  name   = "svc"
  policy = <<-POLICY
    path "${local.data}/apps/*" {
      capabilities = ["create", "read", "update"]
    }
    path "${local.metadata}/apps/*" {
      capabilities = ["read", "list", "delete"]
    }
  POLICY
}

# What the svc servers' job reads through its template blocks: the cluster
# secret, the key-encryption key and the adapters' tokens.
resource "vault_policy" "server" {
  name   = var.server_role
  policy = <<-POLICY
    path "${local.data}/server/*" {
      capabilities = ["read"]
    }
  POLICY
}

# Nomad's workload identities log in here.
resource "vault_jwt_auth_backend" "nomad" {
  path               = var.jwt_auth_path
  type               = "jwt"
  description        = "Nomad workload identities"
  jwks_url           = "${trimsuffix(var.nomad_addr, "/")}/.well-known/jwks.json"
  jwks_ca_pem        = var.nomad_jwks_ca_pem == "" ? null : var.nomad_jwks_ca_pem
  jwt_supported_algs = ["RS256", "EdDSA"]
  default_role       = var.apps_role
}

resource "vault_jwt_auth_backend_role" "apps" {
  backend                 = vault_jwt_auth_backend.nomad.path
  role_name               = var.apps_role
  role_type               = "jwt"
  bound_audiences         = [var.workload_audience]
  user_claim              = "/nomad_job_id"
  user_claim_json_pointer = true
  claim_mappings = {
    nomad_namespace = "nomad_namespace"
    nomad_job_id    = "nomad_job_id"
    nomad_task      = "nomad_task"
  }
  token_type     = "service"
  token_policies = [vault_policy.apps.name]
  token_period   = 1800
}

# The svc servers' own job: only the job named server_job_id gets it.
resource "vault_jwt_auth_backend_role" "server" {
  backend                 = vault_jwt_auth_backend.nomad.path
  role_name               = var.server_role
  role_type               = "jwt"
  bound_audiences         = [var.workload_audience]
  bound_claims            = { nomad_job_id = var.server_job_id }
  user_claim              = "/nomad_job_id"
  user_claim_json_pointer = true
  claim_mappings = {
    nomad_namespace = "nomad_namespace"
    nomad_job_id    = "nomad_job_id"
    nomad_task      = "nomad_task"
  }
  token_type     = "service"
  token_policies = [vault_policy.server.name, vault_policy.svc.name]
  token_period   = 1800
}

# svc's own login (the vault secrets adapter's role_id and secret_id), for
# svc servers that do not run as the svc-nomad job.
resource "vault_auth_backend" "approle" {
  type = "approle"
  path = var.approle_path
}

resource "vault_approle_auth_backend_role" "svc" {
  backend        = vault_auth_backend.approle.path
  role_name      = "svc"
  token_policies = [vault_policy.svc.name]
  token_ttl      = 3600
  token_max_ttl  = 86400
}

resource "vault_approle_auth_backend_role_secret_id" "svc" {
  backend      = vault_auth_backend.approle.path
  role_name    = vault_approle_auth_backend_role.svc.role_name
  wrapping_ttl = var.approle_secret_id_wrapping_ttl == "" ? null : var.approle_secret_id_wrapping_ttl
}

# Nomad: svc's namespace, and its ACL policy and token when ACLs are on.
resource "nomad_namespace" "svc" {
  count       = var.nomad_namespace == "default" ? 0 : 1
  name        = var.nomad_namespace
  description = "svc's app jobs"
}

resource "nomad_acl_policy" "svc" {
  count       = var.nomad_acl_enabled ? 1 : 0
  name        = "svc"
  description = "svc's nomad runtime adapter"
  rules_hcl   = <<-RULES
    namespace "${var.nomad_namespace}" {
      capabilities = [${join(", ", formatlist("%q", concat(local.nomad_capabilities, var.nomad_raw_exec ? ["alloc-node-exec"] : [])))}]
    }
    host_volume "svc-*" {
      policy = "write"
    }
    node {
      policy = "read"
    }
  RULES
  depends_on  = [nomad_namespace.svc]
}

resource "nomad_acl_token" "svc" {
  count    = var.nomad_acl_enabled ? 1 : 0
  name     = "svc"
  type     = "client"
  policies = [nomad_acl_policy.svc[0].name]
}

# Consul: the routes adapter reads svc's services and their nodes.
resource "consul_acl_policy" "routes" {
  count       = var.consul_acl_enabled ? 1 : 0
  name        = "svc-routes"
  description = "svc's consul routes adapter"
  rules       = <<-RULES
    service_prefix "${var.service_prefix}" {
      policy = "read"
    }
    node_prefix "" {
      policy = "read"
    }
  RULES
}

resource "consul_acl_token" "routes" {
  count       = var.consul_acl_enabled ? 1 : 0
  description = "svc's consul routes adapter"
  policies    = [consul_acl_policy.routes[0].name]
}

data "consul_acl_token_secret_id" "routes" {
  count       = var.consul_acl_enabled ? 1 : 0
  accessor_id = consul_acl_token.routes[0].id
}

# Consul: Nomad's workload identities log in here to register the apps'
# services (a service's identity may register that service and nothing
# else), as `nomad setup consul` sets it up; only with consul_auth_method.
resource "consul_acl_auth_method" "nomad" {
  count          = var.consul_acl_enabled && var.consul_auth_method != "" ? 1 : 0
  name           = var.consul_auth_method
  display_name   = var.consul_auth_method
  type           = "jwt"
  description    = "Nomad workload identities"
  token_locality = "local"
  config_json = jsonencode(merge({
    JWKSURL          = "${trimsuffix(var.nomad_addr, "/")}/.well-known/jwks.json"
    JWTSupportedAlgs = ["RS256"]
    BoundAudiences   = [var.consul_workload_audience]
    ClaimMappings = {
      nomad_namespace = "nomad_namespace"
      nomad_job_id    = "nomad_job_id"
      nomad_task      = "nomad_task"
      nomad_service   = "nomad_service"
    }
  }, var.nomad_jwks_ca_pem == "" ? {} : { JWKSCACert = var.nomad_jwks_ca_pem }))
}

resource "consul_acl_binding_rule" "services" {
  count       = var.consul_acl_enabled && var.consul_auth_method != "" ? 1 : 0
  auth_method = consul_acl_auth_method.nomad[0].name
  description = "Nomad services register themselves"
  bind_type   = "service"
  bind_name   = "$${value.nomad_service}"
  selector    = "\"nomad_service\" in value"
}

# The adapters' tokens, where the svc-nomad job's templates read them. They
# are in this state already (the token resources hold them), so writing
# them here exposes nothing more.
resource "vault_kv_secret_v2" "tokens" {
  count = var.nomad_acl_enabled || var.consul_acl_enabled ? 1 : 0
  mount = local.kv_mount
  name  = "${var.kv_prefix}/server/tokens"
  data_json = jsonencode(merge(
    var.nomad_acl_enabled ? { nomad = nomad_acl_token.svc[0].secret_id } : {},
    var.consul_acl_enabled ? { consul = data.consul_acl_token_secret_id.routes[0].secret_id } : {},
  ))
}
