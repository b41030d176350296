package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxQuoted is how many bytes of a bad value an error message repeats.
const maxQuoted = 64

// quote renders a value for an error message, shortened when long.
func quote(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return strconv.Quote(v[:cut]) + "…"
}

// describe renders a decoded value of any type for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "an empty value"
	case string:
		return quote(v)
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case json.Number:
		return quote(string(v))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32:
		return fmt.Sprint(v)
	case []any, []string:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	default:
		return fmt.Sprintf("a value of type %T", v)
	}
}

// splitList splits a comma-separated list, trimming items and dropping empty
// ones. The result is never nil.
func splitList(raw string) []string {
	out := []string{}
	for item := range strings.SplitSeq(raw, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// toList accepts a sequence of strings, a comma-separated string or nil.
func toList(raw any) ([]string, error) {
	switch v := raw.(type) {
	case nil:
		return []string{}, nil
	case string:
		return splitList(v), nil
	case []string:
		return cloneList(v), nil
	case []any:
		out := make([]string, 0, len(v))
		for i, item := range v {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: %s is not a string", i+1, describe(item))
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%s is not a list (accepted: a list of strings or one comma-separated string)", describe(raw))
	}
}

const boolAccepted = "accepted: true, false, 1, 0, yes, no"

// parseBoolWord reads the environment spellings of a boolean.
func parseBoolWord(raw string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("%s is not a boolean (%s)", quote(raw), boolAccepted)
}

// toBool accepts a boolean, the whole numbers 0 and 1, or a spelling that
// parseBoolWord reads.
func toBool(raw any) (bool, error) {
	switch v := raw.(type) {
	case bool:
		return v, nil
	case string:
		return parseBoolWord(v)
	case nil:
		return false, fmt.Errorf("a value is required (%s)", boolAccepted)
	}
	if n, err := toInt64(raw); err == nil && (n == 0 || n == 1) {
		return n == 1, nil
	}
	return false, fmt.Errorf("%s is not a boolean (%s)", describe(raw), boolAccepted)
}

// parseDecimal reads a decimal whole number, allowing surrounding space.
func parseDecimal(raw string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is out of range", quote(raw))
	}
	if err != nil {
		return 0, fmt.Errorf("%s is not a whole number", quote(raw))
	}
	return n, nil
}

// toInt64 accepts any Go integer, a float or json.Number without a fraction,
// or a decimal string. It refuses what does not fit in an int64.
func toInt64(raw any) (int64, error) {
	switch v := raw.(type) {
	case int:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case int64:
		return v, nil
	case uint:
		return uintToInt64(uint64(v))
	case uint8:
		return int64(v), nil
	case uint16:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case uint64:
		return uintToInt64(v)
	case float32:
		return floatToInt64(float64(v))
	case float64:
		return floatToInt64(v)
	case json.Number:
		return numberToInt64(v)
	case string:
		return parseDecimal(v)
	case nil:
		return 0, errors.New("a value is required (a whole number)")
	default:
		return 0, fmt.Errorf("%s is not a whole number", describe(raw))
	}
}

func uintToInt64(v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%d is out of range", v)
	}
	return int64(v), nil
}

func floatToInt64(f float64) (int64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return 0, fmt.Errorf("%s is not a whole number", describe(f))
	}
	// 2^63 is exactly representable; every float below it and at or above
	// -2^63 converts without overflow.
	if f >= 0x1p63 || f < -0x1p63 {
		return 0, fmt.Errorf("%s is out of range", describe(f))
	}
	return int64(f), nil
}

func numberToInt64(n json.Number) (int64, error) {
	if v, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return v, nil
	}
	// Forms such as 1e3 or 2.0 are whole numbers too; decide exactly. The
	// length bound keeps big.Rat away from absurd exponents.
	if len(n) > 64 || strings.Contains(string(n), "/") {
		return 0, fmt.Errorf("%s is not a whole number", quote(string(n)))
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() {
		return 0, fmt.Errorf("%s is not a whole number", quote(string(n)))
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%s is out of range", quote(string(n)))
	}
	return r.Num().Int64(), nil
}

const sizeAccepted = "accepted: a whole number of bytes, or a size such as 512MiB, 1GB or 100k"

// sizeUnit returns the number of bytes of a lowercased unit. k, m, g, t and
// p are decimal (1k = 1000); ki, mi, gi, ti and pi are binary (1Ki = 1024).
func sizeUnit(unit string) (int64, bool) {
	switch unit {
	case "", "b":
		return 1, true
	case "k", "kb":
		return 1e3, true
	case "ki", "kib":
		return 1 << 10, true
	case "m", "mb":
		return 1e6, true
	case "mi", "mib":
		return 1 << 20, true
	case "g", "gb":
		return 1e9, true
	case "gi", "gib":
		return 1 << 30, true
	case "t", "tb":
		return 1e12, true
	case "ti", "tib":
		return 1 << 40, true
	case "p", "pb":
		return 1e15, true
	case "pi", "pib":
		return 1 << 50, true
	}
	return 0, false
}

// parseSize reads a byte count: a whole number, or a decimal number followed
// by a unit (case-insensitive, optionally after a space), for example 512MiB,
// 1.5GB or 100k. The result must be a whole number of bytes in an int64.
func parseSize(raw string) (int64, error) {
	s := strings.TrimSpace(raw)
	end := 0
	dot := false
	for end < len(s) {
		c := s[end]
		if c == '.' && !dot {
			dot = true
		} else if c < '0' || c > '9' {
			break
		}
		end++
	}
	num, unit := s[:end], strings.ToLower(strings.TrimSpace(s[end:]))
	mult, ok := sizeUnit(unit)
	if !ok || num == "" || num == "." || (len(num) > 40) {
		return 0, fmt.Errorf("%s is not a size (%s)", quote(raw), sizeAccepted)
	}
	if !dot {
		if n, err := strconv.ParseInt(num, 10, 64); err == nil && n <= math.MaxInt64/mult {
			return n * mult, nil
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%s is not a size (%s)", quote(raw), sizeAccepted)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%s is not a whole number of bytes", quote(raw))
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%s is out of range", quote(raw))
	}
	return r.Num().Int64(), nil
}

// checkSourcePattern accepts a non-empty source pattern without whitespace,
// such as github.com/acme/*.
func checkSourcePattern(v string) error {
	if v == "" {
		return errors.New("an empty pattern is not accepted")
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not valid UTF-8", quote(v))
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%s contains whitespace or a control character", quote(v))
		}
	}
	return nil
}

// checkEgress accepts a hostname, a *.domain wildcard, an IP address or a
// CIDR prefix.
func checkEgress(v string) error {
	if domain, ok := strings.CutPrefix(v, "*."); ok && isHostname(domain) {
		return nil
	}
	if addr, err := netip.ParseAddr(v); err == nil && addr.Zone() == "" {
		return nil
	}
	if strings.Contains(v, "/") {
		if _, err := netip.ParsePrefix(v); err == nil {
			return nil
		}
	}
	if isHostname(v) {
		return nil
	}
	return fmt.Errorf("%s is not a hostname, *.domain wildcard, IP address or CIDR", quote(v))
}

// isHostname reports whether v is a DNS hostname: dot-separated labels of
// letters, digits and inner hyphens, 1 to 63 bytes each, at most 253 bytes in
// all, and a last label that is not all digits (that would be an IP address).
func isHostname(v string) bool {
	if v == "" || len(v) > 253 {
		return false
	}
	labels := strings.Split(v, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.Trim(last, "0123456789") != ""
}
