// Package errcode owns the error catalogue of the API: every stable code, the
// HTTP status it answers with, and the condition it names, in one table. Domain
// code returns *Error values built here; one handler in the server maps them to
// HTTP, and the generated reference lists the same table.
//
// It must not import HTTP frameworks, storage or adapters: it is a leaf that
// every layer may use.
package errcode

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable machine code. Clients branch on it; messages may change.
type Code string

// The catalogue of the specification, plus STORE_UNAVAILABLE (see below).
const (
	ValidDanglingMount    Code = "VALID_DANGLING_MOUNT"
	ValidDanglingSlotRef  Code = "VALID_DANGLING_SLOT_REF"
	ValidDependencyCycle  Code = "VALID_DEPENDENCY_CYCLE"
	ValidEnvAmbiguous     Code = "VALID_ENV_AMBIGUOUS"
	ValidInvalid          Code = "VALID_INVALID"
	ValidPrimaryWorkload  Code = "VALID_PRIMARY_WORKLOAD"
	AuthInvalid           Code = "AUTH_INVALID"
	AuthRequired          Code = "AUTH_REQUIRED"
	AuthTokenInvalid      Code = "AUTH_TOKEN_INVALID"
	AuthTokenOrphaned     Code = "AUTH_TOKEN_ORPHANED"
	PermDenied            Code = "PERM_DENIED"
	PermPasscodeRequired  Code = "PERM_PASSCODE_REQUIRED"
	PermVerbRequired      Code = "PERM_VERB_REQUIRED"
	PolicyAnonymousGrant  Code = "POLICY_ANONYMOUS_GRANT_FORBIDDEN"
	PolicyExecDisabled    Code = "POLICY_EXEC_DISABLED"
	PolicySourceNotAllow  Code = "POLICY_SOURCE_NOT_ALLOWED"
	NotFound              Code = "NOT_FOUND"
	CapacityNoFreePort    Code = "CAPACITY_NO_FREE_PORT"
	CapacityOversubscribe Code = "CAPACITY_WOULD_OVERSUBSCRIBE"
	PlanAdapterNotConfig  Code = "PLAN_ADAPTER_NOT_CONFIGURED"
	PlanCapabilityUnsupp  Code = "PLAN_CAPABILITY_UNSUPPORTED"
	PlanComposeRejected   Code = "PLAN_COMPOSE_CONSTRUCT_REJECTED"
	PlanNoAdapterPolicy   Code = "PLAN_NO_ADAPTER_MEETS_POLICY"
	PlanSecurityBelow     Code = "PLAN_SECURITY_BELOW_THRESHOLD"
	PlanSlotUnfilled      Code = "PLAN_SLOT_UNFILLED"
	StateAppExited        Code = "STATE_APP_EXITED"
	StateBackupDecision   Code = "STATE_BACKUP_DECISION_REQUIRED"
	StateInvalid          Code = "STATE_INVALID"
	BackupDecryptFailed   Code = "BACKUP_DECRYPT_FAILED"
	BackupIncomplete      Code = "BACKUP_INCOMPLETE"
	BuildFailed           Code = "BUILD_FAILED"
	BuildListensLoopback  Code = "BUILD_LISTENS_ON_LOOPBACK"
	BuildTimeout          Code = "BUILD_TIMEOUT"
	Internal              Code = "INTERNAL"
	RateLimited           Code = "RATE_LIMITED"
	AdapterFailed         Code = "ADAPTER_FAILED"
	AdapterUnavailable    Code = "ADAPTER_UNAVAILABLE"

	// PolicyTokenLifetime is not in the specification's table: the API
	// contract asks for a POLICY_ code of our choosing when a token would
	// outlive host policy's max_token_lifetime_days.
	PolicyTokenLifetime Code = "POLICY_TOKEN_LIFETIME_EXCEEDED"

	// PolicyBackupRequired is not in the specification's table: the API
	// contract asks for a POLICY_ code when require_backup_before_destroy
	// refuses deleting an app's data without a final backup (force=true),
	// or a kept volume's that no completed backup holds.
	PolicyBackupRequired Code = "POLICY_BACKUP_REQUIRED"

	// StoreUnavailable is not in the specification's table: the replicated
	// store has no leader (quorum lost, election under way), a write's
	// outcome could not be learned, or this node has not caught up with the
	// cluster yet (just started, or restoring a snapshot) and will not answer
	// from its older state. It answers 503 with Retry-After so that load
	// balancers and clients retry, and it is listed in the reference.
	StoreUnavailable Code = "STORE_UNAVAILABLE"
)

