// Package builtin is the built-in security scanner adapter, the embedded
// default of the scanner category: it hands internal/security the OSV
// advisory database internal/scan matches dependencies against, loaded
// from the osv_db setting (an OSV export: a zip of records or a directory
// of them) and loaded again when the file or directory changes. Without
// osv_db no dependency is matched, and each result's basis says so; the
// secrets and spec checks run all the same.
//
// It has no AI screening: that is scanners/ai's, which host policy's
// disable_ai_screening turns off.
//
// This package must not touch the store, HTTP or another adapter.
package builtin

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/scan"
)

// DefaultID is the well-known ID of the embedded scanner.
const DefaultID = "adp_builtin_scanner"

var _ adapters.Instance = (*Scanner)(nil)

// Kind declares the built-in scanner, the default of its category.
func Kind() adapters.Kind {
	return adapters.Kind{
		Category: adapters.CategoryScanner,
		Name:     "builtin",
		Description: "Scans an app's source for committed secrets, its Go, npm and Python dependencies against an OSV database export, " +
			"and its spec for risks (internal/scan); no AI screening",
		Default:   true,
		DefaultID: DefaultID,
		Settings: []adapters.Setting{
			{Name: "osv_db", Description: "Absolute path of an OSV database export: a zip of OSV JSON records (such as " +
				"https://osv-vulnerabilities.storage.googleapis.com/Go/all.zip) or a directory of them, read again when it changes; " +
				"empty: dependencies are not checked", Example: "/var/lib/svc/osv"},
		},
		Validate: func(settings map[string]string, _ []string) error {
			_, err := pathOf(settings)
			return err
		},
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			p, err := pathOf(c.Settings)
			if err != nil {
				return nil, err
			}
			return New(p), nil
		},
	}
}

func pathOf(settings map[string]string) (string, error) {
	p := settings["osv_db"]
	if p != "" && !filepath.IsAbs(p) {
		return "", errcode.Invalid("config.osv_db", "osv_db must be the absolute path of an OSV export (a zip or a directory), or empty")
	}
	if p == "" {
		return "", nil
	}
	return filepath.Clean(p), nil
}

// Scanner is the built-in scanner: its OSV database, loaded on first use
// and again when the export changes. It is safe for concurrent use.
type Scanner struct {
	path string

	mu     sync.Mutex
	db     *scan.DB
	loaded stamp
}

// stamp is what says an export changed: its modification time and size.
type stamp struct {
	mod  time.Time
	size int64
}

// New returns the scanner over the export at path ("" for none).
func New(path string) *Scanner { return &Scanner{path: path} }

// Database is the OSV database; nil (and no error) without osv_db. An
// export that cannot be read is an error, so that a wrong path never
// reads as "no advisories".
func (s *Scanner) Database(context.Context) (*scan.DB, error) {
	if s.path == "" {
		return nil, nil
	}
	st, err := os.Stat(s.path)
	if err != nil {
		return nil, errcode.New(errcode.AdapterFailed, "the scanner's OSV database %s cannot be read", s.path).
			WithRemedy("download an OSV export there (docs/security.md), or set the scanner adapter's osv_db")
	}
	now := stamp{mod: st.ModTime(), size: st.Size()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil && now == s.loaded {
		return s.db, nil
	}
	db, err := scan.LoadDB(s.path)
	if err != nil {
		return nil, errcode.New(errcode.AdapterFailed, "the scanner's OSV database %s holds no readable advisory", s.path).
			WithRemedy("download an OSV export there (docs/security.md), or set the scanner adapter's osv_db")
	}
	s.db, s.loaded = db, now
	return db, nil
}

// Check says whether the database, when one is configured, can be read.
func (s *Scanner) Check(ctx context.Context) error {
	_, err := s.Database(ctx)
	return err
}

// Capabilities says whether dependencies are checked, and that there is
// no AI screening.
func (s *Scanner) Capabilities() map[string]any {
	return map[string]any{"dependencies": s.path != "", "ai_screening": false}
}
