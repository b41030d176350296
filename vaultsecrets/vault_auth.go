package vaultsecrets

import (
	"context"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/svchost/svc/internal/errcode"
)

// Authentication and renewal.
//
// With a token, the adapter looks the token up once at start; a renewable
// token with a TTL is renewed in the background by Vault's lifetime watcher
// until its max TTL, and then svc needs a new token (logged as an error).
//
// With AppRole, the adapter logs in at start and the token it gets is
// renewed the same way; when it can be renewed no longer (max TTL reached,
// or renewal kept failing until its lease ran out), the adapter logs in
// again, retrying with backoff until it succeeds or is closed. A request
// that Vault refuses with 403 also checks whether the token itself has
// died (a lookup-self answering 403: for example after the host slept past
// its TTL, or Vault revoked it) and, if so, logs in again and retries once.

// maxReloginDelay caps the backoff between failed re-logins.
const maxReloginDelay = time.Minute

// logIn logs in with AppRole and makes the token the client's. The caller
// holds authMu, or nothing else runs yet.
func (v *Vault) logIn(ctx context.Context) error {
	path := "auth/" + v.approleMount + "/login"
	o := v.op("logging in with AppRole", "")
	o.refused = "check role_id and secret_id: a secret_id may have expired or reached its use limit (create a new one with: vault write -f auth/" +
		v.approleMount + "/role/<role>/secret-id), and that AppRole is enabled at auth/" + v.approleMount
	sec, err := v.login.Logical().WriteWithContext(ctx, path, map[string]any{"role_id": v.roleID, "secret_id": v.secretID})
	if err != nil {
		return v.translate(o, err)
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return errcode.New(errcode.AdapterFailed, "vault answered the AppRole login without a token").
			WithRemedy("check that auth/%s is an AppRole auth method", v.approleMount)
	}
	v.client.SetToken(sec.Auth.ClientToken)
	v.auth = *sec.Auth
	v.log.Info("vault: logged in with AppRole", "ttl", time.Duration(sec.Auth.LeaseDuration)*time.Second, "renewable", sec.Auth.Renewable)
	return nil
}

// lookUpToken learns whether the configured token can be renewed and for
// how long it lives.
func (v *Vault) lookUpToken(ctx context.Context, token string) error {
	o := v.op("looking up its own token", "read on auth/token/lookup-self (the default policy grants it)")
	sec, err := v.client.Auth().Token().LookupSelfWithContext(ctx)
	if err != nil {
		return v.tokenError(v.translate(o, err))
	}
	ttl, _ := sec.TokenTTL()
	renewable, _ := sec.TokenIsRenewable()
	v.auth = api.SecretAuth{ClientToken: token, Renewable: renewable, LeaseDuration: int(ttl / time.Second)}
	switch {
	case ttl == 0:
		v.log.Info("vault: using a token without a TTL; nothing to renew")
	case renewable:
		v.log.Info("vault: using a renewable token; renewing it in the background", "ttl", ttl)
	default:
		v.log.Warn("vault: the token is not renewable and will expire; configure the adapter with a new token before then", "ttl", ttl)
	}
	return nil
}

func (v *Vault) currentAuth() api.SecretAuth {
	v.authMu.Lock()
	defer v.authMu.Unlock()
	return v.auth
}

// do runs one request. Under AppRole, a 403 whose token turns out to be
// dead leads to a new login and one retry.
func (v *Vault) do(ctx context.Context, fn func() error) error {
	used := v.client.Token()
	err := fn()
	if err == nil || !v.approle() || statusOf(err) != 403 || ctx.Err() != nil {
		return err
	}
	relogged, lerr := v.reloginIfDead(ctx, used)
	if lerr != nil {
		return lerr
	}
	if !relogged {
		return err
	}
	return fn()
}

