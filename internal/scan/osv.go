package scan

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxRecordBytes is the largest OSV record a database may hold.
const MaxRecordBytes = 8 << 20

// DB is an OSV advisory database loaded into memory: the records of an
// OSV export (https://osv-vulnerabilities.storage.googleapis.com/<ecosystem>/all.zip,
// a zip of OSV JSON records, or a directory of such files), indexed by
// ecosystem and package name. Records of ecosystems other than Go, npm and
// PyPI and withdrawn records are left out. Safe for concurrent use.
type DB struct {
	source   string
	records  int
	rejected int
	newest   time.Time
	index    map[string][]advisory
}

// advisory is what matching needs of one OSV record's entry for one
// package.
type advisory struct {
	id       string
	summary  string
	severity string
	versions []string
	ranges   []osvRange
}

// osvRecord is the part of an OSV record (https://ossf.github.io/osv-schema/)
// the scanner reads.
type osvRecord struct {
	ID        string    `json:"id"`
	Summary   string    `json:"summary"`
	Modified  time.Time `json:"modified"`
	Withdrawn string    `json:"withdrawn"`
	Severity  []struct {
		Type  string `json:"type"`
		Score string `json:"score"`
	} `json:"severity"`
	Affected []struct {
		Package struct {
			Ecosystem string `json:"ecosystem"`
			Name      string `json:"name"`
		} `json:"package"`
		Ranges           []osvRange      `json:"ranges"`
		Versions         []string        `json:"versions"`
		DatabaseSpecific json.RawMessage `json:"database_specific"`
	} `json:"affected"`
	DatabaseSpecific json.RawMessage `json:"database_specific"`
}

type osvRange struct {
	Type   string `json:"type"`
	Events []struct {
		Introduced   string `json:"introduced,omitempty"`
		Fixed        string `json:"fixed,omitempty"`
		LastAffected string `json:"last_affected,omitempty"`
	} `json:"events"`
}

// LoadDB reads an OSV export: a zip file or a directory (walked without
// following symbolic links) of .json records. A record that does not parse
// is counted and skipped; a database with no record at all is an error, so
// that a wrong path never reads as "no advisories".
func LoadDB(p string) (*DB, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("scan: the OSV database: %w", err)
	}
	db := &DB{source: filepath.Base(p), index: map[string][]advisory{}}
	if st.IsDir() {
		err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".json") {
				return nil
			}
			f, err := os.Open(fp)
			if err != nil {
				db.rejected++
				return nil
			}
			defer f.Close()
			db.addFrom(f)
			return nil
		})
	} else {
		err = db.loadZip(p)
	}
	if err != nil {
		return nil, err
	}
	if db.records == 0 {
		return nil, fmt.Errorf("scan: the OSV database %s holds no OSV record (%d files did not parse)", p, db.rejected)
	}
	return db, nil
}

func (db *DB) loadZip(p string) error {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return fmt.Errorf("scan: the OSV database %s is neither a directory nor a zip file: %w", p, err)
	}
	defer zr.Close()
	for _, zf := range zr.File {
		if !strings.HasSuffix(zf.Name, ".json") || zf.FileInfo().IsDir() {
			continue
		}
		r, err := zf.Open()
		if err != nil {
			db.rejected++
			continue
		}
		db.addFrom(r)
		r.Close()
	}
	return nil
}

func (db *DB) addFrom(r io.Reader) {
	b, err := io.ReadAll(io.LimitReader(r, MaxRecordBytes+1))
	if err != nil || len(b) > MaxRecordBytes {
		db.rejected++
		return
	}
	if err := db.add(b); err != nil {
		db.rejected++
	}
}

// add indexes one OSV record.
func (db *DB) add(b []byte) error {
	rec, err := parseOSV(b)
	if err != nil {
		return err
	}
	db.records++
	if rec.Modified.After(db.newest) {
		db.newest = rec.Modified
	}
	if rec.Withdrawn != "" {
		return nil
	}
	for _, a := range rec.Affected {
		eco := a.Package.Ecosystem
		if eco != EcosystemGo && eco != EcosystemNPM && eco != EcosystemPyPI {
			continue
		}
		sev := severityOf(a.DatabaseSpecific)
		if sev == "" {
			sev = severityOf(rec.DatabaseSpecific)
		}
		if sev == "" {
			for _, s := range rec.Severity {
				if strings.HasPrefix(s.Type, "CVSS_V3") {
					if score, ok := cvss3(s.Score); ok {
						sev = severityOfScore(score)
					}
				}
			}
		}
		if sev == "" {
			sev = Low // unrated: the specification counts unrated with low
		}
		key := indexKey(eco, a.Package.Name)
		db.index[key] = append(db.index[key], advisory{id: rec.ID, summary: rec.Summary, severity: sev, versions: a.Versions, ranges: a.Ranges})
	}
	return nil
}

