package scan

import (
	"bytes"
	"slices"
)

// Redacted is what Redact puts in place of a secret.
const Redacted = "[REDACTED]"

// Redact returns b with every span any secret rule's expression matches
// replaced by Redacted, for text about to leave the server (an AI
// screening adapter's request). It is stricter than the secret check: the
// entropy floors, the placeholder list and the code-reference exception
// do not apply, and a private key's opening line withholds the rest of
// the text even without its closing line (a truncated key).
func Redact(b []byte) []byte {
	lower := bytes.ToLower(b)
	var spans [][2]int
	for _, r := range secretRules {
		if !containsAny(lower, r.keywords) {
			continue
		}
		for _, m := range r.re.FindAllSubmatchIndex(b, -1) {
			spans = append(spans, [2]int{m[2], m[3]})
		}
	}
	if i := privateKeyStart(lower); i >= 0 {
		spans = append(spans, [2]int{i, len(b)})
	}
	if len(spans) == 0 {
		return b
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var out bytes.Buffer
	at := 0
	for _, s := range spans {
		if s[1] <= at {
			continue
		}
		if s[0] > at {
			out.Write(b[at:s[0]])
		}
		if s[0] >= at {
			out.WriteString(Redacted)
		}
		at = s[1]
	}
	out.Write(b[at:])
	return out.Bytes()
}

// privateKeyStart is where a private key's opening line begins in lower
// (lower-cased text), or -1.
func privateKeyStart(lower []byte) int {
	for from := 0; ; {
		i := bytes.Index(lower[from:], []byte("-----begin"))
		if i < 0 {
			return -1
		}
		i += from
		end := bytes.IndexByte(lower[i:], '\n')
		if end < 0 {
			end = len(lower) - i
		}
		if bytes.Contains(lower[i:i+end], []byte("private key")) {
			return i
		}
		from = i + len("-----begin")
	}
}

// Merge adds the findings and basis of scanners beyond Scan's own (an AI
// screening adapter) to a result of Scan: the findings sorted as Scan
// sorts them, the counts and the score taken again over all of them.
func Merge(res Result, findings []Finding, basis []Basis, ignoreUnfixable bool) Result {
	all := append(slices.Clone(res.Findings), findings...)
	sortFindings(all)
	if all == nil {
		all = []Finding{}
	}
	return Result{
		Score:    Score(all, ignoreUnfixable),
		Basis:    append(slices.Clone(res.Basis), basis...),
		Findings: all,
		Counts:   count(all),
	}
}
