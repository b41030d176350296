package security

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/spec"
)

// screener answers findings or fails, and remembers what it was given.
type screener struct {
	findings []scan.Finding
	err      error
	calls    int
	withheld map[string]bool
}

func (s *screener) Screen(_ context.Context, _ string, _ spec.Document, withheld map[string]bool) ([]scan.Finding, string, error) {
	s.calls++
	s.withheld = withheld
	return s.findings, "model m at h", s.err
}

type screenerList []Screening

func (l screenerList) Screeners() []Screening { return l }

// TestScreen: how the AI screeners' answers join the built-in result.
// One that answers adds its findings (scored with the rest) and its
// basis line; one that fails is named in the basis, its findings nowhere,
// the others' kept; both get the files the secret check flagged as
// withheld; under disable_ai_screening none is called and the basis says
// so; without screeners the result is the built-in one unchanged.
func TestScreen(t *testing.T) {
	p := func(s string) *string { return &s }
	builtin := scan.Result{Score: 80, Basis: []scan.Basis{{Scanner: scan.ScannerSecrets, What: "x"}},
		Findings: []scan.Finding{{ID: "secret:github-token:a.js:1", Severity: scan.High, Path: p("a.js"), Fixable: true}, {ID: "spec:x", Severity: scan.Low, Path: p("b.js")}},
		Counts:   scan.Counts{High: 1, Low: 1}}
	builtin.Score = scan.Score(builtin.Findings, false)
	good := &screener{findings: []scan.Finding{{ID: "ai:good:1", Severity: scan.Critical, Title: "AI screening: t"}}}
	bad := &screener{findings: []scan.Finding{{ID: "ai:bad:1", Severity: scan.Critical}}, err: errors.New("the AI screening model m at h answered HTTP 500")}
	s := New(Deps{Screeners: screenerList{{ID: "good", Screener: good}, {ID: "bad", Screener: bad}}})

	got := s.screen(context.Background(), t.TempDir(), spec.Document{}, builtin, false, false)
	if good.calls != 1 || bad.calls != 1 || !good.withheld["a.js"] || good.withheld["b.js"] || len(good.withheld) != 1 {
		t.Fatalf("calls %d %d, withheld %v", good.calls, bad.calls, good.withheld)
	}
	if len(got.Findings) != 3 || got.Findings[0].ID != "ai:good:1" || got.Score != scan.Score(got.Findings, false) || got.Counts.Critical != 1 {
		t.Fatalf("merged %+v", got)
	}
	want := []scan.Basis{{Scanner: scan.ScannerSecrets, What: "x"}, {Scanner: "ai:good", What: "model m at h"},
		{Scanner: "ai:bad", What: "failed, not in the score: the AI screening model m at h answered HTTP 500"}}
	if len(got.Basis) != len(want) {
		t.Fatalf("basis %+v", got.Basis)
	}
	for i := range want {
		if got.Basis[i] != want[i] {
			t.Fatalf("basis %+v, want %+v", got.Basis, want)
		}
	}

	off := s.screen(context.Background(), t.TempDir(), spec.Document{}, builtin, false, true)
	if good.calls != 1 || bad.calls != 1 || len(off.Findings) != 2 || off.Score != builtin.Score ||
		off.Basis[len(off.Basis)-1].Scanner != ScannerAI || !strings.Contains(off.Basis[len(off.Basis)-1].What, "disable_ai_screening") {
		t.Fatalf("with AI screening off: calls %d %d, %+v", good.calls, bad.calls, off)
	}
	if none := New(Deps{}).screen(context.Background(), t.TempDir(), spec.Document{}, builtin, false, false); len(none.Basis) != 1 || len(none.Findings) != 2 {
		t.Fatalf("without screeners: %+v", none)
	}
}
