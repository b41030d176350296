package backuprepo_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/svchost/svc/internal/backuprepo"
)

// FuzzParseManifest: any bytes either parse into a manifest whose every
// part has a root directory first and paths inside it, or are refused;
// never a panic.
func FuzzParseManifest(f *testing.F) {
	good, _ := json.Marshal(backuprepo.Manifest{Format: 1, BackupID: "bkp_1", CreatedAt: time.Unix(0, 0).UTC(), Parts: []backuprepo.PartManifest{{
		Name: "volume/vol_1", Entries: []backuprepo.Entry{{Path: ".", Type: "d", Mode: 0o700}, {Path: "f", Type: "f", Size: 3,
			Chunks: []backuprepo.Chunk{{ID: string(make64('a')), Size: 3, Hash: string(make64('b'))}}}, {Path: "l", Type: "l", Target: "../../etc"}},
	}}})
	f.Add(good)
	f.Add([]byte(`{"format":1,"parts":[{"name":"p","entries":[{"p":"../x","t":"f"}]}]}`))
	f.Add([]byte(`{"format":2}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := backuprepo.ParseManifest(b)
		if err != nil {
			return
		}
		for _, p := range m.Parts {
			if len(p.Entries) == 0 || p.Entries[0].Path != "." || p.Entries[0].Type != "d" {
				t.Fatalf("part %s without its root first: %+v", p.Name, p.Entries)
			}
			for _, e := range p.Entries {
				if len(e.Path) > 0 && (e.Path[0] == '/' || e.Path == ".." || len(e.Path) >= 3 && e.Path[:3] == "../") {
					t.Fatalf("a path out of the part: %q", e.Path)
				}
			}
		}
	})
}

func make64(c byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return b
}
