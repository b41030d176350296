package postgres

import (
	"context"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/slots"
)

// Interface guards.
var (
	_ slots.Provisioner = (*Postgres)(nil)
	_ adapters.Instance = (*Postgres)(nil)
	_ io.Closer         = (*Postgres)(nil)
)

// Kind declares the postgres slots adapter.
func Kind() adapters.Kind {
	return adapters.Kind{
		Category: adapters.CategorySlots,
		Name:     "postgres",
		Description: "Provisions a postgres slot as a login role and a database owned by it, both named svc_<app slug>_<slot key>, " +
			"on a PostgreSQL server reached as an administrator (a superuser, or a role with CREATEROLE and CREATEDB)",
		Settings: []adapters.Setting{
			{Name: "host", Description: "Host name or address of the PostgreSQL server, as this server reaches it", Required: true, Example: "db.internal"},
			{Name: "port", Description: "Port of the PostgreSQL server", Default: "5432"},
			{Name: "database", Description: "Database the adapter connects to as administrator", Default: "postgres"},
			{Name: "username", Description: "Administrator role: a superuser, or a role with CREATEROLE and CREATEDB", Required: true, Example: "svc_admin"},
			{Name: "sslmode", Description: "libpq sslmode of the adapter's connections and of the URLs apps receive: " + strings.Join(slots.SSLModes(), ", "), Default: "prefer"},
			{Name: "ca_cert", Description: "PEM file of the CA that signed the server's certificate (sslmode verify-ca or verify-full); empty for the system's roots", Example: "/etc/svc/postgres-ca.pem"},
			{Name: "app_host", Description: "Host apps reach the server at, when it differs from host; empty for host", Example: "postgres.apps.internal"},
			{Name: "password", Description: "The administrator's password", Credential: true, Required: true},
		},
		Validate: validate,
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			cfg, err := configOf(c)
			if err != nil {
				return nil, err
			}
			return New(cfg)
		},
	}
}

func validate(settings map[string]string, _ []string) error {
	_, err := configOf(adapters.Config{Settings: settings})
	return err
}

// Config is what the adapter connects with.
type Config struct {
	Host     string
	Port     int
	Database string
	Username string
	Password string
	SSLMode  string
	CACert   string
	// AppHost is the host the URLs apps receive name; empty for Host.
	AppHost string
}

func configOf(c adapters.Config) (Config, error) {
	s := c.Settings
	cfg := Config{Host: s["host"], Database: s["database"], Username: s["username"], SSLMode: s["sslmode"],
		CACert: s["ca_cert"], AppHost: s["app_host"], Password: c.Credentials["password"]}
	if cfg.Database == "" {
		cfg.Database = "postgres"
	}
	if cfg.SSLMode == "" {
		cfg.SSLMode = "prefer"
	}
	port := s["port"]
	if port == "" {
		port = "5432"
	}
	var err error
	cfg.Port, err = strconv.Atoi(port)
	switch {
	case cfg.Host == "" || strings.ContainsAny(cfg.Host, "/,@?# "):
		return Config{}, errcode.Invalid("config.host", "host must be a host name or address such as db.internal")
	case err != nil || cfg.Port < 1 || cfg.Port > 65535:
		return Config{}, errcode.Invalid("config.port", "port must be a number from 1 to 65535")
	case cfg.Username == "":
		return Config{}, errcode.Invalid("config.username", "username names the administrator role")
	case !slices.Contains(slots.SSLModes(), cfg.SSLMode):
		return Config{}, errcode.Invalid("config.sslmode", "sslmode is one of %s", strings.Join(slots.SSLModes(), ", "))
	case cfg.AppHost != "" && strings.ContainsAny(cfg.AppHost, "/,@?# "):
		return Config{}, errcode.Invalid("config.app_host", "app_host must be a host name or address")
	}
	return cfg, nil
}

func (c Config) addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

func (c Config) appHost() string {
	if c.AppHost != "" {
		return c.AppHost
	}
	return c.Host
}
