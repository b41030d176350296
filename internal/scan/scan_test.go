package scan

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/detect"
	"github.com/svchost/svc/internal/spec"
)

// TestScore holds the formula to its documented properties: none is 100,
// each severity costs its penalty, the floor is 0, an unknown severity
// costs what a low one does, and ignoreUnfixable drops unfixable findings.
func TestScore(t *testing.T) {
	f := func(sev string, fixable bool) Finding { return Finding{Severity: sev, Fixable: fixable} }
	cases := []struct {
		name     string
		findings []Finding
		ignore   bool
		want     int
	}{
		{"none", nil, false, 100},
		{"one low", []Finding{f(Low, true)}, false, 98},
		{"one medium", []Finding{f(Medium, true)}, false, 92},
		{"one high", []Finding{f(High, true)}, false, 80},
		{"one critical", []Finding{f(Critical, true)}, false, 60},
		{"an unrated finding counts as low", []Finding{f("", true)}, false, 98},
		{"three highs", []Finding{f(High, true), f(High, true), f(High, true)}, false, 40},
		{"two criticals", []Finding{f(Critical, true), f(Critical, true)}, false, 20},
		{"floor", []Finding{f(Critical, true), f(Critical, true), f(Critical, true)}, false, 0},
		{"unfixable counted", []Finding{f(Critical, false), f(Low, true)}, false, 58},
		{"unfixable ignored", []Finding{f(Critical, false), f(Low, true)}, true, 98},
		{"everything unfixable and ignored", []Finding{f(Critical, false)}, true, 100},
	}
	for _, c := range cases {
		if got := Score(c.findings, c.ignore); got != c.want {
			t.Errorf("%s: Score = %d, want %d", c.name, got, c.want)
		}
	}
	// Order: adding a finding never raises the score, and a severer one
	// costs at least as much as a milder one, whatever came before.
	sevs := []string{Low, Medium, High, Critical}
	var acc []Finding
	for i := range 40 {
		base := Score(acc, false)
		for j, s := range sevs {
			with := Score(append(slices.Clone(acc), f(s, true)), false)
			if with > base {
				t.Fatalf("adding a %s finding to %d findings raised the score %d → %d", s, len(acc), base, with)
			}
			if j > 0 {
				milder := Score(append(slices.Clone(acc), f(sevs[j-1], true)), false)
				if with > milder {
					t.Fatalf("a %s finding scores %d, above a %s one's %d", s, with, sevs[j-1], milder)
				}
			}
		}
		acc = append(acc, f(sevs[i%4], true))
	}
}

// goodSpec is a document with nothing for the spec check to say.
func goodSpec() spec.Document {
	return spec.Document{Workloads: map[string]spec.Workload{"web": {
		Run:       spec.Run{Command: []string{"./app"}, Port: 8080, Health: &spec.Health{Path: "/healthz"}},
		Resources: &spec.Resources{CPUMillis: 500, MemoryBytes: 256 << 20},
	}}}
}

