package upgrade

import (
	"strconv"
	"strings"
)

// CompareVersions orders two versions: -1, 0 or 1. Versions are compared
// as dotted numbers (a leading v ignored, each part numerically when both
// are numbers, else as text); a pre-release (1.2.0-rc1) comes before its
// release (1.2.0). Two versions compare equal only when they are the same
// text.
func CompareVersions(a, b string) int {
	if a == b {
		return 0
	}
	ca, pa, _ := strings.Cut(strings.TrimPrefix(a, "v"), "-")
	cb, pb, _ := strings.Cut(strings.TrimPrefix(b, "v"), "-")
	if c := compareDotted(ca, cb); c != 0 {
		return c
	}
	switch {
	case pa == "" && pb != "":
		return 1
	case pa != "" && pb == "":
		return -1
	}
	if c := compareDotted(pa, pb); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func compareDotted(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y string
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		nx, ex := strconv.ParseUint(x, 10, 64)
		ny, ey := strconv.ParseUint(y, 10, 64)
		switch {
		case ex == nil && ey == nil:
			if nx != ny {
				if nx < ny {
					return -1
				}
				return 1
			}
		case x != y:
			if c, ok := compareTails(x, y); ok {
				return c
			}
			if x == "" {
				return -1
			}
			if y == "" {
				return 1
			}
			return strings.Compare(x, y)
		}
	}
	return 0
}

// ParseVersionOutput takes the version a binary printed for "version":
// its first line, trimmed; "" when that is empty, too long or not
// printable text.
func ParseVersionOutput(out []byte) string {
	line, _, _ := strings.Cut(string(out), "\n")
	line = strings.TrimSpace(line)
	if line == "" || len(line) > 128 {
		return ""
	}
	for _, r := range line {
		if r < 0x21 || r > 0x7e {
			return ""
		}
	}
	return line
}

// compareTails orders parts that share a text prefix and end in numbers
// (rc2 before rc10); ok is false for others.
func compareTails(x, y string) (int, bool) {
	i := 0
	for i < len(x) && i < len(y) && x[i] == y[i] && (x[i] < '0' || x[i] > '9') {
		i++
	}
	nx, ex := strconv.ParseUint(x[i:], 10, 64)
	ny, ey := strconv.ParseUint(y[i:], 10, 64)
	if i == 0 || ex != nil || ey != nil || nx == ny {
		return 0, false
	}
	if nx < ny {
		return -1, true
	}
	return 1, true
}