// parseOSV reads one OSV record; it needs an id.
func parseOSV(b []byte) (osvRecord, error) {
	var rec osvRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return osvRecord{}, err
	}
	if rec.ID == "" {
		return osvRecord{}, errors.New("scan: an OSV record without an id")
	}
	return rec, nil
}

func indexKey(eco, name string) string {
	if eco == EcosystemPyPI {
		name = pypiName(name)
	}
	return eco + "\x00" + name
}

// severityOf maps database_specific.severity (GitHub's advisory database
// writes CRITICAL, HIGH, MODERATE, LOW) to a finding's severity.
func severityOf(raw json.RawMessage) string {
	var ds struct {
		Severity string `json:"severity"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &ds) != nil {
		return ""
	}
	switch strings.ToUpper(ds.Severity) {
	case "CRITICAL":
		return Critical
	case "HIGH":
		return High
	case "MODERATE", "MEDIUM":
		return Medium
	case "LOW":
		return Low
	}
	return ""
}

// severityOfScore maps a CVSS base score to a severity the way CVSS v3.1
// names its ratings (9.0 critical, 7.0 high, 4.0 medium, below low).
func severityOfScore(s float64) string {
	switch {
	case s >= 9:
		return Critical
	case s >= 7:
		return High
	case s >= 4:
		return Medium
	}
	return Low
}

// cvss3 computes a CVSS v3.0/v3.1 base score from its vector
// ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"), as the specification's
// section 7.1 gives the formula.
func cvss3(vector string) (float64, bool) {
	parts := strings.Split(vector, "/")
	if len(parts) < 9 || !strings.HasPrefix(parts[0], "CVSS:3.") {
		return 0, false
	}
	m := map[string]string{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, ":")
		if !ok {
			return 0, false
		}
		m[k] = v
	}
	weights := map[string]map[string]float64{
		"AV": {"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2},
		"AC": {"L": 0.77, "H": 0.44},
		"UI": {"N": 0.85, "R": 0.62},
		"C":  {"H": 0.56, "L": 0.22, "N": 0},
		"I":  {"H": 0.56, "L": 0.22, "N": 0},
		"A":  {"H": 0.56, "L": 0.22, "N": 0},
	}
	val := map[string]float64{}
	for k, w := range weights {
		v, ok := w[m[k]]
		if !ok {
			return 0, false
		}
		val[k] = v
	}
	changed := m["S"] == "C"
	if m["S"] != "C" && m["S"] != "U" {
		return 0, false
	}
	pr, ok := map[string]float64{"N": 0.85, "L": 0.62, "H": 0.27}[m["PR"]]
	if !ok {
		return 0, false
	}
	if changed && m["PR"] == "L" {
		pr = 0.68
	} else if changed && m["PR"] == "H" {
		pr = 0.5
	}
	iss := 1 - (1-val["C"])*(1-val["I"])*(1-val["A"])
	var impact float64
	if changed {
		impact = 7.52*(iss-0.029) - 3.25*math.Pow(iss-0.02, 15)
	} else {
		impact = 6.42 * iss
	}
	if impact <= 0 {
		return 0, true
	}
	exploit := 8.22 * val["AV"] * val["AC"] * pr * val["UI"]
	if changed {
		return roundUp(math.Min(1.08*(impact+exploit), 10)), true
	}
	return roundUp(math.Min(impact+exploit, 10)), true
}

// roundUp is CVSS v3.1's Roundup: the smallest number with one decimal
// not below x.
func roundUp(x float64) float64 {
	i := int(math.Round(x * 100000))
	if i%10000 == 0 {
		return float64(i) / 100000
	}
	return (math.Floor(float64(i)/10000) + 1) / 10
}

// Describe says what the database is, for a result's basis: its file or
// directory name, how many records it holds and the newest one's date.
func (db *DB) Describe() string {
	s := fmt.Sprintf("OSV database %s (%d advisories", db.source, db.records)
	if !db.newest.IsZero() {
		s += ", newest modified " + db.newest.UTC().Format("2006-01-02")
	}
	if db.rejected > 0 {
		s += fmt.Sprintf(", %d unreadable files skipped", db.rejected)
	}
	return s + ")"
}

// match returns a finding for each package an advisory affects.
func (db *DB) match(pkgs []Package) []Finding {
	var out []Finding
	seen := map[string]bool{}
	for _, p := range pkgs {
		for _, a := range db.index[indexKey(p.Ecosystem, p.Name)] {
			hit, fix := a.affects(p.Ecosystem, p.Version)
			if !hit {
				continue
			}
			id := fmt.Sprintf("osv:%s:%s:%s@%s", a.id, p.Path, p.Name, p.Version)
			if seen[id] {
				continue
			}
			seen[id] = true
			title := fmt.Sprintf("%s %s (%s) is affected by %s", p.Name, p.Version, p.Ecosystem, a.id)
			if a.summary != "" {
				title += ": " + a.summary
			}
			if fix != "" {
				title += "; fixed in " + fix
			} else {
				title += "; no fixed version yet"
			}
			out = append(out, Finding{ID: clip(id), Severity: a.severity, Title: clip(title), Path: ptr(p.Path), Fixable: fix != ""})
		}
	}
	return out
}

// affects reports whether version is affected, and the least fixed version
// above it when one is known. A version listed in versions is affected; so
// is one inside a SEMVER or ECOSYSTEM range, evaluated as the OSV schema
// says: events sorted by version, introduced opening, fixed closing before
// and last_affected closing after. Versions that cannot be compared decide
// nothing.
func (a advisory) affects(eco, version string) (bool, string) {
	affected := slices.Contains(a.versions, version)
	if eco == EcosystemGo {
		affected = affected || slices.Contains(a.versions, strings.TrimPrefix(version, "v"))
	}
	fix := ""
	for _, r := range a.ranges {
		if r.Type != "SEMVER" && r.Type != "ECOSYSTEM" {
			continue
		}
		in, f := inRange(eco, version, r)
		if in {
			affected = true
			if f != "" {
				if fix == "" {
					fix = f
				} else if c, ok := compareVersions(eco, f, fix); ok && c < 0 {
					fix = f
				}
			}
		}
	}
	if affected && fix == "" {
		// Listed by version only: a fixed event of any range above the
		// version still says a fix exists.
		for _, r := range a.ranges {
			for _, e := range r.Events {
				if c, ok := compareVersions(eco, e.Fixed, version); e.Fixed != "" && ok && c > 0 && (fix == "" || lessVersion(eco, e.Fixed, fix)) {
					fix = e.Fixed
				}
			}
		}
	}
	return affected, fix
}

// MaxTitle bounds a finding's title and ID (in bytes): names, versions
// and summaries come from files the app's owner and the database's
// publisher wrote.
const MaxTitle = 400

// clip cuts s to MaxTitle bytes at a rune boundary, marking the cut.
func clip(s string) string {
	if len(s) <= MaxTitle {
		return s
	}
	cut := MaxTitle - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func lessVersion(eco, a, b string) bool {
	c, ok := compareVersions(eco, a, b)
	return ok && c < 0
}

// inRange evaluates one range for version: whether it is affected, and the
// fixed event closing the interval it is in.
func inRange(eco, version string, r osvRange) (bool, string) {
	type event struct {
		kind, v string
	}
	var evs []event
	for _, e := range r.Events {
		switch {
		case e.Introduced != "":
			evs = append(evs, event{"introduced", e.Introduced})
		case e.Fixed != "":
			evs = append(evs, event{"fixed", e.Fixed})
		case e.LastAffected != "":
			evs = append(evs, event{"last_affected", e.LastAffected})
		}
	}
	cmpAt := func(v string) (int, bool) { // version compared with v
		if v == "0" {
			return 1, true
		}
		return compareVersions(eco, version, v)
	}
	for _, e := range evs {
		if e.v != "0" {
			if _, ok := compareVersions(eco, e.v, e.v); !ok {
				return false, ""
			}
		}
	}
	if _, ok := compareVersions(eco, version, version); !ok {
		return false, ""
	}
	slices.SortStableFunc(evs, func(a, b event) int {
		switch {
		case a.v == "0" && b.v == "0":
			return 0
		case a.v == "0":
			return -1
		case b.v == "0":
			return 1
		}
		c, _ := compareVersions(eco, a.v, b.v)
		return c
	})
	affected, fix := false, ""
	for i, e := range evs {
		c, _ := cmpAt(e.v)
		switch e.kind {
		case "introduced":
			if c >= 0 || e.v == "0" {
				affected, fix = true, ""
				for _, later := range evs[i+1:] {
					if later.kind == "fixed" {
						fix = later.v
						break
					}
					if later.kind != "introduced" {
						break
					}
				}
			}
		case "fixed":
			if c >= 0 {
				affected, fix = false, ""
			}
		case "last_affected":
			if c > 0 {
				affected, fix = false, ""
			}
		}
	}
	return affected, fix
}
