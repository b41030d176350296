package notify

import (
	"strings"
	"testing"

	"github.com/svchost/svc/internal/events"
)

// TestDiskWarningSaysNearOrOver: a disk warning's subject says whether the
// app is near its limit or already over it (and what follows).
func TestDiskWarningSaysNearOrOver(t *testing.T) {
	app := &events.AppRef{ID: "app_1", Name: "Shop", Slug: "shop"}
	for _, c := range []struct {
		over bool
		want string
	}{
		{false, "Shop: near its disk limit"},
		{true, "Shop: over its disk limit; stopped at the next check if still over"},
	} {
		ev := &events.Event{Type: "app.disk_warning", App: app, Data: map[string]any{"used_bytes": 95, "limit_bytes": 100, "over": c.over}}
		m := Render(ev, "")
		if m.Subject != c.want || !strings.Contains(m.Body, "limit_bytes 100") {
			t.Errorf("over %v: subject %q, body %q; want subject %q", c.over, m.Subject, m.Body, c.want)
		}
	}
}
