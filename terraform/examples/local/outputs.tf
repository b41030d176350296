output "api_address" {
  description = "The first svc server's API address."
  value       = module.svc.api_address
}

output "api_addresses" {
  description = "Every svc server's API address."
  value       = module.svc.api_addresses
}

output "approle_role_id" {
  description = "svc's AppRole role_id, for an svc server run outside Nomad."
  value       = module.hashistack.approle_role_id
  sensitive   = true
}