// reloginIfDead logs in again if the token used is dead. It reports
// whether the client now holds a newer token.
func (v *Vault) reloginIfDead(ctx context.Context, used string) (bool, error) {
	v.authMu.Lock()
	defer v.authMu.Unlock()
	if v.client.Token() != used {
		return true, nil // another request logged in again meanwhile
	}
	_, err := v.client.Auth().Token().LookupSelfWithContext(ctx)
	if err == nil || statusOf(err) != 403 {
		return false, nil // the token lives: the refusal was the policy's
	}
	if err := v.logIn(ctx); err != nil {
		return false, err
	}
	v.log.Warn("vault: the AppRole token was no longer valid; logged in again")
	select {
	case v.relogged <- struct{}{}:
	default:
	}
	return true, nil
}

// renew keeps the token alive until Close.
func (v *Vault) renew() {
	defer close(v.done)
	for {
		a := v.currentAuth()
		var ended error // why renewal ended, if it failed
		switch {
		case a.Renewable && a.LeaseDuration > 0:
			closed, err := v.watch(a)
			if closed {
				return
			}
			ended = err
		case v.approle() && a.LeaseDuration > 0:
			// Not renewable: log in again at two thirds of its TTL.
			t := time.NewTimer(time.Duration(a.LeaseDuration) * time.Second * 2 / 3)
			select {
			case <-v.bg.Done():
				t.Stop()
				return
			case <-v.relogged:
				t.Stop()
			case <-t.C:
			}
		default:
			return // no TTL, or a configured token that cannot be renewed
		}
		if v.currentAuth().ClientToken != a.ClientToken {
			continue // a request logged in again meanwhile: watch the new token
		}
		reason := "its max TTL is reached"
		if ended != nil {
			// Vault answers a renewal past the max TTL with an error too.
			reason = errcode.MessageOf(v.translate(v.op("renewing its token", "update on auth/token/renew-self (the default policy grants it)"), ended))
		}
		if !v.approle() {
			v.log.Error("vault: the token can be renewed no longer; configure the adapter with a new token before it expires", "reason", reason)
			return
		}
		v.log.Info("vault: the AppRole token can be renewed no longer; logging in again", "reason", reason)
		if !v.reloginUntilDone() {
			return
		}
	}
}

// watch renews a token with Vault's lifetime watcher until it can be
// renewed no longer (err says why if a renewal failed), a request logged
// in again, or the adapter closes (closed).
func (v *Vault) watch(a api.SecretAuth) (closed bool, err error) {
	// The watcher renews through a client that does not retry: Vault
	// answers a renewal past the max TTL with a 500, and retrying that
	// would only delay the new login past the token's end.
	w, err := v.renewer.NewLifetimeWatcher(&api.LifetimeWatcherInput{Secret: &api.Secret{Auth: &a}})
	if err != nil {
		return false, err
	}
	go w.Start()
	defer w.Stop()
	for {
		select {
		case <-v.bg.Done():
			return true, nil
		case <-v.relogged:
			return false, nil
		case r := <-w.RenewCh():
			if r != nil && r.Secret != nil && r.Secret.Auth != nil {
				ttl := r.Secret.Auth.LeaseDuration
				v.authMu.Lock()
				if v.auth.ClientToken == a.ClientToken {
					v.auth.LeaseDuration = ttl
					v.auth.Renewable = r.Secret.Auth.Renewable
				}
				v.authMu.Unlock()
				v.log.Debug("vault: token renewed", "ttl", time.Duration(ttl)*time.Second)
			}
		case err := <-w.DoneCh():
			return false, err
		}
	}
}

// reloginUntilDone logs in again, retrying with backoff; it reports false
// if the adapter closed first.
func (v *Vault) reloginUntilDone() bool {
	delay := time.Second
	for {
		ctx, cancel := context.WithTimeout(v.bg, v.client.ClientTimeout())
		v.authMu.Lock()
		err := v.logIn(ctx)
		v.authMu.Unlock()
		cancel()
		if err == nil {
			select { // this login supersedes any a request made meanwhile
			case <-v.relogged:
			default:
			}
			return true
		}
		if v.bg.Err() != nil {
			return false
		}
		v.log.Warn("vault: logging in again with AppRole failed; retrying", "retry_in", delay, "error", errcode.MessageOf(err))
		t := time.NewTimer(delay)
		select {
		case <-v.bg.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		delay = min(2*delay, maxReloginDelay)
	}
}
