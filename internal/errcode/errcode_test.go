package errcode

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// specTable is the specification's catalogue, in its order, plus our one
// additions (POLICY_TOKEN_LIFETIME_EXCEEDED, POLICY_BACKUP_REQUIRED, STORE_UNAVAILABLE) at the end.
var specTable = []struct {
	Code   Code
	Status int
}{
	{"VALID_DANGLING_MOUNT", 400},
	{"VALID_DANGLING_SLOT_REF", 400},
	{"VALID_DEPENDENCY_CYCLE", 400},
	{"VALID_ENV_AMBIGUOUS", 400},
	{"VALID_INVALID", 400},
	{"VALID_PRIMARY_WORKLOAD", 400},
	{"AUTH_INVALID", 401},
	{"AUTH_REQUIRED", 401},
	{"AUTH_TOKEN_INVALID", 401},
	{"AUTH_TOKEN_ORPHANED", 401},
	{"PERM_DENIED", 403},
	{"PERM_PASSCODE_REQUIRED", 403},
	{"PERM_VERB_REQUIRED", 403},
	{"POLICY_ANONYMOUS_GRANT_FORBIDDEN", 403},
	{"POLICY_EXEC_DISABLED", 403},
	{"POLICY_SOURCE_NOT_ALLOWED", 403},
	{"NOT_FOUND", 404},
	{"CAPACITY_NO_FREE_PORT", 409},
	{"CAPACITY_WOULD_OVERSUBSCRIBE", 409},
	{"PLAN_ADAPTER_NOT_CONFIGURED", 409},
	{"PLAN_CAPABILITY_UNSUPPORTED", 409},
	{"PLAN_COMPOSE_CONSTRUCT_REJECTED", 409},
	{"PLAN_NO_ADAPTER_MEETS_POLICY", 409},
	{"PLAN_SECURITY_BELOW_THRESHOLD", 409},
	{"PLAN_SLOT_UNFILLED", 409},
	{"STATE_APP_EXITED", 409},
	{"STATE_BACKUP_DECISION_REQUIRED", 409},
	{"STATE_INVALID", 409},
	{"BACKUP_DECRYPT_FAILED", 422},
	{"BACKUP_INCOMPLETE", 422},
	{"BUILD_FAILED", 422},
	{"BUILD_LISTENS_ON_LOOPBACK", 422},
	{"BUILD_TIMEOUT", 422},
	{"INTERNAL", 500},
	{"RATE_LIMITED", 500},
	{"ADAPTER_FAILED", 502},
	{"ADAPTER_UNAVAILABLE", 502},
	{"POLICY_TOKEN_LIFETIME_EXCEEDED", 403},
	{"POLICY_BACKUP_REQUIRED", 403},
	{"STORE_UNAVAILABLE", 503},
}

func TestCatalogueMatchesSpecification(t *testing.T) {
	type row struct {
		Code   Code
		Status int
	}
	var want, got []row
	for _, s := range specTable {
		want = append(want, row{s.Code, s.Status})
	}
	for _, e := range Catalogue() {
		got = append(got, row{e.Code, e.HTTPStatus})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Catalogue() differs from the specification (-want +got):\n%s", diff)
	}
}

func TestCatalogueEntries(t *testing.T) {
	seen := map[Code]bool{}
	for _, e := range Catalogue() {
		if seen[e.Code] {
			t.Errorf("code %s listed twice", e.Code)
		}
		seen[e.Code] = true
		if e.Condition == "" {
			t.Errorf("code %s has no condition", e.Code)
		}
		got, ok := Lookup(e.Code)
		if !ok {
			t.Errorf("Lookup(%s) = not found; want the catalogue entry", e.Code)
			continue
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("Lookup(%s) (-catalogue +lookup):\n%s", e.Code, diff)
		}
		if got := e.Code.Status(); got != e.HTTPStatus {
			t.Errorf("%s.Status() = %d; want %d", e.Code, got, e.HTTPStatus)
		}
	}
}

func TestCatalogueReturnsCopy(t *testing.T) {
	c := Catalogue()
	c[0].HTTPStatus = 999
	if got := Catalogue()[0].HTTPStatus; got == 999 {
		t.Errorf("modifying the result of Catalogue() changed the catalogue")
	}
}