// Entry is one row of the catalogue.
type Entry struct {
	Code       Code   `json:"code"`
	HTTPStatus int    `json:"http_status"`
	Condition  string `json:"condition"`
}

// catalogue is the single table of codes. Order follows the specification.
var catalogue = []Entry{
	{ValidDanglingMount, http.StatusBadRequest, "a workload mounts a volume the spec does not declare"},
	{ValidDanglingSlotRef, http.StatusBadRequest, "spec refers to an undeclared slot"},
	{ValidDependencyCycle, http.StatusBadRequest, "workloads depend on each other in a cycle"},
	{ValidEnvAmbiguous, http.StatusBadRequest, "an environment variable set twice with different values"},
	{ValidInvalid, http.StatusBadRequest, "request or spec malformed"},
	{ValidPrimaryWorkload, http.StatusBadRequest, "spec must name exactly one primary workload"},
	{AuthInvalid, http.StatusUnauthorized, "credential presented is not valid"},
	{AuthRequired, http.StatusUnauthorized, "no credential, or session expired"},
	{AuthTokenInvalid, http.StatusUnauthorized, "token unknown, revoked or expired"},
	{AuthTokenOrphaned, http.StatusUnauthorized, "token owner suspended or deleted"},
	{PermDenied, http.StatusForbidden, "authenticated but not permitted"},
	{PermPasscodeRequired, http.StatusForbidden, "app shared with everyone behind a passcode and the request has not shown it"},
	{PermVerbRequired, http.StatusForbidden, "no grant carries the verb needed"},
	{PolicyAnonymousGrant, http.StatusForbidden, "policy forbids sharing with everyone"},
	{PolicyExecDisabled, http.StatusForbidden, "policy turned off terminal access, owner included"},
	{PolicySourceNotAllow, http.StatusForbidden, "policy does not allow apps from this source"},
	{NotFound, http.StatusNotFound, "no such object, or none the caller may see"},
	{CapacityNoFreePort, http.StatusConflict, "port-mode routing has no free port in range"},
	{CapacityOversubscribe, http.StatusConflict, "running would commit more of the host than is left"},
	{PlanAdapterNotConfig, http.StatusConflict, "spec names an adapter the installation lacks"},
	{PlanCapabilityUnsupp, http.StatusConflict, "spec asks for something the chosen adapter cannot do"},
	{PlanComposeRejected, http.StatusConflict, "compose file uses an untranslatable construct"},
	{PlanNoAdapterPolicy, http.StatusConflict, "no configured adapter satisfies the spec under host policy"},
	{PlanSecurityBelow, http.StatusConflict, "installation requires a score and the app is below it or never scanned"},
	{PlanSlotUnfilled, http.StatusConflict, "a required dependency has nothing filling it"},
	{StateAppExited, http.StatusConflict, "app started and then stopped, so the deploy has nothing to route to"},
	{StateBackupDecision, http.StatusConflict, "app has storage and the delete request did not say whether to keep a final backup"},
	{StateInvalid, http.StatusConflict, "object in a state this action does not apply to"},
	{BackupDecryptFailed, http.StatusUnprocessableEntity, "backup cannot be decrypted with the key supplied"},
	{BackupIncomplete, http.StatusUnprocessableEntity, "backup lacks part of what it claims; not applied"},
	{BuildFailed, http.StatusUnprocessableEntity, "the build ran and did not succeed; its log is the answer"},
	{BuildListensLoopback, http.StatusUnprocessableEntity, "built app listens only on the loopback address inside its container"},
	{BuildTimeout, http.StatusUnprocessableEntity, "build exceeded its allowed time"},
	{Internal, http.StatusInternalServerError, "unexpected failure; request id finds the log line"},
	{RateLimited, http.StatusInternalServerError, "too many attempts in a short time, for example at a passcode"},
	{AdapterFailed, http.StatusBadGateway, "adapter reached and failed"},
	{AdapterUnavailable, http.StatusBadGateway, "needed adapter not configured or not reachable"},
	{PolicyTokenLifetime, http.StatusForbidden, "policy caps token lifetime and the token asked for longer"},
	{PolicyBackupRequired, http.StatusForbidden, "policy requires a final backup before an app's or a kept volume's data is discarded"},
	{StoreUnavailable, http.StatusServiceUnavailable, "the replicated store has no leader, could not confirm a write, or this node has not caught up with it yet; retry"},
}

