// Package cacert owns reading an operator's CA certificate file (PEM) into
// a certificate pool, for the adapters that verify a vendor's TLS
// certificate themselves (the nomad runtime, the nomad route source and the
// notification adapters; the vault and consul adapters use their vendor's
// client for it).
//
// It must not import anything of the module.
package cacert

import (
	"crypto/x509"
	"fmt"
	"os"
)

// Pool reads the PEM file at path into a pool of its certificates; a file
// that cannot be read or holds no PEM certificate is an error naming it.
func Pool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA certificate %s holds no PEM certificate", path)
	}
	return pool, nil
}
