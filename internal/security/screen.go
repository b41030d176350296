package security

import (
	"context"
	"strings"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/spec"
)

// Screener is an AI screening scanner adapter (scanners/ai): it sends a
// summary of the checkout at dir and the spec to a model, leaving out the
// contents of the files in withheld, and answers the findings and what it
// used (for the basis).
type Screener interface {
	Screen(ctx context.Context, dir string, doc spec.Document, withheld map[string]bool) ([]scan.Finding, string, error)
}

// Screening is a screener by its adapter's ID.
type Screening struct {
	ID       string
	Screener Screener
}

// Screeners lists the AI screening adapters this server loaded.
type Screeners interface {
	Screeners() []Screening
}

// AdapterScreeners are the scanner adapters of the set the adapters
// service loaded that screen (those that did not open are not: the
// adapters' health says why).
type AdapterScreeners struct{ Adapters *adapters.Service }

var _ Screeners = AdapterScreeners{}

// Screeners lists them, the primary first, then by ID.
func (a AdapterScreeners) Screeners() []Screening {
	set := a.Adapters.Current()
	if set == nil {
		return nil
	}
	var out []Screening
	for _, l := range set.Of(adapters.CategoryScanner) {
		if s, ok := l.Instance.(Screener); ok {
			out = append(out, Screening{ID: l.Adapter.ID, Screener: s})
		}
	}
	return out
}

// ScannerAI is the basis's scanner for AI screening as a whole; each
// adapter's is ScannerAI + ":" + its ID.
const ScannerAI = "ai"

// ScreenTimeout bounds one screener's answer whatever its own timeout.
const ScreenTimeout = 10 * time.Minute

// screen adds the AI screeners' findings to the built-in scan's result:
// none called with host policy disable_ai_screening (the basis says so),
// each other's findings merged and named in the basis with what it used;
// one that fails is named in the basis with why, and the score is taken
// from the scanners that answered. The files the secret check flagged are
// withheld from every screener.
func (s *Service) screen(ctx context.Context, dir string, doc spec.Document, res scan.Result, ignoreUnfixable, disabled bool) scan.Result {
	if s.d.Screeners == nil {
		return res
	}
	list := s.d.Screeners.Screeners()
	if len(list) == 0 {
		return res
	}
	if disabled {
		return scan.Merge(res, nil, []scan.Basis{{Scanner: ScannerAI, What: "off: host policy disable_ai_screening is on; no AI screening adapter was asked"}}, ignoreUnfixable)
	}
	withheld := Withheld(res)
	var found []scan.Finding
	var basis []scan.Basis
	for _, sc := range list {
		name := ScannerAI + ":" + sc.ID
		sctx, cancel := context.WithTimeout(ctx, ScreenTimeout)
		fs, what, err := sc.Screener.Screen(sctx, dir, doc, withheld)
		cancel()
		if err != nil {
			r := reason(err)
			basis = append(basis, scan.Basis{Scanner: name, What: "failed, not in the score: " + r})
			s.d.Log.Warn("security: AI screening failed; the scan keeps the other scanners' findings", "adapter_id", sc.ID, "reason", r)
			continue
		}
		found = append(found, fs...)
		basis = append(basis, scan.Basis{Scanner: name, What: what})
	}
	return scan.Merge(res, found, basis, ignoreUnfixable)
}

// Withheld are the files the secret check flagged in res: their contents
// never leave the server.
func Withheld(res scan.Result) map[string]bool {
	out := map[string]bool{}
	for _, f := range res.Findings {
		if f.Path != nil && strings.HasPrefix(f.ID, "secret:") {
			out[*f.Path] = true
		}
	}
	return out
}
