package backups

import (
	"context"

	"github.com/svchost/svc/internal/backuprepo"
)

// Over is the backup repository r as the service uses it.
func Over(r *backuprepo.Repo) Repo { return &repoOf{r: r} }

// repoOf is a backuprepo.Repo as the service uses it.
type repoOf struct{ r *backuprepo.Repo }

var _ Repo = (*repoOf)(nil)

func (o *repoOf) Write(ctx context.Context, id string, parts []Part) (Stored, error) {
	ps := make([]backuprepo.Part, 0, len(parts))
	for _, p := range parts {
		ps = append(ps, backuprepo.Part{Name: p.Name, Dir: p.Dir, Hold: p.Hold})
	}
	m, err := o.r.Write(ctx, id, ps)
	return Stored{SizeBytes: m.SizeBytes, PlainBytes: m.PlainBytes}, err
}

func (o *repoOf) Verify(ctx context.Context, id string) []error {
	_, errs := o.r.Verify(ctx, id)
	return errs
}

func (o *repoOf) Restore(ctx context.Context, id string, targets map[string]string) error {
	return o.r.Restore(ctx, id, targets)
}

// Delete removes a backup, then the chunks no backup uses any more (a
// failed prune is tried again at the next deletion).
func (o *repoOf) Delete(ctx context.Context, id string) error {
	if err := o.r.Delete(ctx, id); err != nil {
		return err
	}
	_, _ = o.r.Prune(ctx)
	return nil
}
