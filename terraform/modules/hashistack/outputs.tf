output "kv_mount" {
  description = "The KV version 2 mount (the vault adapter's mount, the nomad adapter's vault_mount)."
  value       = local.kv_mount
}

output "kv_prefix" {
  description = "The path under the mount (the vault adapter's prefix, the nomad adapter's vault_prefix)."
  value       = var.kv_prefix
}

output "apps_role" {
  description = "The JWT role svc's app workloads log in with (the nomad adapter's vault_role)."
  value       = vault_jwt_auth_backend_role.apps.role_name
}

output "server_role" {
  description = "The JWT role the svc servers' job logs in with (the svc-nomad module's vault_role)."
  value       = vault_jwt_auth_backend_role.server.role_name
}

output "jwt_auth_path" {
  description = "Mount path of the JWT auth method (the Nomad clients' vault.jwt_auth_backend_path)."
  value       = vault_jwt_auth_backend.nomad.path
}

output "approle_path" {
  description = "Mount path of the AppRole auth method (the vault adapter's approle_mount)."
  value       = vault_auth_backend.approle.path
}

output "approle_role_id" {
  description = "svc's AppRole role_id (the vault adapter's role_id credential)."
  value       = vault_approle_auth_backend_role.svc.role_id
  sensitive   = true
}

output "approle_secret_id" {
  description = "svc's AppRole secret_id (the vault adapter's secret_id credential); null when approle_secret_id_wrapping_ttl is set."
  value       = var.approle_secret_id_wrapping_ttl == "" ? vault_approle_auth_backend_role_secret_id.svc.secret_id : null
  sensitive   = true
}

output "approle_secret_id_wrapping_token" {
  description = "A single-use wrapping token that unwraps to the secret_id (vault unwrap), when approle_secret_id_wrapping_ttl is set; null otherwise."
  value       = var.approle_secret_id_wrapping_ttl == "" ? null : vault_approle_auth_backend_role_secret_id.svc.wrapping_token
  sensitive   = true
}

output "nomad_namespace" {
  description = "The Nomad namespace of svc's app jobs (the nomad adapter's namespace)."
  value       = var.nomad_namespace
}

output "nomad_token" {
  description = "svc's Nomad ACL token (the nomad adapter's token credential); null without Nomad ACLs."
  value       = var.nomad_acl_enabled ? nomad_acl_token.svc[0].secret_id : null
  sensitive   = true
}

output "consul_token" {
  description = "The consul routes adapter's ACL token; null without Consul ACLs."
  value       = var.consul_acl_enabled ? data.consul_acl_token_secret_id.routes[0].secret_id : null
  sensitive   = true
}

output "tokens_path" {
  description = "KV path (under the mount) of the adapters' tokens the svc-nomad job reads; null when neither ACL system is on."
  value       = var.nomad_acl_enabled || var.consul_acl_enabled ? vault_kv_secret_v2.tokens[0].name : null
}
