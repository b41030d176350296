package main

import (
	"time"

	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/internal/webhook"
	"github.com/svchost/svc/raftstore"
)

// buildSubscriptions wires event subscriptions and the dispatcher, which
// runs on the leader only: it sends webhooks over the egress-checked client
// (host policy's allow_private_webhooks read at every attempt) and
// notifications through the loaded notification adapters.
func buildSubscriptions(gen *generation, store *raftstore.Store, st *storage, pol *policy.Service, now func() time.Time) *subscriptions.Service {
	cfg := gen.cfg
	svc := subscriptions.NewService(subscriptions.Deps{Store: store, Ring: st.ring, Policy: pol, Now: now, Declared: st.adapters.DeclaredCategory})
	st.ring.OnRotate(svc)
	sender := webhook.NewSender(webhook.Options{
		Timeout:      cfg.Events.AttemptTimeout,
		AllowPrivate: func() bool { return pol.Current().AllowPrivateWebhooks },
		Now:          now,
		UserAgent:    "svc/" + version,
	})
	d := subscriptions.NewDispatcher(subscriptions.DispatchDeps{
		Store: store, Ring: st.ring, Policy: pol, Sender: sender, Now: now, Logger: gen.log.With("component", "dispatcher"),
		NodeID: store.NodeID(), ConsoleURL: cfg.Server.ExternalURL,
		Schedule: cfg.Events.RetrySchedule, AttemptTimeout: cfg.Events.AttemptTimeout, DisableAfter: cfg.Events.DisableAfter,
		Notifier: func(id string) (notify.Notifier, bool) {
			l, ok := st.adapters.Current().Get(id)
			if !ok || l.Instance == nil {
				return nil, false
			}
			n, ok := l.Instance.(notify.Notifier)
			return n, ok
		},
	})
	store.RunWhileLeader("dispatcher", d.Run)
	store.RunWhileLeader("deliveries-sweep", raftstore.Every(sweepInterval, svc.SweepDeliveries))
	return svc
}
