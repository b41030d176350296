package vaultsecrets

import "github.com/svchost/svc/scheduler/nomad"

// The vault adapter, as NewVault returns it and as its kind opens it, is
// where the Nomad runtime writes jobs' slot credentials (the interface is
// the runtime's; this package does not import it outside its tests).
var (
	_ nomad.JobSecrets = (*Vault)(nil)
	_ nomad.JobSecrets = (*lazyVault)(nil)
)
