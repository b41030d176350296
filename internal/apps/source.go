package apps

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Source kinds.
const (
	SourceRepository = "repository"
	SourceArchive    = "archive"
)

// SetSource records where an app's code now comes from, in one write with
// its audit entry: source.upload for an archive, source.fetch for a
// repository. Fetching the code is the source package's; this only
// records it. The caller keeps credentials out of the repository address.
func (s *Service) SetSource(ctx context.Context, id string, src Source) error {
	if err := checkSource(src); err != nil {
		return err
	}
	action := "source.fetch"
	if src.Kind == SourceArchive {
		action = "source.upload"
	}
	details := map[string]any{"kind": src.Kind, "commit": src.Commit}
	if src.Kind == SourceRepository {
		details["repository"], details["ref"], details["subdir"] = src.Repository, src.Ref, src.Subdir
	}
	now := s.now()
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, meta, ok := Apps.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no app %s", id)
		}
		app.Source, app.UpdatedAt = &src, now
		return []raftstore.Op{
			Apps.PutIf(&app, meta.ModifyIndex),
			audit.Record(ctx, now, action, id, audit.Target{Kind: "app", ID: id}, details),
		}, nil
	})
	if err != nil {
		return fmt.Errorf("set app source: %w", err)
	}
	return nil
}

// checkSource validates a source record.
func checkSource(src Source) error {
	switch src.Kind {
	case SourceRepository:
		if src.Repository == "" {
			return errcode.Invalid("source.repository", "a repository source needs its repository")
		}
	case SourceArchive:
		if src.Repository != "" || src.Ref != "" || src.Subdir != "" {
			return errcode.Invalid("source", "an archive source has no repository, ref or subdir")
		}
	default:
		return errcode.Invalid("source.kind", "source.kind must be repository or archive")
	}
	for field, v := range map[string]string{"source.repository": src.Repository, "source.ref": src.Ref, "source.commit": src.Commit, "source.subdir": src.Subdir} {
		if len(v) > 2048 || strings.ContainsFunc(v, unicode.IsControl) {
			return errcode.Invalid(field, "%s must be at most 2048 bytes without control characters", field)
		}
	}
	return nil
}
