// Package terraform holds no Go code of svc: it is the home of the
// Terraform (OpenTofu) modules and examples that run svc on Nomad, Consul
// and Vault (modules/hashistack, modules/svc-nomad, examples/local,
// examples/aws), and of the test that checks them without OpenTofu or its
// providers.
package terraform
