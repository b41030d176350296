package scan

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkScanSample scans each sample with the spec detection proposes,
// against the fixture database.
func BenchmarkScanSample(b *testing.B) {
	db := fixtureDB(b)
	for _, name := range []string{"go-hello", "go-notes", "go-whoami", "node-hello", "python-hello", "static-hello", "hostile"} {
		b.Run(name, func(b *testing.B) {
			in := Input{Dir: filepath.Join("..", "..", "samples", name), Spec: goodSpec(), DB: db}
			for b.Loop() {
				if _, err := Scan(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// repo10k writes a 10,000-file repository: 100 directories of 100 source
// files of about 2 KiB, a tenth of them with a secret-like word (so the
// rules run on them), a package-lock.json of 1,000 packages, a go.mod of
// 100 requirements and a requirements.txt of 100 pins.
func repo10k(b *testing.B) string {
	dir := b.TempDir()
	body := strings.Repeat("func handler(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, r.URL.Path) }\n", 24)
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 97 {
			content := body
			if f%10 == 0 {
				content += "var tokenLength = 32 // the session token's length\n"
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%03d.go", f)), []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	var lock strings.Builder
	lock.WriteString(`{"lockfileVersion": 3, "packages": {"": {"name": "big"}`)
	for i := range 1000 {
		fmt.Fprintf(&lock, `, "node_modules/pkg-%d": {"version": "1.%d.0", "integrity": "sha512-abc"}`, i, i)
	}
	lock.WriteString(`, "node_modules/lodash": {"version": "4.17.15"}}}`)
	var gomod, reqs strings.Builder
	gomod.WriteString("module big\n\ngo 1.22\n\nrequire (\n\tgolang.org/x/text v0.3.7\n")
	for i := range 100 {
		fmt.Fprintf(&gomod, "\texample.com/mod%d v1.%d.0\n", i, i)
		fmt.Fprintf(&reqs, "package-%d==2.%d\n", i, i)
	}
	gomod.WriteString(")\n")
	for p, c := range map[string]string{"package-lock.json": lock.String(), "go.mod": gomod.String(), "requirements.txt": reqs.String()} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkScan10000Files scans a generated 10,000-file repository
// against a generated database of 5,000 advisories.
func BenchmarkScan10000Files(b *testing.B) {
	dir := repo10k(b)
	db, err := LoadDB(osvZip(b, 5000))
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Dir: dir, Spec: goodSpec(), DB: db}
	var res Result
	for b.Loop() {
		if res, err = Scan(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	if len(res.Findings) != 2 {
		b.Fatalf("%d findings, want 2 (lodash and x/text)", len(res.Findings))
	}
}

// osvZip writes an OSV export of n advisories across the three
// ecosystems, with one for lodash and one for golang.org/x/text.
func osvZip(b *testing.B, n int) string {
	p := filepath.Join(b.TempDir(), "all.zip")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw := zip.NewWriter(f)
	ecos := []string{EcosystemNPM, EcosystemPyPI, EcosystemGo}
	for i := range n {
		name := fmt.Sprintf("advised-%d", i)
		eco := ecos[i%3]
		switch i {
		case 0:
			name, eco = "lodash", EcosystemNPM
		case 1:
			name, eco = "golang.org/x/text", EcosystemGo
		}
		w, _ := zw.Create(fmt.Sprintf("BENCH-%d.json", i))
		fmt.Fprintf(w, `{"id":"BENCH-%d","modified":"2025-01-01T00:00:00Z","summary":"a generated advisory","affected":[{"package":{"ecosystem":%q,"name":%q},`+
			`"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"1000.0.0"}]}]}],"database_specific":{"severity":"HIGH"}}`, i, eco, name)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return p
}

// BenchmarkLoadDB loads a 5,000-advisory export from its zip.
func BenchmarkLoadDB(b *testing.B) {
	p := osvZip(b, 5000)
	for b.Loop() {
		if _, err := LoadDB(p); err != nil {
			b.Fatal(err)
		}
	}
}
