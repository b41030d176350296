// Package vaultsecrets owns the secrets adapters: builtin (values sealed
// with AES-256-GCM by the keyring and kept in the replicated store, the
// embedded default) and vault (KV version 2 under a mount and prefix, with
// token or AppRole authentication). The vault adapter also keeps the
// values of a job's sealed variables (a filled slot's credentials) where
// the Nomad job's template block reads them, in a folder of the app's per
// job and workload (jobsecrets.go), and sweeps those of deleted apps. It
// is the only package that imports Vault's API client, and it translates
// Vault's errors into the specification's codes by status, never by
// message text.
//
// Both implement secrets.Backend; the secrets service decides what is
// audited and what the API shows. This package must not touch HTTP routing,
// the scheduler or any table: the builtin adapter re-seals its values in
// the secrets rows through secrets.Resealed.
package vaultsecrets
