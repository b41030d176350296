package nomad

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
)

// statusOf returns the HTTP status of a Nomad API error, or 0 when Nomad
// did not answer (the request failed on the way).
func statusOf(err error) int {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) && ure.HasStatusCode() {
		return ure.StatusCode()
	}
	var pure *api.UnexpectedResponseError
	if errors.As(err, &pure) && pure != nil && pure.HasStatusCode() {
		return pure.StatusCode()
	}
	return 0
}

// unreachable says whether err is a failure to reach Nomad at all.
func unreachable(err error) bool {
	var ne net.Error
	var ue *url.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &ue) || errors.As(err, &oe)
}

// translate turns a Nomad API error into our coded errors, by HTTP status
// only, never by Nomad's message text (which stays in Err, for the logs):
//
//   - no answer (refused, reset, DNS, TLS): ADAPTER_UNAVAILABLE;
//   - 403: ADAPTER_FAILED, with the token as the remedy;
//   - 404: NOT_FOUND, with what was not found;
//   - 5xx and any other status: ADAPTER_FAILED.
//
// A context that ended is returned as it is: the caller's deadline, not
// Nomad's failure. op names what was asked ("register job x").
func (r *Runtime) translate(err error, op, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("nomad: %s: %w", op, err)
	}
	if code := statusOf(err); code != 0 {
		return r.byStatus(code, err, op, what)
	}
	if unreachable(err) {
		return errcode.Wrap(err, errcode.AdapterUnavailable, "nomad at %s cannot be reached to %s", r.cfg.Address, op)
	}
	return errcode.Wrap(err, errcode.AdapterFailed, "nomad: %s failed", op)
}

// byStatus translates an HTTP status Nomad answered with.
func (r *Runtime) byStatus(code int, err error, op, what string) *errcode.Error {
	switch code {
	case http.StatusForbidden:
		return errcode.Wrap(err, errcode.AdapterFailed, "nomad refused to %s: permission denied", op).
			WithRemedy("check the nomad adapter's token: it needs a policy allowing %s; the namespace is %s", capabilitiesText(), r.namespace())
	case http.StatusNotFound:
		return errcode.Wrap(err, errcode.NotFound, "%s is not known to nomad", what)
	default:
		return errcode.Wrap(err, errcode.AdapterFailed, "nomad answered %d to %s", code, op).WithDetail("status", code)
	}
}

func (r *Runtime) namespace() string {
	if r.cfg.Namespace == "" {
		return "default"
	}
	return r.cfg.Namespace
}

func notFound(jobID string) error {
	return errcode.New(errcode.NotFound, "no job %q on this runtime", jobID)
}

func workloadNotFound(jobID, workload string) error {
	return errcode.New(errcode.NotFound, "no workload %q in job %q", workload, jobID)
}
