package consul

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

// KindName is the kind's name in the routes category.
const KindName = "consul"

// Kind declares the consul routes adapter: the edge routes to the passing
// instances of the apps' primary services in Consul's catalog. Opening it
// contacts nothing; cmd/svc runs the Watcher of the primary routes adapter.
func Kind(log *slog.Logger) adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategoryRoutes,
		Name:        KindName,
		Description: "Routes from Consul's catalog: the passing instances of each app's primary service (tags svc, svc-primary, svc-app=<app id>), watched with blocking queries",
		Settings: []adapters.Setting{
			{Name: "address", Description: "Consul's HTTP API address", Required: true, Example: "http://127.0.0.1:8500"},
			{Name: "datacenter", Description: "Datacenter to read; empty for the agent's own", Example: "dc1"},
			{Name: "ca_cert", Description: "PEM file of the CA that signed Consul's certificate (https addresses); empty for the system's roots", Example: "/etc/svc/consul-ca.pem"},
			{Name: "tls_skip_verify", Description: "Skip verifying Consul's certificate (testing only)", Default: "false"},
			{Name: "token", Description: "ACL token with service:read on svc's services and node:read on their nodes", Credential: true},
		},
		Validate: validate,
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			skip, _ := strconv.ParseBool(c.Settings["tls_skip_verify"])
			return New(Config{
				Address: c.Settings["address"], Datacenter: c.Settings["datacenter"],
				CACert: c.Settings["ca_cert"], TLSSkipVerify: skip,
				Token: c.Credentials["token"], Logger: log,
			})
		},
	}
}

func validate(settings map[string]string, _ []string) error {
	u, err := url.Parse(settings["address"])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return errcode.Invalid("config.address", "address must be an http or https URL such as http://127.0.0.1:8500")
	}
	if _, err := strconv.ParseBool(settings["tls_skip_verify"]); err != nil {
		return errcode.Invalid("config.tls_skip_verify", "tls_skip_verify must be true or false")
	}
	return nil
}
