package main

import (
	"context"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/raftstore"
)

// edgeSigning is what signs the edge's assertions: the signing keys (the
// JWKS and their rotation, for the API) and the signer the proxy calls.
type edgeSigning struct {
	keys   *edge.SigningKeys
	signer *edge.JWTSigner
}

// keyMaintenanceTick is how often the leader checks whether a signing key
// is due for rotation or retirement.
const keyMaintenanceTick = time.Minute

// buildEdgeSigning wires the assertion signing keys, sealed by the keyring
// (which re-seals them when it rotates), and the signer with the
// configuration's issuer. The leader makes the first key, rotates every
// edge.KeyRotationInterval and retires keys no assertion can still need;
// every node follows the table so that a rotation anywhere switches its
// signatures at once.
func buildEdgeSigning(ctx context.Context, gen *generation, store *raftstore.Store, ring *keyring.Ring, now func() time.Time) (*edgeSigning, error) {
	keys, err := edge.NewSigningKeys(edge.KeysDeps{Store: store, Ring: ring, Now: now, Logger: gen.log})
	if err != nil {
		return nil, err
	}
	ring.OnRotate(keys)
	signer, err := edge.NewSigner(edge.SignerConfig{Keys: keys, Issuer: gen.cfg.Server.Issuer, Now: now})
	if err != nil {
		return nil, err
	}
	store.RunWhileLeader("edge-keys", keys.Loop(edge.KeyRotationInterval, keyMaintenanceTick))
	go func() { _ = keys.Watch(ctx) }()
	return &edgeSigning{keys: keys, signer: signer}, nil
}
