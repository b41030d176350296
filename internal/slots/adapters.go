package slots

import "github.com/svchost/svc/internal/adapters"

// Loaded is a slots adapter as a server loaded it.
type Loaded struct {
	AdapterID string
	Kind      string
	// Provisioner is nil when the adapter did not open; Err says why.
	Provisioner Provisioner
	Err         error
}

// ProvisionersOf picks the slots adapters out of what a server loaded,
// the category's primary first.
func ProvisionersOf(set *adapters.Set) []Loaded {
	var out []Loaded
	for _, l := range set.Of(adapters.CategorySlots) {
		p, _ := l.Instance.(Provisioner)
		err := l.Err
		if p == nil && err == nil {
			err = errNotProvisioner
		}
		out = append(out, Loaded{AdapterID: l.Adapter.ID, Kind: l.Adapter.Kind, Provisioner: p, Err: err})
	}
	return out
}

var errNotProvisioner = errNotProv{}

type errNotProv struct{}

func (errNotProv) Error() string { return "the adapter does not provision slots" }
