package identity

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// NewToken is a token to mint.
type NewToken struct {
	Name          string
	ExpiresInDays *int
	Agent         bool
}

// MaxTokenDays bounds expires_in_days whatever the policy.
const MaxTokenDays = 3650

// Expiry is when a token stops being accepted under host policy's
// max_token_lifetime_days (capDays; 0 means no cap): its own expiry, or
// capDays after it was made if that comes first, so that a cap set or
// lowered after a token was minted applies to it too. nil means never.
func Expiry(t Token, capDays int) *time.Time {
	if capDays <= 0 {
		return t.ExpiresAt
	}
	capped := t.CreatedAt.Add(time.Duration(capDays) * 24 * time.Hour)
	if t.ExpiresAt != nil && t.ExpiresAt.Before(capped) {
		return t.ExpiresAt
	}
	return &capped
}

// CreateToken mints a delegated token (acting as the caller's account) or a
// service token (its own principal). The secret is returned once and only
// its hash kept. A token minted by an agent token is an agent token too, so
// that agent restrictions cannot be shed. The expiry is capped by host
// policy's max_token_lifetime_days (refused above it; the cap when none is
// asked for).
func (s *Service) CreateToken(ctx context.Context, c authz.Caller, kind string, n NewToken) (Token, string, error) {
	if kind != TokenDelegated && kind != TokenService {
		return Token{}, "", fmt.Errorf("create token: unknown kind %q", kind)
	}
	if kind == TokenDelegated && c.Principal.UserID == "" {
		return Token{}, "", errcode.New(errcode.PermDenied, "only an account (or a token acting for one) can mint a delegated token")
	}
	if n.Name == "" || utf8.RuneCountInString(n.Name) > 100 || !utf8.ValidString(n.Name) {
		return Token{}, "", errcode.Invalid("name", "a token name is 1 to 100 characters")
	}
	now := s.now()
	var expires *time.Time
	maxDays := s.d.Policy.Current().MaxTokenLifetimeDays
	days := 0
	switch {
	case n.ExpiresInDays != nil:
		days = *n.ExpiresInDays
		if days < 1 || days > MaxTokenDays {
			return Token{}, "", errcode.Invalid("expires_in_days", "expires_in_days must be 1 to %d", MaxTokenDays)
		}
		if maxDays > 0 && days > maxDays {
			return Token{}, "", errcode.New(errcode.PolicyTokenLifetime, "host policy allows tokens of at most %d days", maxDays).
				WithDetail("max_token_lifetime_days", maxDays).
				WithRemedy("ask for at most %d days in expires_in_days, or leave it out to get a token of that lifetime", maxDays)
		}
	case maxDays > 0:
		days = maxDays
	}
	if days > 0 {
		e := now.Add(time.Duration(days) * 24 * time.Hour)
		expires = &e
	}
	// A token cannot mint one that outlives it.
	if c.Principal.Kind == authz.KindToken {
		if parent, _, ok := Tokens.Get(s.d.Store.Read(), c.Principal.ID); ok && parent.ExpiresAt != nil &&
			(expires == nil || expires.After(*parent.ExpiresAt)) {
			e := *parent.ExpiresAt
			expires = &e
		}
	}
	id, secret, hash := newSecret(ids.Token)
	owner := c.Principal.UserID
	if owner == "" {
		owner = c.Principal.ID // a service token minting: its creator is that token
	}
	t := Token{
		ID: id, Name: n.Name, Kind: kind, Agent: n.Agent || c.Principal.Agent, OwnerID: owner,
		SecretHash: hash, CreatedAt: now, ExpiresAt: expires,
	}
	eventKind := "delegated"
	if kind == TokenService {
		eventKind = "account" // the specification's word for a service token
	}
	err := s.update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{
			Tokens.Insert(&t),
			audit.Record(ctx, now, "token.create", "", audit.Target{Kind: "token", ID: id}, map[string]any{"name": t.Name, "kind": kind, "agent": t.Agent}),
			events.Emit(ctx, now, "token.created", nil, "token", id, map[string]any{"name": t.Name, "kind": eventKind}),
		}, nil
	})
	if err != nil {
		return Token{}, "", err
	}
	return t, secret, nil
}

// OwnTokens lists the caller's own delegated tokens by ID after the
// cursor, and whether more follow.
func (s *Service) OwnTokens(c authz.Caller, after string, limit int) ([]Token, bool) {
	if c.Principal.UserID == "" {
		return []Token{}, false
	}
	return tokenValues(Tokens.List(s.d.Store.Read(), raftstore.Query{Index: "owner", Key: c.Principal.UserID, After: after, Limit: limit,
		Filter: func(v any) bool { return v.(*Token).Kind == TokenDelegated }}))
}

// ServiceTokens lists the service tokens by ID after the cursor, and
// whether more follow.
func (s *Service) ServiceTokens(after string, limit int) ([]Token, bool) {
	return tokenValues(Tokens.List(s.d.Store.Read(), raftstore.Query{Index: "kind", Key: TokenService, After: after, Limit: limit}))
}

func tokenValues(items []raftstore.Item[Token], more bool) ([]Token, bool) {
	out := make([]Token, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, more
}

// RevokeToken revokes a token. One's own token needs no verb; a service
// token needs install.tokens.manage; anyone else's delegated token
// install.users.manage. Without the verb the answer is PERM_VERB_REQUIRED;
// for a token that does not exist it is NOT_FOUND only to a caller holding
// both verbs (revokeVerb), so that nobody learns from the answer which
// tokens exist that they may not revoke.
func (s *Service) RevokeToken(ctx context.Context, c authz.Caller, id string) error {
	return s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		t, _, ok := Tokens.Get(r, id)
		own := ok && (t.Kind == TokenDelegated && c.IsUser(t.OwnerID) || c.Principal.ID == id)
		if !own {
			if v := revokeVerb(c, t, ok); v != "" {
				return nil, verbRequired(v)
			}
			if !ok {
				return nil, errcode.New(errcode.NotFound, "no token %s", id)
			}
		}
		now := s.now()
		// Revocation wins over a concurrent record of the token's use; what
		// was shared with a service token goes with it (a grant given
		// meanwhile has the change built again).
		ops := append([]raftstore.Op{Tokens.Delete(id), Grants.CheckTable(r.TableIndex(Grants))}, s.grantDeletes(ctx, r, authz.KindToken, id)...)
		return append(ops,
			audit.Record(ctx, now, "token.revoke", "", audit.Target{Kind: "token", ID: id}, map[string]any{"name": t.Name, "kind": t.Kind}),
			events.Emit(ctx, now, "token.revoked", nil, "token", id, nil),
		), nil
	})
}

// revokeVerb is the verb the caller lacks to revoke a token that is not its
// own ("" when it holds what is needed): install.tokens.manage for a
// service token, install.users.manage for anyone else's delegated token,
// and both for a token that does not exist, which could have been either.
func revokeVerb(c authz.Caller, t Token, exists bool) authz.Verb {
	need := []authz.Verb{authz.InstallUsersManage, authz.InstallTokensManage}
	switch {
	case exists && t.Kind == TokenService:
		need = need[1:]
	case exists:
		need = need[:1]
	}
	for _, v := range need {
		if !c.Has(v) {
			return v
		}
	}
	return ""
}