var byCode = func() map[Code]Entry {
	m := make(map[Code]Entry, len(catalogue))
	for _, e := range catalogue {
		if _, dup := m[e.Code]; dup {
			panic("errcode: duplicate code " + string(e.Code))
		}
		m[e.Code] = e
	}
	return m
}()

// Catalogue returns every code with its status and condition, in order.
func Catalogue() []Entry { return append([]Entry(nil), catalogue...) }

// Lookup returns the catalogue entry of a code.
func Lookup(c Code) (Entry, bool) {
	e, ok := byCode[c]
	return e, ok
}

// Status returns the HTTP status of a code; an unknown code is a 500.
func (c Code) Status() int {
	if e, ok := byCode[c]; ok {
		return e.HTTPStatus
	}
	return http.StatusInternalServerError
}

// Error is a domain error with a stable code. Its Message is safe to show to
// the caller; the wrapped Err (if any) is for logs only and never leaves the
// server.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Remedy  string         `json:"remedy,omitempty"`
	Details map[string]any `json:"details,omitempty"`
	// HTTPStatus overrides the code's status where the contract fixes another
	// one for the same code (405 and 413 answer VALID_INVALID). Zero means the
	// catalogue's status.
	HTTPStatus int `json:"-"`
	// RetryAfter, in seconds, is sent as a Retry-After header when positive.
	RetryAfter int `json:"-"`

	Err error `json:"-"`
}

// New returns an error with a code and a formatted public message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with a code and public message that keeps err as its
// cause for logs and errors.Is.
func Wrap(err error, code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Status is the HTTP status the error answers with.
func (e *Error) Status() int {
	if e.HTTPStatus != 0 {
		return e.HTTPStatus
	}
	return e.Code.Status()
}

// WithRemedy sets the remedy and returns e.
func (e *Error) WithRemedy(format string, args ...any) *Error {
	e.Remedy = fmt.Sprintf(format, args...)
	return e
}

// WithDetail adds one detail and returns e.
func (e *Error) WithDetail(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// WithStatus overrides the HTTP status and returns e.
func (e *Error) WithStatus(status int) *Error {
	e.HTTPStatus = status
	return e
}

// Is makes errors.Is(err, errcode.NotFound-coded sentinel) match by code, so
// callers can compare against a bare &Error{Code: X}.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Message == "" && t.Code == e.Code
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// CodeOf returns the code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	if e, ok := As(err); ok {
		return e.Code
	}
	return Internal
}

// Has reports whether err carries the given code.
func Has(err error, code Code) bool {
	e, ok := As(err)
	return ok && e.Code == code
}

// Invalid is shorthand for a VALID_INVALID error about one field.
func Invalid(field, format string, args ...any) *Error {
	e := New(ValidInvalid, format, args...)
	if field != "" {
		e.WithDetail("field", field)
	}
	return e
}

// MessageOf returns the message of the first *Error in err's chain, prefixed
// with its code; for other errors, their text. It is what reports show of an
// error (adapter health reasons), so adapters must keep secrets out of their
// errors' text.
func MessageOf(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := As(err); ok {
		return string(e.Code) + ": " + e.Message
	}
	return err.Error()
}
