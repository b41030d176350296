// Package identity owns accounts: who can sign in, and whether the
// installation still waits for its first administrator. Sessions, groups,
// roles and tokens join it with the identity capability.
//
// It must not touch HTTP or adapters; it declares its tables and answers
// questions about them.
package identity

import (
	"strings"
	"time"

	"github.com/svchost/svc/raftstore"
)

// User is an account. It never holds a password or its hash in a field that
// is returned by the API.
type User struct {
	ID                 string    `json:"id"`
	Username           string    `json:"username"`
	DisplayName        string    `json:"display_name"`
	Email              string    `json:"email"`
	Status             string    `json:"status"`
	MustChangePassword bool      `json:"must_change_password"`
	RoleID             *string   `json:"role_id"`
	Source             string    `json:"source"`
	CreatedAt          time.Time `json:"created_at"`
}

// Users is the account table; usernames are unique regardless of case.
var Users = &raftstore.Table[User]{
	Name: "users",
	ID:   func(u *User) string { return u.ID },
	Indexes: []raftstore.Index[User]{
		{Name: "username", Unique: true, Key: func(u *User) (string, bool) {
			return strings.ToLower(u.Username), u.Username != ""
		}},
	},
}

// Reader is what the service needs of the store to answer questions.
type Reader interface {
	Read() *raftstore.Reader
}

var _ Reader = (*raftstore.Store)(nil)

// Service answers identity questions.
type Service struct {
	store Reader
}

// New returns a service over store.
func New(store Reader) *Service { return &Service{store: store} }

// SetupRequired reports whether the installation waits for its first
// administrator: true until any account exists.
func (s *Service) SetupRequired() bool {
	items, _ := Users.List(s.store.Read(), raftstore.Query{Limit: 1})
	return len(items) == 0
}
