package secrets

import "github.com/svchost/svc/internal/adapters"

// BackendsOf picks the secrets adapters out of what a server loaded, and
// the ID of the primary one, where new values go. A primary adapter that
// did not open stays primary: writes then answer ADAPTER_UNAVAILABLE
// rather than going quietly somewhere else.
func BackendsOf(set *adapters.Set) (backends map[string]Backend, primary string) {
	backends = map[string]Backend{}
	for _, l := range set.Of(adapters.CategorySecrets) {
		if b, ok := l.Instance.(Backend); ok {
			backends[l.Adapter.ID] = b
		}
	}
	if p, ok := set.Primary(adapters.CategorySecrets); ok {
		primary = p.Adapter.ID
	}
	return backends, primary
}
