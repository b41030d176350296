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
// scanner adapters this server loaded: the first that has one, the
// primary first (configuring an AI screening adapter makes it the
// category's primary, and the built-in scanner still matches
// dependencies); none when no such scanner opened (the basis then says
// dependencies were not checked).
type scannerDatabases struct{ adapters *adapters.Service }

var _ security.Databases = scannerDatabases{}

func (d scannerDatabases) Database(ctx context.Context) (*scan.DB, error) {
	set := d.adapters.Current()
	if set == nil {
		return nil, nil
	}
	for _, l := range set.Of(adapters.CategoryScanner) {
		if src, ok := l.Instance.(osvSource); ok {
			return src.Database(ctx)
		}
	}
	return nil, nil
}

// scannerScreeners gives the security service the AI screening adapters
// (scanners/ai) this server loaded; it calls none under host policy
// disable_ai_screening.
func scannerScreeners(ad *adapters.Service) security.Screeners {
	return security.AdapterScreeners{Adapters: ad}
}
