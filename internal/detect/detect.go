package detect

import (
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// Question kinds.
const (
	KindString = "string"
	KindInt    = "int"
	KindBool   = "bool"
	KindSecret = "secret"
)

// Question keys other than per-variable ones. A variable's value is asked
// as "env.<NAME>", a secret's as "secret.<NAME>".
const (
	KeyPort       = "port"
	KeyRunCommand = "run.command"
)

// Runtime is what the runtime that would run the app can do, as far as
// detection weighs it: a bid whose proposal it cannot run ranks after
// every bid it can, whatever the scores. The zero value knows nothing of
// the runtime, and every bid counts as runnable.
type Runtime struct {
	// Kind names the runtime in evidence ("process", "nomad").
	Kind string
	// Builds lists the build kinds it runs (spec.Build.Kind); empty when
	// not known.
	Builds []string
}

// Result is what detection found: the winning bid, the others, and the
// facts the winner could not find.
type Result struct {
	Winner    *Bid       `json:"winner"`
	RunnersUp []Bid      `json:"runners_up"`
	Questions []Question `json:"questions"`
}

// Bid is one detector's proposal with its score (0 to 100) and the files
// that support it.
type Bid struct {
	Detector string        `json:"detector"`
	Score    int           `json:"score"`
	Evidence []Evidence    `json:"evidence"`
	Proposal spec.Document `json:"proposal"`
	// Rejected lists compose constructs the proposal cannot carry; see
	// ComposeRejection.
	Rejected []RejectedConstruct `json:"rejected,omitempty"`

	// questions are the facts this bid could not find and that the answers
	// did not give; the proposal holds their defaults meanwhile.
	questions []Question
	// unrunnable marks a proposal the runtime cannot run; its evidence
	// says why.
	unrunnable bool
}

// Evidence is one file and what it told a detector.
type Evidence struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Question is a fact detection could not find. Its answer is given back to
// Detect under Key. A secret's answer never enters the proposal, which
// refers to the secret by name; the caller stores the value as a secret.
type Question struct {
	Key     string `json:"key"`
	Prompt  string `json:"prompt"`
	Kind    string `json:"kind"`
	Default string `json:"default,omitempty"`
}

// Detector bids on a source tree: ok is false when it has nothing to say.
type Detector interface {
	Bid(tree *Tree) (Bid, bool)
}

// detectors are every detector, in the order they run.
var detectors = []Detector{
	composeDetector{},
	dockerfileDetector{},
	goDetector{},
	nodeDetector{},
	procfileDetector{},
	pythonDetector{},
	staticDetector{},
}

// Detect decides how the app in fsys runs on rt. Every detector bids; a
// bid whose proposal rt can run ranks before one it cannot (which says why
// in its evidence), then the highest score wins (ties go to the detector
// name that sorts first). answers give facts asked by earlier questions:
// an answered question is filled into the proposals and no longer asked.
// It reads only fsys, within the limits of Tree, and its result depends
// only on fsys, answers and rt.
func Detect(fsys fs.FS, answers map[string]string, rt Runtime) Result {
	r, _ := detect(fsys, answers, rt)
	return r
}

// detect is Detect that also returns the bids dropped because their
// proposal failed the sanity check (a detector's bug; tests expect none).
func detect(fsys fs.FS, answers map[string]string, rt Runtime) (Result, []string) {
	t := newTree(fsys, answers)
	var bids []Bid
	var dropped []string
	for _, d := range detectors {
		b, ok := d.Bid(t)
		if !ok {
			continue
		}
		if err := checkDocument(b.Proposal); err != nil {
			dropped = append(dropped, b.Detector+": "+err.Error())
			continue
		}
		rt.weigh(&b)
		bids = append(bids, b)
	}
	slices.SortStableFunc(bids, func(a, b Bid) int {
		if a.unrunnable != b.unrunnable {
			if b.unrunnable {
				return -1
			}
			return 1
		}
		if a.Score != b.Score {
			return b.Score - a.Score
		}
		return strings.Compare(a.Detector, b.Detector)
	})
	r := Result{RunnersUp: []Bid{}, Questions: []Question{}}
	if len(bids) == 0 {
		return r, dropped
	}
	r.Winner = &bids[0]
	r.RunnersUp = append(r.RunnersUp, bids[1:]...)
	r.Questions = append(r.Questions, bids[0].questions...)
	return r, dropped
}

// Questions returns the facts this bid still asks for.
func (b *Bid) Questions() []Question { return slices.Clone(b.questions) }

func (b *Bid) evidence(p, format string, args ...any) {
	reason := format
	if len(args) > 0 {
		reason = fmt.Sprintf(format, args...)
	}
	b.Evidence = append(b.Evidence, Evidence{Path: p, Reason: reason})
}

// ask records q unless it is asked already.
func (b *Bid) ask(q Question) {
	for _, have := range b.questions {
		if have.Key == q.Key {
			return
		}
	}
	b.questions = append(b.questions, q)
}

// askPort returns the answered port, or def while recording the question.
func (b *Bid) askPort(t *Tree, prompt string, def int) int {
	if v, ok := t.Answer(KeyPort); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 1 && n <= 65535 {
			return n
		}
	}
	b.ask(Question{Key: KeyPort, Prompt: prompt, Kind: KindInt, Default: strconv.Itoa(def)})
	return def
}

// askCommand returns the answered run command split into words, or def
// while recording the question.
func (b *Bid) askCommand(t *Tree, prompt string, def []string) []string {
	if v, ok := t.Answer(KeyRunCommand); ok {
		if words, err := splitWords(v); err == nil && len(words) > 0 && strings.TrimSpace(words[0]) != "" && !strings.ContainsRune(v, 0) {
			return words
		}
	}
	b.ask(Question{Key: KeyRunCommand, Prompt: prompt, Kind: KindString, Default: joinWords(def)})
	return def
}

// askSecret asks for a secret's value unless it was answered. The proposal
// refers to the secret by name either way.
func (b *Bid) askSecret(t *Tree, name, why string) {
	if v, ok := t.Answer("secret." + name); ok && v != "" {
		return
	}
	b.ask(Question{Key: "secret." + name, Prompt: "Value of the secret " + name + " (" + why + ")", Kind: KindSecret})
}

// askEnv returns the answered value of a variable, or def while recording
// the question.
func (b *Bid) askEnv(t *Tree, name, why, def string) string {
	if v, ok := t.Answer("env." + name); ok && !strings.ContainsRune(v, 0) {
		return v
	}
	b.ask(Question{Key: "env." + name, Prompt: "Value of " + name + " (" + why + ")", Kind: KindString, Default: def})
	return def
}