func fixtureDB(t testing.TB) *DB {
	t.Helper()
	db, err := LoadDB(filepath.Join("testdata", "osv"))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

type found struct {
	ID       string
	Severity string
	Fixable  bool
}

func summary(fs []Finding) []found {
	out := []found{}
	for _, f := range fs {
		out = append(out, found{f.ID, f.Severity, f.Fixable})
	}
	return out
}

// TestVulnerableRepository scans a tree whose manifests pin versions the
// fixture advisories cover, and gets exactly those findings: ranges of
// both types, several introduced/fixed pairs, last_affected, a versions
// list, CVSS-rated and unrated advisories; a local replace, a link, a
// fixed version, a version range, a withdrawn advisory, another
// ecosystem's, package.json beside a lock file and node_modules find
// nothing.
func TestVulnerableRepository(t *testing.T) {
	res, err := Scan(context.Background(), Input{Dir: filepath.Join("testdata", "repos", "vulnerable"), Spec: goodSpec(), DB: fixtureDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := []found{
		{"osv:TEST-PYSEC-0002:api/requirements.txt:pyyaml@5.3.1", Critical, true},
		{"osv:TEST-NPM-0001:web/package-lock.json:event-stream@3.3.6", Critical, false},
		{"osv:TEST-PYSEC-0001:api/requirements.txt:django@3.2.19", High, true},
		{"osv:GHSA-35jh-r3h4-6jhm:legacy/package.json:lodash@4.17.20", High, true},
		{"osv:GHSA-35jh-r3h4-6jhm:web/package-lock.json:lodash@4.17.15", High, true},
		{"osv:GHSA-p6mc-m468-83gw:web/package-lock.json:lodash@4.17.15", High, true},
		{"osv:TEST-PYSEC-0001:worker/poetry.lock:django@4.1.9", High, true},
		{"osv:TEST-PYSEC-0003:api/requirements.txt:flask-session-legacy@0.3", Medium, false},
		{"osv:GO-2022-1059:go.mod:golang.org/x/text@v0.3.7", Low, true},
	}
	if d := cmp.Diff(want, summary(res.Findings)); d != "" {
		t.Errorf("findings (-want +got):\n%s", d)
	}
	if want := (Counts{Critical: 2, High: 5, Medium: 1, Low: 1}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	titles := map[string]string{}
	for _, f := range res.Findings {
		titles[f.ID] = f.Title + " @ " + deref(f.Path)
	}
	for id, want := range map[string]string{
		"osv:GO-2022-1059:go.mod:golang.org/x/text@v0.3.7":                  "golang.org/x/text v0.3.7 (Go) is affected by GO-2022-1059: Denial of service via crafted Accept-Language header in golang.org/x/text/language; fixed in 0.3.8 @ go.mod",
		"osv:TEST-NPM-0001:web/package-lock.json:event-stream@3.3.6":        "event-stream 3.3.6 (npm) is affected by TEST-NPM-0001: Malicious code in event-stream (a compromised release); no fixed version yet @ web/package-lock.json",
		"osv:TEST-PYSEC-0001:worker/poetry.lock:django@4.1.9":               "django 4.1.9 (PyPI) is affected by TEST-PYSEC-0001: Potential regular expression denial of service in EmailValidator and URLValidator; fixed in 4.1.10 @ worker/poetry.lock",
		"osv:GHSA-p6mc-m468-83gw:web/package-lock.json:lodash@4.17.15":      "lodash 4.17.15 (npm) is affected by GHSA-p6mc-m468-83gw: Prototype Pollution in lodash; fixed in 4.17.19 @ web/package-lock.json",
		"osv:TEST-PYSEC-0003:api/requirements.txt:flask-session-legacy@0.3": "flask-session-legacy 0.3 (PyPI) is affected by TEST-PYSEC-0003: Session fixation in an unmaintained package, no fix released; no fixed version yet @ api/requirements.txt",
	} {
		if titles[id] != want {
			t.Errorf("%s: title %q, want %q", id, titles[id], want)
		}
	}
	if res.Score != 0 {
		t.Errorf("score %d, want 0 (two criticals and five highs)", res.Score)
	}
	ignoring, err := Scan(context.Background(), Input{Dir: filepath.Join("testdata", "repos", "vulnerable"), Spec: goodSpec(), DB: fixtureDB(t), IgnoreUnfixable: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ignoring.Findings) != len(res.Findings) {
		t.Errorf("ignoring unfixable findings dropped findings: %d, want %d", len(ignoring.Findings), len(res.Findings))
	}
	wantBasis := []Basis{
		{ScannerSecrets, fmt.Sprintf("%d rules over 6 files (0 skipped)", len(secretRules))},
		{ScannerDependencies, "15 packages in 5 manifests against OSV database osv (9 advisories, newest modified 2025-01-05)"},
		{ScannerSpec, "the spec document's 1 workload"},
	}
	if d := cmp.Diff(wantBasis, res.Basis); d != "" {
		t.Errorf("basis (-want +got):\n%s", d)
	}
}

// TestWithoutDatabase: with no database the dependency check is skipped
// and the basis says so; nothing else changes.
func TestWithoutDatabase(t *testing.T) {
	res, err := Scan(context.Background(), Input{Dir: filepath.Join("testdata", "repos", "vulnerable"), Spec: goodSpec()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) != 0 || res.Score != 100 {
		t.Errorf("findings %v, score %d; want none and 100", res.Findings, res.Score)
	}
	if got := res.Basis[1].What; got != "not checked: no OSV database configured (15 packages in 5 manifests)" {
		t.Errorf("dependencies basis %q", got)
	}
}

// TestLoadDB: a zip of the same records loads as the directory does, and
// a wrong path, an empty directory and a file that is not a zip are
// errors, never an empty database.
func TestLoadDB(t *testing.T) {
	dir := fixtureDB(t)
	zipPath := filepath.Join(t.TempDir(), "all.zip")
	zf, err := os.Create(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(zf)
	entries, _ := os.ReadDir(filepath.Join("testdata", "osv"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", "osv", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		w, _ := zw.Create(e.Name())
		w.Write(b)
	}
	w, _ := zw.Create("broken.json")
	w.Write([]byte("{not json"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zf.Close()
	fromZip, err := LoadDB(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "OSV database all.zip (9 advisories, newest modified 2025-01-05, 1 unreadable files skipped)"; fromZip.Describe() != want {
		t.Errorf("Describe = %q, want %q", fromZip.Describe(), want)
	}
	if d := cmp.Diff(dir.index, fromZip.index, cmp.AllowUnexported(advisory{}, osvRange{})); d != "" {
		t.Errorf("the zip's index differs from the directory's:\n%s", d)
	}
	notZip := filepath.Join(t.TempDir(), "db")
	os.WriteFile(notZip, []byte("hello"), 0o600)
	for _, p := range []string{filepath.Join(t.TempDir(), "missing"), t.TempDir(), notZip} {
		if db, err := LoadDB(p); err == nil {
			t.Errorf("LoadDB(%s) = %s, want an error", p, db.Describe())
		}
	}
}

// secretsRepo writes a tree with planted secrets. The secrets are made
// here, at random, so that no secret-shaped string is committed (and
// svc's own source scans clean). It returns the secrets planted.
func secretsRepo(t testing.TB) (string, []string) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	s := map[string]string{
		"aws":      "AK" + "IA" + pick(16, upper),
		"awsS":     pick(40, alnum),
		"dbpass":   pick(24, alnum),
		"key":      strings.Join([]string{pick(70, alnum), pick(70, alnum), pick(40, alnum)}, "\n"),
		"gh":       "gh" + "p_" + pick(36, alnum),
		"slack":    "xo" + "xb-1234567890-1234567890123-" + pick(24, alnum),
		"stripe":   "sk" + "_live_" + pick(24, alnum),
		"stripeT":  "sk" + "_test_" + pick(24, alnum),
		"client":   pick(32, alnum),
		"hook":     "https://hooks." + "slack.com/services/T" + pick(8, upper) + "/B" + pick(8, upper) + "/" + pick(24, alnum),
		"django":   pick(50, alnum+"-_"),
		"gcp":      "AI" + "za" + pick(35, alnum),
		"azure":    "abc1" + "Q~" + pick(32, alnum),
		"azureSt":  pick(86, alnum),
		"gl":       "gl" + "pat-" + pick(20, alnum),
		"ghFine":   "github" + "_pat_" + pick(82, alnum),
		"vendored": "gh" + "p_" + pick(36, alnum),
		"binary":   "gh" + "p_" + pick(36, alnum),
	}
	files := map[string]string{
		"config/prod.env": "# production settings\nAWS_ACCESS_KEY_ID=" + s["aws"] + "\nAWS_SECRET_ACCESS_KEY=" + s["awsS"] +
			"\nDATABASE_PASSWORD=" + s["dbpass"] + "\nAPI_TOKEN=${API_TOKEN}\nADMIN_PASSWORD=aaaaaaaaaaaa\n",
		"deploy/id_ed25519": "-----BEGIN OPENSSH " + "PRIVATE KEY-----\n" + s["key"] + "\n-----END OPENSSH PRIVATE KEY-----\n",
		"src/app.js": "const github = '" + s["gh"] + "';\nconst slack = \"" + s["slack"] + "\";\nconst stripe = '" + s["stripe"] +
			"';\nconst stripeTest = '" + s["stripeT"] + "';\nconst apiKey = process.env.API_KEY;\nconst client_secret = \"" + s["client"] +
			"\";\nfetch(\"" + s["hook"] + "\");\n",
		"settings.py": "SECRET_KEY = \"" + s["django"] + "\"\nPASSWORD = \"changeme-example-value\"\nGOOGLE_KEY = \"" + s["gcp"] +
			"\"\nAZURE = \"" + s["azure"] + "\"\nSTORAGE = \"DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + s["azureSt"] +
			"==;EndpointSuffix=core.windows.net\"\nTOKEN_GL = \"" + s["gl"] + "\"\nGH_FINE = \"" + s["ghFine"] + "\"\n",
		"docs/README.md":            "Example: AK" + "IAIOSFODNN7EXAMPLE is AWS's documented example key.\npassword: see the vault\n",
		"node_modules/pkg/index.js": "module.exports = '" + s["vendored"] + "';\n",
		"vendor/example.com/x/x.go": "package x\nconst t = \"" + s["vendored"] + "\"\n",
		"assets/logo.png":           "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + s["binary"] + "\n",
		"go.sum":                    "example.com/x v1.0.0 h1:" + pick(43, alnum) + "= token\n",
		".git/config":               "[credential]\n\thelper = " + s["vendored"] + "\n",
		"web/package-lock.json":     `{"lockfileVersion": 3, "packages": {"node_modules/a": {"version": "1.0.0", "integrity": "sha512-` + pick(86, alnum) + `", "token": "` + pick(30, alnum) + `"}}}`,
		"src/config.go": "package src\n\nvar password = os.Getenv(\"DB_PASSWORD\")\nvar token = getToken(user)\n" +
			"var codes = []string{\"InvalidAccessKeyId\", \"SignatureDoesNotMatch\", \"InvalidToken\", \"ExpiredToken\"}\n" +
			"\tf.token = fl.Value.String()\n\tc.auth.Principal.Kind = authz.KindAnonymous\n\tSecret:   []byte(cfg.Cluster.Secret),\n" +
			"\tsecret = map[string]string{}\n\tTokens = &raftstore.Table[Token]{\n",
		"charts/values.yaml":          "auth:\n  password: \"{{ .Values.secretPassword }}\"\n  token: <your-token-here>\n",
		"src/session.ts":              "const tokenLength = 32;\nconst passwordField = document.getElementById('password');\n",
		"ci/.github/workflows/ci.yml": "env:\n  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n",
	}
	dir := t.TempDir()
	for p, c := range files {
		writeFile(t, filepath.Join(dir, p), c)
	}
	var secrets []string
	for _, v := range s {
		secrets = append(secrets, v)
	}
	return dir, secrets
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPlantedSecrets scans a tree with one secret of every rule planted
// and gets exactly one finding each, at the right file and line; examples,
// placeholders, references to the environment and to code (calls,
// dotted names, lists of names), low-entropy values, lock files, binary
// files and vendored directories find nothing; and no finding carries any
// part of a secret.
func TestPlantedSecrets(t *testing.T) {
	dir, secrets := secretsRepo(t)
	res, err := Scan(context.Background(), Input{Dir: dir, Spec: goodSpec()})
	if err != nil {
		t.Fatal(err)
	}
	want := []found{
		{"secret:aws-secret-key:config/prod.env:3", Critical, true},
		{"secret:private-key:deploy/id_ed25519:1", Critical, true},
		{"secret:azure-storage-key:settings.py:5", Critical, true},
		{"secret:stripe-live-key:src/app.js:3", Critical, true},
		{"secret:aws-access-key:config/prod.env:2", High, true},
		{"secret:azure-client-secret:settings.py:4", High, true},
		{"secret:gcp-api-key:settings.py:3", High, true},
		{"secret:github-fine-grained-token:settings.py:7", High, true},
		{"secret:gitlab-token:settings.py:6", High, true},
		{"secret:github-token:src/app.js:1", High, true},
		{"secret:slack-token:src/app.js:2", High, true},
		{"secret:generic-secret-line:config/prod.env:4", Medium, true},
		{"secret:generic-secret:settings.py:1", Medium, true},
		{"secret:generic-secret:src/app.js:6", Medium, true},
		{"secret:slack-webhook:src/app.js:7", Medium, true},
		{"secret:stripe-test-key:src/app.js:4", Low, true},
	}
	if d := cmp.Diff(want, summary(res.Findings)); d != "" {
		t.Errorf("findings (-want +got):\n%s", d)
	}
	for _, f := range res.Findings {
		if f.Path == nil || !strings.Contains(f.ID, *f.Path) {
			t.Errorf("%s: path %v", f.ID, f.Path)
		}
		for _, s := range secrets {
			for _, part := range []string{s, s[len(s)-8:]} {
				if strings.Contains(f.Title, part) || strings.Contains(f.ID, part) {
					t.Errorf("finding %s carries a secret: %q", f.ID, f.Title)
				}
			}
		}
	}
	if want := "Committed GitHub token in src/app.js line 1: remove it from the source, rotate it and give it to the app as a secret"; !slices.ContainsFunc(res.Findings, func(f Finding) bool { return f.Title == want }) {
		t.Errorf("no finding titled %q", want)
	}
}

// TestScoresOrdered: the same tree scores lower the more and the severer
// what is planted in it.
func TestScoresOrdered(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	tok := func(prefix string) string {
		const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		b := []byte(prefix)
		for range 36 {
			b = append(b, alnum[r.IntN(len(alnum))])
		}
		return string(b)
	}
	steps := []map[string]string{
		{"main.go": "package main\n"},
		{"main.go": "package main\n", "a.js": "const k = '" + tok("sk"+"_test_") + "';\n"},
		{"main.go": "package main\n", "a.js": "const k = '" + tok("sk"+"_test_") + "';\n", "b.py": "API_SECRET = \"" + tok("") + "\"\n"},
		{"main.go": "package main\n", "a.js": "const k = '" + tok("sk"+"_test_") + "';\n", "b.py": "API_SECRET = \"" + tok("") + "\"\n", "c.txt": tok("gh"+"p_") + "\n"},
		{"main.go": "package main\n", "a.js": "const k = '" + tok("sk"+"_live_") + "';\n", "b.py": "API_SECRET = \"" + tok("") + "\"\n", "c.txt": tok("gh"+"p_") + "\n"},
		{"main.go": "package main\n", "a.js": "const k = '" + tok("sk"+"_live_") + "';\n", "b.py": "API_SECRET = \"" + tok("") + "\"\n", "c.txt": tok("gh"+"p_") + "\n" + tok("gh"+"o_") + "\n"},
	}
	prev := 101
	for i, files := range steps {
		dir := t.TempDir()
		for p, c := range files {
			writeFile(t, filepath.Join(dir, p), c)
		}
		res, err := Scan(context.Background(), Input{Dir: dir, Spec: goodSpec()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Score >= prev {
			t.Errorf("step %d scores %d, not below the step before's %d (findings %v)", i, res.Score, prev, summary(res.Findings))
		}
		prev = res.Score
	}
	if prev != 12 {
		t.Errorf("the last step scores %d, want 12 (a critical, a medium and two highs)", prev)
	}
}

// processRuntime is what the process runtime tells detection it builds.
var processRuntime = detect.Runtime{Kind: "process", Builds: []string{"go", "node", "python", "static", "command"}}

// TestSamples scans each sample with the spec detection proposes for it:
// no secret and no vulnerable dependency (against the fixture database);
// what they find is the spec's own risks, as listed here.
func TestSamples(t *testing.T) {
	db := fixtureDB(t)
	want := map[string][]string{
		"go-hello":     {"spec:no-resource-limits:web", "spec:no-health-check:web"},
		"go-notes":     {"spec:no-resource-limits:web", "spec:no-health-check:web"},
		"go-whoami":    {"spec:no-resource-limits:web", "spec:shell-command:web", "spec:no-health-check:web"},
		"node-hello":   {"spec:no-resource-limits:web", "spec:no-health-check:web"},
		"python-hello": {"spec:no-resource-limits:web", "spec:no-health-check:web"},
		"static-hello": nil,
		"hostile":      {"spec:no-resource-limits:web", "spec:no-health-check:web"},
	}
	for name, ids := range want {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "samples", name)
			r := detect.Detect(os.DirFS(dir), nil, processRuntime)
			if r.Winner == nil {
				t.Fatal("detection proposes nothing")
			}
			res, err := Scan(context.Background(), Input{Dir: dir, Spec: r.Winner.Proposal, DB: db})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range res.Findings {
				got = append(got, f.ID)
			}
			if d := cmp.Diff(ids, got); d != "" {
				t.Errorf("findings (-want +got):\n%s", d)
			}
			t.Logf("%s: score %d, %v", name, res.Score, res.Basis)
		})
	}
}

// TestIgnoreUnfixable: with ignore_unfixable_findings, a finding without a
// fix stays listed and costs nothing.
func TestIgnoreUnfixable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "package-lock.json"), `{"lockfileVersion": 3, "packages": {"node_modules/event-stream": {"version": "3.3.6"}}}`)
	for ignore, want := range map[bool]int{false: 60, true: 100} {
		res, err := Scan(context.Background(), Input{Dir: dir, Spec: goodSpec(), DB: fixtureDB(t), IgnoreUnfixable: ignore})
		if err != nil {
			t.Fatal(err)
		}
		if res.Score != want || len(res.Findings) != 1 || res.Findings[0].Fixable {
			t.Errorf("ignore %t: score %d, findings %v; want %d and the one unfixable finding", ignore, res.Score, summary(res.Findings), want)
		}
	}
}

// TestResultJSON: a result encodes in API.md's shape (the fields the API
// adds, state, scanned_at and spec_id, aside): a spec finding's path is
// null, a file's a string.
func TestResultJSON(t *testing.T) {
	doc := goodSpec()
	web := doc.Workloads["web"]
	web.Run.Health = nil
	doc.Workloads["web"] = web
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.js"), "const k = '"+"sk"+"_test_"+"Zq8Xw2Lm4Np6Rt0Vb3Hj"+"';\n")
	res, err := Scan(context.Background(), Input{Dir: dir, Spec: doc})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"score":96,"basis":[{"scanner":"secrets","what":"15 rules over 1 file (0 skipped)"},` +
		`{"scanner":"dependencies","what":"not checked: no OSV database configured (0 packages in 0 manifests)"},` +
		`{"scanner":"spec","what":"the spec document's 1 workload"}],"findings":[` +
		`{"id":"spec:no-health-check:web","severity":"low","title":"Workload web serves on a port without a health check: set run.health.path to a path that answers 200 when it works","path":null,"fixable":true},` +
		`{"id":"secret:stripe-test-key:a.js:1","severity":"low","title":"Committed Stripe test secret key in a.js line 1: remove it from the source, rotate it and give it to the app as a secret","path":"a.js","fixable":true}],` +
		`"counts":{"critical":0,"high":0,"medium":0,"low":2}}`
	if d := cmp.Diff(want, string(b)); d != "" {
		t.Errorf("JSON (-want +got):\n%s", d)
	}
}
