package main

import (
	"context"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/security"
)

// osvSource is what a scanner adapter instance offers the security
// service (scanners/builtin).
type osvSource interface {
	Database(ctx context.Context) (*scan.DB, error)
}

// scannerDatabases gives the security service the OSV database of the
// primary scanner adapter this server loaded: none when the scanner did
// not open (the basis then says dependencies were not checked).
type scannerDatabases struct{ adapters *adapters.Service }

var _ security.Databases = scannerDatabases{}

func (d scannerDatabases) Database(ctx context.Context) (*scan.DB, error) {
	set := d.adapters.Current()
	if set == nil {
		return nil, nil
	}
	l, ok := set.Primary(adapters.CategoryScanner)
	if !ok || l.Instance == nil {
		return nil, nil
	}
	src, ok := l.Instance.(osvSource)
	if !ok {
		return nil, nil
	}
	return src.Database(ctx)
}
