package edge

import (
	"context"

	"github.com/svchost/svc/internal/adapters"
)

// RoutesID is the well-known ID of the in-process route table.
const RoutesID = "adp_builtin_routes"

// RoutesKind declares the in-process route table: the embedded default
// source of routes, fed by the runtime on this server.
func RoutesKind() adapters.Kind {
	return adapters.Kind{
		Category:    adapters.CategoryRoutes,
		Name:        "builtin",
		Description: "Routes kept in this server's memory, fed by the runtime that runs the apps",
		Default:     true,
		DefaultID:   RoutesID,
		Open: func(context.Context, adapters.Config) (adapters.Instance, error) {
			return routesInstance{}, nil
		},
	}
}

type routesInstance struct{}

var _ adapters.Instance = routesInstance{}

func (routesInstance) Check(context.Context) error { return nil }

func (routesInstance) Capabilities() map[string]any {
	return map[string]any{"modes": []string{"port", "subdomain", "path"}, "health_filtered": true}
}
