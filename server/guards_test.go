package server

import (
	"github.com/svchost/svc/internal/idempotency"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/telemetry"
	"github.com/svchost/svc/raftstore"
)

// The concrete services satisfy the interfaces the server declares.
var (
	_ identityService    = (*identity.Service)(nil)
	_ policyService      = (*policy.Service)(nil)
	_ factsSource        = (*raftstore.Store)(nil)
	_ operatorService    = (*operator.Service)(nil)
	_ historyVerifier    = (*operator.Service)(nil)
	_ idempotencyService = (*idempotency.Service)(nil)
	_ requestObserver    = (*telemetry.Metrics)(nil)
	_ readiness          = (*raftstore.Store)(nil)
)
