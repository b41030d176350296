// Package apps owns the app record: its name, slug, state, desired state and
// source, its table in the replicated store, and creating, reading, listing
// and deleting apps (with the creator's grants, built by the identity
// package's op builders, audit entries and events in the same write).
//
// Only this package writes the apps table. Other packages change an app's
// row through its op builders (ops.go), inside their own one write:
// TransitionOps is the app's state machine (what a deploy beginning or
// ending, or what the reconciler observes, moves the app to, with the
// app.state_changed event), decided here only; DesiredOps, PinOps and
// SetIconOps set the desired state, the pinned spec revision and the
// icon's time.
//
// It must not touch sources, detection, specs, deploys or the edge: those
// build on the record and belong to their own packages. It must not import
// adapters, nor write identity's grants itself.
package apps

import (
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// App states named by the specification.
const (
	StateDraft     = "draft"
	StateDeploying = "deploying"
	StateRunning   = "running"
	StateDegraded  = "degraded"
	StateFailed    = "failed"
	StateStopped   = "stopped"
)

// Desired states.
const (
	DesiredRunning = "running"
	DesiredStopped = "stopped"
)

// Source is where an app's code comes from.
type Source struct {
	Kind       string `json:"kind"` // repository or archive
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Subdir     string `json:"subdir,omitempty"`
	// CheckoutID names the checkout of this source (chk_<ULID>) that
	// every server keeps under its work dir; the server that made it
	// serves it to the others. Records made before checkouts were
	// named have none.
	CheckoutID string `json:"checkout_id,omitempty"`
}

// Pin names the pinned spec revision.
type Pin struct {
	SpecID   string `json:"spec_id"`
	Revision int    `json:"revision"`
}

// App is an app as the store keeps it and the API shows it.
type App struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Slug         string `json:"slug"`
	State        string `json:"state"`
	DesiredState string `json:"desired_state"`
	// StoppedBecause says why svc itself stopped an app that is meant to
	// stay stopped: StoppedIdle, StoppedInsecure or StoppedDiskLimit; nil
	// when it is meant to run or a person stopped it.
	StoppedBecause *string    `json:"stopped_because"`
	Source         *Source    `json:"source"`
	Pinned         *Pin       `json:"pinned"`
	URL            *string    `json:"url"`
	IconUpdatedAt  *time.Time `json:"icon_updated_at"`
	CreatedBy      string     `json:"created_by"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// Why the system stopped an app (App.StoppedBecause).
const (
	StoppedIdle      = "idle"
	StoppedInsecure  = "insecure"
	StoppedDiskLimit = "disk_limit"
)

// Ref is how events name the app.
func (a App) Ref() (id, name, slug string) { return a.ID, a.Name, a.Slug }

// Apps is the table of apps.
var Apps = &raftstore.Table[App]{
	Name: "apps",
	ID:   func(a *App) string { return a.ID },
	Indexes: []raftstore.Index[App]{
		{Name: "slug", Unique: true, Key: func(a *App) (string, bool) { return a.Slug, true }},
	},
	Validate: func(_ *raftstore.Reader, _, a *App) error {
		if a == nil {
			return nil
		}
		if a.Name == "" || !slugRE.MatchString(a.Slug) {
			return errcode.New(errcode.ValidInvalid, "an app needs a name and a valid slug")
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Apps} }

// Limits of names and slugs.
const (
	MaxNameRunes = 100
	MaxSlugLen   = 40
)

var slugRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// checkName validates a display name.
func checkName(name string) error {
	switch {
	case !utf8.ValidString(name) || strings.TrimSpace(name) == "":
		return errcode.Invalid("name", "name must be non-empty text")
	case utf8.RuneCountInString(name) > MaxNameRunes:
		return errcode.Invalid("name", "name must be at most %d characters", MaxNameRunes)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errcode.Invalid("name", "name must not contain control characters")
	}
	return nil
}

// checkSlug validates a slug given by the caller.
func checkSlug(slug string) error {
	if !slugRE.MatchString(slug) {
		return errcode.Invalid("slug", "slug must be 1 to %d lower-case letters, digits and inner hyphens", MaxSlugLen)
	}
	return nil
}

// Slugify derives a slug from a name: lower-case ASCII letters and digits,
// other runs turned into one hyphen, at most MaxSlugLen long; "app" when
// nothing is left.
func Slugify(name string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(r)
		default:
			hyphen = true
		}
		if b.Len() >= MaxSlugLen {
			break
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > MaxSlugLen {
		s = strings.TrimRight(s[:MaxSlugLen], "-")
	}
	if s == "" {
		return "app"
	}
	return s
}