func TestUnknownCode(t *testing.T) {
	if _, ok := Lookup("NO_SUCH_CODE"); ok {
		t.Errorf("Lookup(NO_SUCH_CODE) found an entry; want none")
	}
	if got, want := Code("NO_SUCH_CODE").Status(), http.StatusInternalServerError; got != want {
		t.Errorf("unknown code status = %d; want %d", got, want)
	}
}

func TestConstantsHaveTheirNames(t *testing.T) {
	// A sample of constants whose Go names abbreviate the code.
	tests := []struct {
		got  Code
		want Code
	}{
		{PolicyAnonymousGrant, "POLICY_ANONYMOUS_GRANT_FORBIDDEN"},
		{PolicySourceNotAllow, "POLICY_SOURCE_NOT_ALLOWED"},
		{CapacityOversubscribe, "CAPACITY_WOULD_OVERSUBSCRIBE"},
		{PlanAdapterNotConfig, "PLAN_ADAPTER_NOT_CONFIGURED"},
		{PlanCapabilityUnsupp, "PLAN_CAPABILITY_UNSUPPORTED"},
		{PlanComposeRejected, "PLAN_COMPOSE_CONSTRUCT_REJECTED"},
		{PlanNoAdapterPolicy, "PLAN_NO_ADAPTER_MEETS_POLICY"},
		{PlanSecurityBelow, "PLAN_SECURITY_BELOW_THRESHOLD"},
		{StateBackupDecision, "STATE_BACKUP_DECISION_REQUIRED"},
		{BuildListensLoopback, "BUILD_LISTENS_ON_LOOPBACK"},
		{StoreUnavailable, "STORE_UNAVAILABLE"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("constant = %q; want %q", tt.got, tt.want)
		}
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"bare", New(NotFound, "no app %s", "a1"), "NOT_FOUND: no app a1"},
		{"wrapped", Wrap(io.EOF, Internal, "read failed"), "INTERNAL: read failed: EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestUnwrap(t *testing.T) {
	if got := New(NotFound, "x").Unwrap(); got != nil {
		t.Errorf("New(...).Unwrap() = %v; want nil", got)
	}
	e := Wrap(io.ErrUnexpectedEOF, Internal, "decode")
	if got := e.Unwrap(); got != io.ErrUnexpectedEOF {
		t.Errorf("Wrap(...).Unwrap() = %v; want io.ErrUnexpectedEOF", got)
	}
	if !errors.Is(e, io.ErrUnexpectedEOF) {
		t.Errorf("errors.Is(Wrap(io.ErrUnexpectedEOF), io.ErrUnexpectedEOF) = false; want true")
	}
}

func TestIs(t *testing.T) {
	notFound := New(NotFound, "no app a1")
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same code bare target", notFound, &Error{Code: NotFound}, true},
		{"wrapped by fmt", fmt.Errorf("load: %w", notFound), &Error{Code: NotFound}, true},
		{"twice wrapped", fmt.Errorf("a: %w", fmt.Errorf("b: %w", notFound)), &Error{Code: NotFound}, true},
		{"other code", notFound, &Error{Code: StateInvalid}, false},
		{"target with message does not match by code", notFound, &Error{Code: NotFound, Message: "no app a1"}, false},
		{"target with other message", notFound, &Error{Code: NotFound, Message: "other"}, false},
		{"same pointer", notFound, notFound, true},
		{"not an *Error target", notFound, io.EOF, false},
		{"cause through Wrap", Wrap(New(NotFound, "inner"), Internal, "outer"), &Error{Code: NotFound}, true},
		{"outer code through Wrap", Wrap(New(NotFound, "inner"), Internal, "outer"), &Error{Code: Internal}, true},
		{"plain error", io.EOF, &Error{Code: NotFound}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%v, %v) = %t; want %t", tt.err, tt.target, got, tt.want)
			}
		})
	}
}

