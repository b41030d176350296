package nomadsd

import "github.com/svchost/svc/edge/blocking"

// newVendor returns what the translation of failures says about Nomad at
// base, read for namespace.
func newVendor(base, namespace string) *blocking.Vendor {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &blocking.Vendor{
		Name:           "nomad",
		Address:        base,
		DeniedWhy:      "the adapter has no token, or one nomad does not know, or one whose policy does not allow it",
		DeniedRemedy:   "set the adapter's token to a nomad ACL token whose policy grants the read-job capability on namespace " + namespace,
		NotFoundRemedy: "check that the adapter's address points at nomad's HTTP API (nomad 1.3 or later), not at a proxy or another service",
		RefusedRemedy:  "check the adapter's namespace and region; nomad's log has the reason",
		FailedRemedy:   "check that the nomad servers have a leader and that the adapter's region exists; nomad's server log has the reason",
	}
}
