package server

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/subscriptions"
)

type subscriptionsService interface {
	Create(ctx context.Context, c authz.Caller, req subscriptions.Request) (subscriptions.Created, error)
	List(c authz.Caller, appID string) ([]subscriptions.View, error)
	Get(c authz.Caller, id string) (subscriptions.View, error)
	Update(ctx context.Context, c authz.Caller, id string, req subscriptions.Patch) (subscriptions.View, error)
}

// The rest of the subscriptions service: its key, tests and delivery log.
type (
	subscriptionsRemover interface {
		Delete(ctx context.Context, c authz.Caller, id string) error
		RotateKey(ctx context.Context, c authz.Caller, id string) (subscriptions.RotatedKey, error)
		Test(ctx context.Context, c authz.Caller, id string) (subscriptions.DeliveryView, error)
	}
	deliveriesService interface {
		Deliveries(c authz.Caller, id string) ([]subscriptions.DeliveryView, error)
		Delivery(c authz.Caller, id, deliveryID string) (subscriptions.DeliveryView, error)
		Resend(ctx context.Context, c authz.Caller, id, deliveryID string) (subscriptions.DeliveryView, error)
	}
	subscriptionsAll interface {
		subscriptionsService
		subscriptionsRemover
		deliveriesService
	}
)

// Body types of the route table.
type (
	subscriptionRequest = subscriptions.Request
	subscriptionPatch   = subscriptions.Patch
	subscriptionCreated = subscriptions.Created
	subscriptionAnswer  struct {
		Subscription subscriptions.View `json:"subscription"`
	}
	deliveryAnswer struct {
		Delivery subscriptions.DeliveryView `json:"delivery"`
	}
)

func (s *Server) listEventKinds(c echo.Context) error {
	ks := events.Catalogue()
	slices.SortFunc(ks, func(a, b events.Kind) int { return strings.Compare(a.Name, b.Name) })
	return pagedList(c, ks, nil, func(k events.Kind) string { return k.Name }, ascending)
}

func (s *Server) postSubscription(c echo.Context) error {
	var req subscriptions.Request
	if err := bind(c, &req); err != nil {
		return err
	}
	out, err := s.d.Subscriptions.Create(c.Request().Context(), callerOf(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) listSubscriptions(c echo.Context) error {
	vs, err := s.d.Subscriptions.List(callerOf(c), c.QueryParam("app_id"))
	return pagedList(c, vs, err, subscriptions.View.ListKey, ascending)
}

func (s *Server) getSubscription(c echo.Context) error {
	v, err := s.d.Subscriptions.Get(callerOf(c), c.Param("subscriptionID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, subscriptionAnswer{Subscription: v})
}

func (s *Server) patchSubscription(c echo.Context) error {
	var req subscriptions.Patch
	if err := bind(c, &req); err != nil {
		return err
	}
	v, err := s.d.Subscriptions.Update(c.Request().Context(), callerOf(c), c.Param("subscriptionID"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, subscriptionAnswer{Subscription: v})
}

func (s *Server) deleteSubscription(c echo.Context) error {
	if err := s.d.Subscriptions.Delete(c.Request().Context(), callerOf(c), c.Param("subscriptionID")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) postRotateSubscriptionKey(c echo.Context) error {
	k, err := s.d.Subscriptions.RotateKey(c.Request().Context(), callerOf(c), c.Param("subscriptionID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, k)
}

func (s *Server) postTestSubscription(c echo.Context) error {
	d, err := s.d.Subscriptions.Test(c.Request().Context(), callerOf(c), c.Param("subscriptionID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, deliveryAnswer{Delivery: d})
}

func (s *Server) listDeliveries(c echo.Context) error {
	ds, err := s.d.Subscriptions.Deliveries(callerOf(c), c.Param("subscriptionID"))
	return pagedList(c, ds, err, subscriptions.DeliveryView.ListKey, descending)
}

func (s *Server) getDelivery(c echo.Context) error {
	d, err := s.d.Subscriptions.Delivery(callerOf(c), c.Param("subscriptionID"), c.Param("deliveryID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deliveryAnswer{Delivery: d})
}

func (s *Server) postResendDelivery(c echo.Context) error {
	d, err := s.d.Subscriptions.Resend(c.Request().Context(), callerOf(c), c.Param("subscriptionID"), c.Param("deliveryID"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, deliveryAnswer{Delivery: d})
}

var _ subscriptionsAll = (*subscriptions.Service)(nil)
