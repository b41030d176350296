output "apps_role" {
  description = "The JWT role svc's app workloads log in with: the nomad adapter's vault_role in each VM's /etc/svc/svc.yaml (svc-apps)."
  value       = module.hashistack.apps_role
}

output "jwt_auth_path" {
  description = "Mount path of the JWT auth method Nomad's workload identities log in with: the Nomad agents' vault.jwt_auth_backend_path (jwt-nomad)."
  value       = module.hashistack.jwt_auth_path
}
