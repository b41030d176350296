output "api_address" {
  description = "The first server's API address; any server answers (reads locally, writes forwarded to the leader)."
  value       = local.api_addresses[0]
}

output "api_addresses" {
  description = "Every server's API address, for a load balancer (health check: GET /readyz)."
  value       = local.api_addresses
}

output "artifact_url" {
  description = "svc's address as the Nomad clients reach it: the nomad runtime adapter's artifact_url in the rendered config."
  value       = local.artifact_base
}

output "job_id" {
  description = "The Nomad job ID of the svc servers."
  value       = nomad_job.svc.id
}
