package local

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/backuprepo/storagetest"
)

func open(t *testing.T, dir string) *Local {
	t.Helper()
	k := Kind("/unused")
	settings := map[string]string{"path": dir}
	if err := k.Validate(settings, nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_local", Settings: settings})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return inst.(*Local)
}

func TestContract(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) backuprepo.Storage {
		return open(t, filepath.Join(t.TempDir(), "backups"))
	})
}
