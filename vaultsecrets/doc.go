// Package vaultsecrets owns the secrets adapters: builtin (AES-256-GCM in
// the replicated store under a key-encryption key kept in the work dir, the
// embedded default) and vault (KV version 2). It is the only package that
// imports Vault's API client, and it translates Vault's errors into the
// specification's codes.
//
// It must not touch HTTP routing or the scheduler. The adapters arrive with
// the adapters and secrets issue; until then this package only reserves its
// place in the layout.
package vaultsecrets