func TestAsCodeOfHas(t *testing.T) {
	inner := New(NotFound, "inner")
	tests := []struct {
		name     string
		err      error
		wantOK   bool
		wantCode Code
	}{
		{"nil", nil, false, Internal},
		{"plain", io.EOF, false, Internal},
		{"direct", inner, true, NotFound},
		{"fmt wrapped", fmt.Errorf("x: %w", inner), true, NotFound},
		{"joined", errors.Join(io.EOF, inner), true, NotFound},
		// The outermost *Error decides the code, even if it wraps another.
		{"outermost wins", Wrap(inner, StoreUnavailable, "outer"), true, StoreUnavailable},
		{"fmt %v loses the chain", fmt.Errorf("x: %v", inner), false, Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := As(tt.err)
			if ok != tt.wantOK {
				t.Fatalf("As(%v) ok = %t; want %t", tt.err, ok, tt.wantOK)
			}
			if ok && e.Code != tt.wantCode {
				t.Errorf("As(%v).Code = %s; want %s", tt.err, e.Code, tt.wantCode)
			}
			if got := CodeOf(tt.err); got != tt.wantCode {
				t.Errorf("CodeOf(%v) = %s; want %s", tt.err, got, tt.wantCode)
			}
			if got := Has(tt.err, tt.wantCode); got != tt.wantOK {
				t.Errorf("Has(%v, %s) = %t; want %t", tt.err, tt.wantCode, got, tt.wantOK)
			}
			if Has(tt.err, BuildTimeout) {
				t.Errorf("Has(%v, BUILD_TIMEOUT) = true; want false", tt.err)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want int
	}{
		{"catalogue status", New(NotFound, "x"), http.StatusNotFound},
		{"override", Invalid("", "wrong method").WithStatus(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed},
		{"override 413", New(ValidInvalid, "too large").WithStatus(http.StatusRequestEntityTooLarge), http.StatusRequestEntityTooLarge},
		{"zero override keeps catalogue", New(StoreUnavailable, "x").WithStatus(0), http.StatusServiceUnavailable},
		{"unknown code", New("NOPE", "x"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Status(); got != tt.want {
				t.Errorf("Status() = %d; want %d", got, tt.want)
			}
		})
	}
}

func TestWithStatusKeepsCode(t *testing.T) {
	e := New(ValidInvalid, "x")
	if got := e.WithStatus(http.StatusMethodNotAllowed); got != e {
		t.Errorf("WithStatus returned a different error")
	}
	if e.Code != ValidInvalid {
		t.Errorf("code after WithStatus = %s; want %s", e.Code, ValidInvalid)
	}
	if !errors.Is(e, &Error{Code: ValidInvalid}) {
		t.Errorf("errors.Is by code after WithStatus = false; want true")
	}
}

func TestRemedyAndDetails(t *testing.T) {
	e := New(StateInvalid, "busy").WithRemedy("retry in %d s", 5).WithDetail("a", 1).WithDetail("b", "x")
	if got, want := e.Remedy, "retry in 5 s"; got != want {
		t.Errorf("Remedy = %q; want %q", got, want)
	}
	if diff := cmp.Diff(map[string]any{"a": 1, "b": "x"}, e.Details); diff != "" {
		t.Errorf("Details (-want +got):\n%s", diff)
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name        string
		field       string
		wantDetails map[string]any
	}{
		{"with field", "name", map[string]any{"field": "name"}},
		{"without field", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Invalid(tt.field, "must be %d to %d characters", 1, 63)
			if e.Code != ValidInvalid {
				t.Errorf("Code = %s; want %s", e.Code, ValidInvalid)
			}
			if got, want := e.Message, "must be 1 to 63 characters"; got != want {
				t.Errorf("Message = %q; want %q", got, want)
			}
			if diff := cmp.Diff(tt.wantDetails, e.Details); diff != "" {
				t.Errorf("Details (-want +got):\n%s", diff)
			}
			if got, want := e.Status(), http.StatusBadRequest; got != want {
				t.Errorf("Status() = %d; want %d", got, want)
			}
		})
	}
}

func TestIsWithATypedNilTarget(t *testing.T) {
	if errors.Is(New(NotFound, "x"), (*Error)(nil)) {
		t.Error("a typed nil target matched")
	}
}
