package consul

import (
	"errors"

	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/edge/blocking"
	"github.com/svchost/svc/internal/errcode"
)

// newVendor returns what the translation of failures says about Consul
// at address.
func newVendor(address string) *blocking.Vendor {
	return &blocking.Vendor{
		Name:           "consul",
		Address:        address,
		DeniedWhy:      "the adapter's token is unknown to consul or its policy does not allow it",
		DeniedRemedy:   "set the adapter's token to a consul ACL token whose policy grants service:read on svc's services and node:read on their nodes",
		NotFoundRemedy: "check that the adapter's address points at consul's HTTP API, not at a proxy or another service",
		RefusedRemedy:  "check the adapter's datacenter and address; consul's log has the reason",
		FailedRemedy:   "check that the consul servers have a leader and that the adapter's datacenter exists; consul's server log has the reason",
	}
}

// translate turns an error of Consul's client into a coded error, by HTTP
// status and error type, never by message text.
func (w *Watcher) translate(what string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	var se api.StatusError
	if errors.As(err, &se) {
		return w.vendor.StatusError(what, se.Code)
	}
	return w.vendor.TransportError(what, err)
}
