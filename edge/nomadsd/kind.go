package nomadsd

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

// KindName is the kind's name in the routes category.
const KindName = "nomad"

// Kind declares the nomad routes adapter: the edge routes to the
// registered instances of the apps' primary services in Nomad's own
// service discovery. Opening it contacts nothing; cmd/svc runs the
// Watcher of the primary routes adapter.
func Kind(log *slog.Logger) adapters.Kind {
	return adapters.Kind{
		Category: adapters.CategoryRoutes,
		Name:     KindName,
		Description: "Routes from Nomad's native service discovery: the registered instances of each app's primary service " +
			"(tags svc, svc-primary, svc-app=<app id>), watched with blocking queries; Nomad does not report their checks, so routes are not health-filtered",
		Settings: []adapters.Setting{
			{Name: "address", Description: "Nomad's HTTP API address", Required: true, Example: "http://127.0.0.1:4646"},
			{Name: "namespace", Description: "Namespace of the apps' jobs", Default: DefaultNamespace},
			{Name: "region", Description: "Region to read; empty for the agent's own", Example: "global"},
			{Name: "ca_cert", Description: "PEM file of the CA that signed Nomad's certificate (https addresses); empty for the system's roots", Example: "/etc/svc/nomad-ca.pem"},
			{Name: "tls_skip_verify", Description: "Skip verifying Nomad's certificate (testing only)", Default: "false"},
			{Name: "token", Description: "ACL token with the read-job capability on the namespace", Credential: true},
		},
		Validate: validate,
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			skip, _ := strconv.ParseBool(c.Settings["tls_skip_verify"])
			return New(Config{
				Address: c.Settings["address"], Namespace: c.Settings["namespace"], Region: c.Settings["region"],
				CACert: c.Settings["ca_cert"], TLSSkipVerify: skip,
				Token: c.Credentials["token"], Logger: log,
			})
		},
	}
}

func validate(settings map[string]string, _ []string) error {
	if _, err := baseURL(settings["address"]); err != nil {
		return err
	}
	if ns := settings["namespace"]; strings.ContainsAny(ns, "*/?#") {
		return errcode.Invalid("config.namespace", "namespace must name one namespace, such as default")
	}
	if _, err := strconv.ParseBool(settings["tls_skip_verify"]); err != nil {
		return errcode.Invalid("config.tls_skip_verify", "tls_skip_verify must be true or false")
	}
	return nil
}
