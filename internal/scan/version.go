package scan

import (
	"cmp"
	"math"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"
)

// compareVersions compares two versions of a package of ecosystem eco:
// -1, 0 or 1, and false when either cannot be read (the caller then
// decides nothing from the comparison). Go and npm versions are semantic
// versions (golang.org/x/mod/semver, with the "v" Go writes and npm and
// OSV's Go records do not); PyPI versions are PEP 440 (comparePEP440).
func compareVersions(eco, a, b string) (int, bool) {
	switch eco {
	case EcosystemGo, EcosystemNPM:
		va, vb := semverOf(a), semverOf(b)
		if !semver.IsValid(va) || !semver.IsValid(vb) {
			return 0, false
		}
		return semver.Compare(va, vb), true
	case EcosystemPyPI:
		return comparePEP440(a, b)
	}
	return 0, false
}

func semverOf(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "=")
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v
}

// pep440 is a parsed PEP 440 version. Absent parts hold the sentinels the
// ordering needs (PEP 440, "Summary of permitted suffixes and relative
// ordering", as the packaging library implements it).
type pep440 struct {
	epoch   int
	release []int
	pre     [2]int // letter rank (a 0, b 1, rc 2) and number
	post    int
	dev     int
	local   []string
}

const (
	negInf = math.MinInt
	posInf = math.MaxInt
)

var pep440RE = regexp.MustCompile(`^v?(?:(\d+)!)?(\d+(?:\.\d+)*)` +
	`(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d+)?)?` +
	`(?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d+)?)?` +
	`(?:[-_.]?(dev)[-_.]?(\d+)?)?` +
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)

// parsePEP440 reads a version the way pip does (case-insensitive, the
// alternative spellings PEP 440 normalizes).
func parsePEP440(s string) (pep440, bool) {
	m := pep440RE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return pep440{}, false
	}
	var v pep440
	var ok bool
	if m[1] != "" {
		if v.epoch, ok = atoi(m[1]); !ok {
			return pep440{}, false
		}
	}
	for _, part := range strings.Split(m[2], ".") {
		n, ok := atoi(part)
		if !ok {
			return pep440{}, false
		}
		v.release = append(v.release, n)
	}
	for len(v.release) > 1 && v.release[len(v.release)-1] == 0 {
		v.release = v.release[:len(v.release)-1]
	}
	hasPre, hasPost, hasDev := m[3] != "", m[5] != "" || m[6] != "", m[8] != ""
	if hasPre {
		n, ok := atoiOr0(m[4])
		if !ok {
			return pep440{}, false
		}
		v.pre = [2]int{map[string]int{"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}[m[3]], n}
	}
	switch {
	case m[5] != "":
		if v.post, ok = atoi(m[5]); !ok {
			return pep440{}, false
		}
	case m[6] != "":
		if v.post, ok = atoiOr0(m[7]); !ok {
			return pep440{}, false
		}
	default:
		v.post = negInf
	}
	if hasDev {
		if v.dev, ok = atoiOr0(m[9]); !ok {
			return pep440{}, false
		}
	} else {
		v.dev = posInf
	}
	switch {
	case hasPre:
	case !hasPost && hasDev:
		v.pre = [2]int{negInf, 0} // 1.0.dev1 sorts before 1.0a1
	default:
		v.pre = [2]int{posInf, 0}
	}
	if m[10] != "" {
		v.local = strings.FieldsFunc(m[10], func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	}
	return v, true
}

func atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

func atoiOr0(s string) (int, bool) {
	if s == "" {
		return 0, true
	}
	return atoi(s)
}

// comparePEP440 compares two PEP 440 versions.
func comparePEP440(a, b string) (int, bool) {
	va, ok1 := parsePEP440(a)
	vb, ok2 := parsePEP440(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	return va.compare(vb), true
}

func (v pep440) compare(w pep440) int {
	if c := cmp.Compare(v.epoch, w.epoch); c != 0 {
		return c
	}
	for i := 0; i < max(len(v.release), len(w.release)); i++ {
		if c := cmp.Compare(at(v.release, i), at(w.release, i)); c != 0 {
			return c
		}
	}
	for _, c := range []int{cmp.Compare(v.pre[0], w.pre[0]), cmp.Compare(v.pre[1], w.pre[1]), cmp.Compare(v.post, w.post), cmp.Compare(v.dev, w.dev)} {
		if c != 0 {
			return c
		}
	}
	// Local versions: none sorts first; segments compare numerically when
	// both are numbers, a number above a string, strings lexically.
	for i := 0; i < max(len(v.local), len(w.local)); i++ {
		if i >= len(v.local) {
			return -1
		}
		if i >= len(w.local) {
			return 1
		}
		na, ea := strconv.Atoi(v.local[i])
		nb, eb := strconv.Atoi(w.local[i])
		var c int
		switch {
		case ea == nil && eb == nil:
			c = cmp.Compare(na, nb)
		case ea == nil:
			c = 1
		case eb == nil:
			c = -1
		default:
			c = strings.Compare(v.local[i], w.local[i])
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return 0
}
