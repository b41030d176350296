// Package postgres is the postgres slots adapter: it provisions, for a slot
// of type postgres, a login role and a database owned by it on a
// PostgreSQL server that the adapter reaches with an administrator's
// credentials (a superuser, or a role with CREATEROLE and CREATEDB). It is
// the only package that imports the PostgreSQL driver (pgx).
//
// Names: role and database are both svc_<app slug>_<slot key>, reduced to
// [a-z0-9_] and at most 63 bytes (a longer name is cut and ends in a hash
// of the app and key). Each role carries a comment naming the app and slot
// it was made for; a role or database of that name that was not made for
// this slot is never taken over: the name gets the hash suffix instead.
// Provisioning is idempotent: what exists is reused and the password set
// again. The password (32 random bytes) goes to the server only as a
// SCRAM-SHA-256 verifier computed here, so it is not in the server's
// statement log either.
//
// Errors are translated by SQLSTATE class and error type, never by message
// text: an unreachable or overloaded server is ADAPTER_UNAVAILABLE, a
// refusal (authentication, privileges, a missing database) ADAPTER_FAILED.
// No error or log line carries a password. Deprovision exists for an
// explicit request; svc never drops a database on its own.
//
// This package must not touch the store, HTTP or any other adapter.
package postgres
