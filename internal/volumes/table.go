package volumes

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Volume is a volume as a resource: its ID, the app it belongs (or
// belonged) to, its name in that app's spec and its size. A volume
// outlives its app: deleting the app keeps the row with AppGoneAt set
// (and its data), unless the deletion discarded it. Discard marks a
// volume whose data is to be removed; the sweep removes the data, then
// the row.
type Volume struct {
	ID        string     `json:"id"`
	AppID     string     `json:"app_id"`
	AppSlug   string     `json:"app_slug"`
	Name      string     `json:"name"`
	SizeBytes int64      `json:"size_bytes"`
	CreatedAt time.Time  `json:"created_at"`
	AppGoneAt *time.Time `json:"app_gone_at,omitempty"`
	DiscardAt *time.Time `json:"discard_at,omitempty"`
}

// attached says whether the volume belongs to a live app.
func (v *Volume) attached() bool { return v.AppGoneAt == nil && v.DiscardAt == nil }

// Volumes is the table of volumes.
var Volumes = &raftstore.Table[Volume]{
	Name: "volumes",
	ID:   func(v *Volume) string { return v.ID },
	Indexes: []raftstore.Index[Volume]{
		{Name: "app", Key: func(v *Volume) (string, bool) { return v.AppID, true }},
		// live: an app has one volume of a name.
		{Name: "live", Unique: true, Key: func(v *Volume) (string, bool) { return v.AppID + "/" + v.Name, v.attached() }},
		// slug finds the kept volumes a new app of the same name may take.
		{Name: "slug", Key: func(v *Volume) (string, bool) { return v.AppSlug, v.AppGoneAt != nil && v.DiscardAt == nil }},
		{Name: "discard", Key: func(v *Volume) (string, bool) { return v.ID, v.DiscardAt != nil }},
	},
	Validate: func(_ *raftstore.Reader, old, v *Volume) error {
		if v == nil {
			return nil
		}
		if v.AppID == "" || !nameRE.MatchString(v.Name) || v.SizeBytes < 0 {
			return errors.New("a volume has an app, a plain name and a size")
		}
		if old != nil && old.DiscardAt != nil && v.DiscardAt == nil {
			return errors.New("a volume being discarded is never taken back")
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Volumes} }

// ofApp returns the rows of an app's volumes (kept ones of a deleted app
// included), by ID.
func ofApp(r *raftstore.Reader, appID string) []Volume {
	items, _ := Volumes.List(r, raftstore.Query{Index: "app", Key: appID})
	out := make([]Volume, 0, len(items))
	for _, it := range items {
		out = append(out, it.Value)
	}
	return out
}

// Attached returns the volumes of a live app by name.
func Attached(r *raftstore.Reader, appID string) map[string]Volume {
	out := map[string]Volume{}
	for _, v := range ofApp(r, appID) {
		if v.attached() {
			out[v.Name] = v
		}
	}
	return out
}

// EnsureOps makes a row for every volume doc declares that the app has
// none of (a new vol_ ID), and records a changed size, for the write that
// deploys doc or declares a volume in it. It returns the app's volumes by
// name as they will be.
func EnsureOps(r *raftstore.Reader, appID, appSlug string, doc spec.Document, now time.Time) (map[string]Volume, []raftstore.Op) {
	have := Attached(r, appID)
	var ops []raftstore.Op
	for _, name := range slices.Sorted(maps.Keys(doc.Volumes)) {
		size := doc.Volumes[name].SizeBytes
		v, ok := have[name]
		switch {
		case !ok:
			v = Volume{ID: ids.NewAt(ids.Volume, now), AppID: appID, AppSlug: appSlug, Name: name, SizeBytes: size, CreatedAt: now}
			ops = append(ops, Volumes.Insert(&v))
		case v.SizeBytes != size:
			v.SizeBytes = size
			ops = append(ops, Volumes.Put(&v))
		default:
			continue
		}
		have[name] = v
	}
	return have, ops
}

// AppGoneOps keeps an app's volumes past the app's deletion (its data
// stays for a later app of the same name, a restore or a deletion), or,
// with discard, marks them for the sweep to remove their data. It returns
// the IDs of the volumes concerned.
func AppGoneOps(r *raftstore.Reader, appID string, discard bool, now time.Time) ([]string, []raftstore.Op) {
	var (
		idsOf []string
		ops   []raftstore.Op
	)
	for _, v := range ofApp(r, appID) {
		if !v.attached() {
			continue
		}
		v.AppGoneAt = &now
		if discard {
			v.DiscardAt = &now
		}
		idsOf = append(idsOf, v.ID)
		ops = append(ops, Volumes.Put(&v))
	}
	return idsOf, ops
}

// AppsWithVolumes returns the IDs of the live apps that have volumes.
func AppsWithVolumes(r *raftstore.Reader) []string {
	items, _ := Volumes.List(r, raftstore.Query{})
	seen := map[string]bool{}
	var out []string
	for _, it := range items {
		if v := it.Value; v.attached() && !seen[v.AppID] {
			seen[v.AppID] = true
			out = append(out, v.AppID)
		}
	}
	return out
}
