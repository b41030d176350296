output "api_addresses" {
  description = "svc's API and console on each VM's public address; any node answers (reads locally, writes forwarded to the leader)."
  value       = [for i in aws_instance.server : "http://${i.public_ip}:${var.svc_http_port}"]
}

output "private_ips" {
  description = "The VMs' private addresses, in order: svc-1, svc-2, …; the first holds Vault's initial root token."
  value       = local.server_ips
}

output "instance_ids" {
  description = "The VMs' instance IDs, in the same order, for aws ssm start-session --target."
  value       = aws_instance.server[*].id
}

output "first_instance_id" {
  description = "Instance ID of the first VM, which initialised Vault and keeps /root/vault-init.json."
  value       = aws_instance.server[0].id
}

output "vault_addr" {
  description = "Vault's address on the private network (the stack/ module's vault_addr, through a port forward)."
  value       = "http://${local.server_ips[0]}:8200"
}

output "nomad_addr" {
  description = "Nomad's address on the private network, as Vault fetches its JWKS (the stack/ module's nomad_addr)."
  value       = "http://${local.server_ips[0]}:4646"
}

output "kms_key_id" {
  description = "The KMS key Vault auto-unseals with: deleting it makes Vault's data unreadable."
  value       = aws_kms_key.vault.key_id
}
