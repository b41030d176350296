// Package icon owns app tile images: checking an uploaded image by its
// content (format by magic bytes, size and pixel limits read from the header
// before any decode, then a bounded full decode), storing it in the
// replicated store with the app's icon_updated_at in the same write (set by
// the apps package's op builder, apps.SetIconOps: this package never writes
// the app row itself), and generating a tile from the app's name when none
// is set.
//
// It must not touch HTTP: the server hands it the body's bytes and serves
// what it returns. It never puts image data in an audit entry or a log.
package icon

import (
	"slices"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Icon is an app's tile image as the store keeps it, one per app.
type Icon struct {
	ID          string    `json:"id"` // the app's ID
	ContentType string    `json:"content_type"`
	Data        []byte    `json:"data"`
	SHA256      string    `json:"sha256"` // hex, of Data
	UpdatedAt   time.Time `json:"updated_at"`
}

// Icons is the table of uploaded tile images.
var Icons = &raftstore.Table[Icon]{
	Name: "icons",
	ID:   func(i *Icon) string { return i.ID },
	Validate: func(r *raftstore.Reader, _, i *Icon) error {
		if i == nil {
			return nil
		}
		if len(i.Data) == 0 || len(i.Data) > MaxBytes || !slices.Contains(Accepted(), i.ContentType) || len(i.SHA256) != 64 {
			return errcode.New(errcode.ValidInvalid, "an icon needs 1 to %d bytes of an accepted image type and its hash", MaxBytes)
		}
		if !apps.Exists(r, i.ID) {
			return errcode.New(errcode.NotFound, "no app %s", i.ID)
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Icons} }
