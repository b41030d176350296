// Package slots owns how an app's slots are filled: provisioned by a slots
// adapter (a database made for the app), bound to something already
// running (a URL), or set to values; and the fill records, one per app and
// slot key, that the deploy path resolves into environment variables. A
// fill takes effect at the app's next deploy.
//
// Slots are declared by the app's spec (internal/spec); this package reads
// the pinned and the latest revision to validate a fill and to list what an
// app needs. It declares the Provisioner interface that slots adapters
// implement (postgres, in package slots/postgres) and must not import one:
// cmd/svc wires them in.
//
// Secret fields (passwords, URLs carrying them) are sealed by the keyring
// with the associated data slot/<app>/<key>/<field>; a credential never
// appears in the clear in the store, a response, an audit entry, an event
// or a log line. Only Resolve, for the deploy path, opens them.
package slots

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Fill modes.
const (
	ModeProvision = "provision"
	ModeBind      = "bind"
	ModeValue     = "value"
)

// Modes lists the fill modes.
func Modes() []string { return []string{ModeProvision, ModeBind, ModeValue} }

// Fill is how one slot of one app is filled, as the store keeps it. Fields
// hold what may be shown (host, port, database, username); Sealed holds the
// secret fields (password, url), each sealed by the keyring.
type Fill struct {
	ID        string            `json:"id"` // <app id>/<key>
	AppID     string            `json:"app_id"`
	Key       string            `json:"key"`
	Type      string            `json:"type"`
	Mode      string            `json:"mode"`
	AdapterID string            `json:"adapter_id,omitempty"` // the provisioner; provision mode only
	Fields    map[string]string `json:"fields,omitempty"`
	Sealed    map[string][]byte `json:"sealed,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// RowID is the ID of a fill's row.
func RowID(appID, key string) string { return appID + "/" + key }

// Fills is the table of slot fills.
var Fills = &raftstore.Table[Fill]{
	Name: "slot_fills",
	ID:   func(f *Fill) string { return f.ID },
	Indexes: []raftstore.Index[Fill]{
		{Name: "app", Key: func(f *Fill) (string, bool) { return f.AppID, true }},
		{Name: "adapter", Key: func(f *Fill) (string, bool) { return f.AdapterID, f.AdapterID != "" }},
	},
	Validate: func(_ *raftstore.Reader, _, f *Fill) error {
		if f == nil {
			return nil
		}
		if f.ID != RowID(f.AppID, f.Key) || CheckKey(f.Key) != nil || f.Type == "" || !slices.Contains(Modes(), f.Mode) ||
			(f.Mode == ModeProvision) != (f.AdapterID != "") {
			return errcode.New(errcode.ValidInvalid, "malformed slot fill %q", f.ID)
		}
		// A secret field is never kept in the clear, whatever the writer.
		for name := range f.Fields {
			if _, sealed := f.Sealed[name]; sealed || IsSecret(f.Type, name) {
				return errcode.New(errcode.ValidInvalid, "slot fill %q keeps the secret field %s in the clear", f.ID, name)
			}
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Fills} }

// keyRE: slot keys as a spec names them.
var keyRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)

// CheckKey validates a slot's key.
func CheckKey(key string) error {
	if !keyRE.MatchString(key) {
		return errcode.Invalid("key", "a slot's key is a letter followed by at most 62 letters, digits, '-' or '_'").
			WithRemedy("for example db")
	}
	return nil
}

// Field is one field a slot type's fill has.
type Field struct {
	Name string
	// Secret fields are sealed and never shown.
	Secret bool
}

// TypePostgres is the PostgreSQL slot type.
const TypePostgres = "postgres"

// knownTypes are the slot types whose fields this package knows: their
// secret fields are told apart from the others. A fill of any other type
// keeps every value it is given sealed, since nothing says which are
// secret.
var knownTypes = map[string][]Field{
	TypePostgres: {
		{Name: "host"}, {Name: "port"}, {Name: "database"}, {Name: "username"},
		{Name: "password", Secret: true}, {Name: "url", Secret: true},
	},
}

// FieldsOf lists the fields of a known slot type, and false for another.
func FieldsOf(typ string) ([]Field, bool) {
	fs, ok := knownTypes[typ]
	return slices.Clone(fs), ok
}

// IsSecret says whether a field of a slot type is secret: a known type's
// secret fields, and every field of an unknown type.
func IsSecret(typ, field string) bool {
	fs, ok := knownTypes[typ]
	if !ok {
		return true
	}
	i := slices.IndexFunc(fs, func(f Field) bool { return f.Name == field })
	return i < 0 || fs[i].Secret
}

// ProvisionRequest names the slot a resource is provisioned for.
type ProvisionRequest struct {
	AppID   string
	AppSlug string
	Key     string
	// Password, when set, is the password the resource's credentials keep
	// (a re-provision must not break the app running with them); empty
	// draws a new one.
	Password string
	// Previous holds the shown fields of the fill this provision replaces,
	// when the same adapter made it: the resource it names is reused if it
	// is still the slot's (the app's slug may have changed since).
	Previous map[string]string
}

// Provisioned is what a provisioner made: fields that may be shown, and
// secret ones (sealed before they are stored).
type Provisioned struct {
	Fields       map[string]string
	SecretFields map[string]string
}

// Provisioner is a slots adapter: it makes resources of one slot type.
type Provisioner interface {
	// Type is the slot type it provisions, for example "postgres".
	Type() string
	// Provision makes the resource of one slot of one app, or finds the
	// one it made before and resets its credentials: it is idempotent, so
	// a retry after a failure neither fails nor makes a second resource.
	Provision(ctx context.Context, req ProvisionRequest) (Provisioned, error)
	// Deprovision removes the resource Provision made for the slot, which
	// the fill's fields name; one that is gone already is no error. svc
	// never calls it on its own: data is not dropped automatically.
	Deprovision(ctx context.Context, req ProvisionRequest, fields map[string]string) error
}
