// Package scan is svc's built-in security scanner: it reads an app's source
// tree (a directory on disk) and its spec document and returns findings and a
// score. It owns three checks — committed secrets (secrets.go), dependency
// versions matched against an OSV database export (deps.go, osv.go) and the
// spec document's own risks (specrisk.go) — and the score (Score).
//
// It is a library and nothing more: it must not touch the store, HTTP or the
// scheduler, and it emits no events. Whoever calls Scan (the API's security
// service, a scanner adapter) records the Result, emits security.scanned or
// security.scan_failed and applies policy; internal/archtest holds it to
// importing nothing of the module but internal/spec.
//
// Reading the tree is hostile-input safe: symbolic links are never followed
// (neither to files nor to directories), only regular files are read, each
// up to MaxFileBytes, at most MaxFiles files and MaxDepth directory levels,
// binary files are skipped, and vendored trees (node_modules, vendor, .git
// and the like) are not descended into. No finding carries a secret: a
// secret finding names its rule, file and line, and at most a redacted
// prefix of four characters.
package scan

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// Severities, from worst to least.
const (
	Critical = "critical"
	High     = "high"
	Medium   = "medium"
	Low      = "low"
)

// Scanner names, as the result's basis gives them.
const (
	ScannerSecrets      = "secrets"
	ScannerDependencies = "dependencies"
	ScannerSpec         = "spec"
)

// Input is what a scan reads.
type Input struct {
	// Dir is the root of the app's source tree. Nothing outside it is read.
	Dir string
	// Spec is the spec document the app runs under.
	Spec spec.Document
	// DB is the OSV advisory database dependencies are matched against; nil
	// skips the dependency check (the basis says so).
	DB *DB
	// IgnoreUnfixable drops findings without a fix from the score (policy
	// ignore_unfixable_findings); they stay in the findings.
	IgnoreUnfixable bool
}

// Result is a scan's outcome, in the shape of API.md's security result
// (state, scanned_at and spec_id are the caller's).
type Result struct {
	Score    int       `json:"score"`
	Basis    []Basis   `json:"basis"`
	Findings []Finding `json:"findings"`
	Counts   Counts    `json:"counts"`
}

// Basis says what a score was taken from: which scanner looked at what.
type Basis struct {
	Scanner string `json:"scanner"`
	What    string `json:"what"`
}

// Finding is one problem found. ID is stable across scans of the same tree
// (the same finding has the same ID), so a client can tell new findings from
// old ones.
type Finding struct {
	ID       string  `json:"id"`
	Severity string  `json:"severity"`
	Title    string  `json:"title"`
	Path     *string `json:"path"`
	Fixable  bool    `json:"fixable"`
}

// Counts are findings by severity.
type Counts struct {
	Critical int `json:"critical"`
	High     int `json:"high"`
	Medium   int `json:"medium"`
	Low      int `json:"low"`
}

// Scan runs the three checks over in and scores what they find. It fails
// only when the tree cannot be read at all (Dir missing or not a directory)
// or ctx ends; unreadable single files are skipped.
func Scan(ctx context.Context, in Input) (Result, error) {
	tree, err := walk(ctx, in.Dir)
	if err != nil {
		return Result{}, err
	}
	defer tree.root.Close()
	var findings []Finding
	if tree.truncated {
		findings = append(findings, Finding{ID: "scan:incomplete", Severity: Medium, Fixable: true,
			Title: fmt.Sprintf("Part of the source tree was not scanned (over %d files or %d directory levels): remove what the app does not need", MaxFiles, MaxDepth)})
	}
	secretFindings, err := scanSecrets(ctx, tree)
	if err != nil {
		return Result{}, err
	}
	findings = append(findings, secretFindings...)
	basis := []Basis{{ScannerSecrets, fmt.Sprintf("%d rules over %s (%d skipped)", len(secretRules), plural(len(tree.files), "file"), tree.skipped)}}

	pkgs, manifests := inventory(tree)
	if in.DB == nil {
		basis = append(basis, Basis{ScannerDependencies, fmt.Sprintf("not checked: no OSV database configured (%s in %s)", plural(len(pkgs), "package"), plural(len(manifests), "manifest"))})
	} else {
		findings = append(findings, in.DB.match(pkgs)...)
		basis = append(basis, Basis{ScannerDependencies, fmt.Sprintf("%s in %s against %s", plural(len(pkgs), "package"), plural(len(manifests), "manifest"), in.DB.Describe())})
	}

	findings = append(findings, SpecRisks(in.Spec)...)
	basis = append(basis, Basis{ScannerSpec, "the spec document's " + plural(len(in.Spec.Workloads), "workload")})

	sortFindings(findings)
	if findings == nil {
		findings = []Finding{}
	}
	return Result{
		Score:    Score(findings, in.IgnoreUnfixable),
		Basis:    basis,
		Findings: findings,
		Counts:   count(findings),
	}, nil
}

// Penalties per finding, by severity: the score's formula.
var penalty = map[string]int{Critical: 40, High: 20, Medium: 8, Low: 2}

// Score is 100 minus each finding's penalty (critical 40, high 20, medium
// 8, low 2; an unknown severity counts as low), never below 0. With
// ignoreUnfixable, findings without a fix count for nothing. So no
// findings is 100, one more finding never raises the score, and a severer
// finding never lowers it less than a milder one; one critical finding
// alone leaves 60, one high 80, and three highs or two criticals fall to
// 40 and 20.
func Score(findings []Finding, ignoreUnfixable bool) int {
	score := 100
	for _, f := range findings {
		if ignoreUnfixable && !f.Fixable {
			continue
		}
		p, ok := penalty[f.Severity]
		if !ok {
			p = penalty[Low]
		}
		score -= p
		if score <= 0 {
			return 0
		}
	}
	return score
}

func count(findings []Finding) Counts {
	var c Counts
	for _, f := range findings {
		switch f.Severity {
		case Critical:
			c.Critical++
		case High:
			c.High++
		case Medium:
			c.Medium++
		default:
			c.Low++
		}
	}
	return c
}

var severityRank = map[string]int{Critical: 0, High: 1, Medium: 2, Low: 3}

// sortFindings orders findings worst first, then by path and ID.
func sortFindings(fs []Finding) {
	slices.SortFunc(fs, func(a, b Finding) int {
		if d := rank(a.Severity) - rank(b.Severity); d != 0 {
			return d
		}
		if d := strings.Compare(deref(a.Path), deref(b.Path)); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func rank(sev string) int {
	if r, ok := severityRank[sev]; ok {
		return r
	}
	return severityRank[Low]
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptr(s string) *string { return &s }

// plural is "1 workload", "2 workloads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
