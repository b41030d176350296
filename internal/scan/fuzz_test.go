package scan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The parsers must not panic on any input, and what they return is
// well-formed: a name and a version for every package.
func fuzzParser(f *testing.F, parse func([]byte) []Package, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range parse(b) {
			if p.Name == "" || p.Version == "" || p.Ecosystem == "" {
				t.Fatalf("a package without a name, version or ecosystem: %+v", p)
			}
		}
	})
}

func seedFile(f *testing.F, p string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "repos", "vulnerable", p))
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}

func FuzzParseGoMod(f *testing.F) {
	fuzzParser(f, parseGoMod, seedFile(f, "go.mod"), "module m\nrequire a v1.0.0\nreplace a => b v2.0.0\n", "require (\n")
}

func FuzzParsePackageLock(f *testing.F) {
	fuzzParser(f, parsePackageLock, seedFile(f, "web/package-lock.json"), `{"dependencies":{"a":{"version":"1.0.0","dependencies":{"a":{"version":"1.0.1"}}}}}`, `{"packages":{"node_modules/":{"version":"1"}}}`)
}

func FuzzParsePackageJSON(f *testing.F) {
	fuzzParser(f, parsePackageJSON, seedFile(f, "legacy/package.json"), `{"dependencies":{"a":"=v1.0.0+build"}}`)
}

func FuzzParseRequirements(f *testing.F) {
	fuzzParser(f, parseRequirements, seedFile(f, "api/requirements.txt"), "a[b,c]===1!2.0.post1.dev3+local ; x\n")
}

func FuzzParsePoetryLock(f *testing.F) {
	fuzzParser(f, parsePoetryLock, seedFile(f, "worker/poetry.lock"), "[[package]]\nname = 'a'\nversion = \"1\"\n")
}

// FuzzOSVRecord: any record either is refused or indexes and matches
// without panicking, whatever its ranges hold.
func FuzzOSVRecord(f *testing.F) {
	entries, _ := os.ReadDir(filepath.Join("testdata", "osv"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			b, _ := os.ReadFile(filepath.Join("testdata", "osv", e.Name()))
			f.Add(b, "1.0.0")
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, version string) {
		db := &DB{index: map[string][]advisory{}}
		if db.add(b) != nil {
			return
		}
		var pkgs []Package
		for key := range db.index {
			eco, name, _ := strings.Cut(key, "\x00")
			pkgs = append(pkgs, Package{Ecosystem: eco, Name: name, Version: version, Path: "m"})
		}
		for _, f := range db.match(pkgs) {
			if f.Severity != Critical && f.Severity != High && f.Severity != Medium && f.Severity != Low {
				t.Fatalf("severity %q", f.Severity)
			}
		}
	})
}

// FuzzComparePEP440 holds the comparison to an order: a version equals
// itself, swapping the operands negates the result, and it is transitive.
func FuzzComparePEP440(f *testing.F) {
	for _, s := range [][3]string{{"1.0", "1.0.post1", "1.0a1"}, {"1!0", "2.0.dev1", "2.0rc1+l.1"}, {"1.0+a", "1.0+1", "1.0"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) { checkOrder(t, EcosystemPyPI, a, b, c) })
}

// FuzzCompareSemver does the same for Go and npm versions.
func FuzzCompareSemver(f *testing.F) {
	for _, s := range [][3]string{{"1.0.0", "v1.0.0-rc.1", "1.0.0+b"}, {"0.0.0-2020-abc", "v2.0.0+incompatible", "1.2"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		checkOrder(t, EcosystemNPM, a, b, c)
		checkOrder(t, EcosystemGo, a, b, c)
	})
}

func checkOrder(t *testing.T, eco, a, b, c string) {
	if x, ok := compareVersions(eco, a, a); ok && x != 0 {
		t.Fatalf("%s: %q compared with itself is %d", eco, a, x)
	}
	ab, ok1 := compareVersions(eco, a, b)
	ba, ok2 := compareVersions(eco, b, a)
	if ok1 != ok2 || ab != -ba {
		t.Fatalf("%s: cmp(%q,%q) = %d,%t but cmp(%q,%q) = %d,%t", eco, a, b, ab, ok1, b, a, ba, ok2)
	}
	bc, ok3 := compareVersions(eco, b, c)
	ac, ok4 := compareVersions(eco, a, c)
	if ok1 && ok3 && ok4 && ab <= 0 && bc <= 0 && ac > 0 {
		t.Fatalf("%s: %q <= %q <= %q but %q > %q", eco, a, b, c, a, c)
	}
}

// FuzzFindSecrets: any file content is searched without panicking, every
// finding names a line of the file, and no title carries what a rule
// matched.
func FuzzFindSecrets(f *testing.F) {
	f.Add([]byte("AWS_SECRET_ACCESS_KEY=" + "abcdefghijABCDEFGHIJ0123456789abcdefghij\npassword: \"" + "hunter2hunter2Xq9\"\n"))
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat("QUJD", 20) + "\n-----END RSA PRIVATE KEY-----"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines := strings.Count(string(b), "\n") + 1
		for _, fd := range findSecrets("f", b) {
			var line int
			if _, err := fmtSscan(fd.ID, &line); err != nil || line < 1 || line > lines {
				t.Fatalf("finding %s names line %d of %d", fd.ID, line, lines)
			}
		}
		for _, r := range secretRules {
			for _, m := range r.re.FindAllSubmatch(b, 64) {
				if len(m[1]) < 8 {
					continue
				}
				for _, fd := range findSecrets("f", b) {
					if strings.Contains(fd.Title, string(m[1])) {
						t.Fatalf("title %q carries %q", fd.Title, m[1])
					}
				}
			}
		}
	})
}

// fmtSscan reads the line number at the end of a secret finding's ID.
func fmtSscan(id string, line *int) (int, error) {
	i := strings.LastIndex(id, ":")
	n, ok := atoi(id[i+1:])
	if !ok {
		return 0, os.ErrInvalid
	}
	*line = n
	return 1, nil
}
