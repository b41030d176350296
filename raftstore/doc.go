// Package raftstore owns the replicated state of svc: a hashicorp/raft node
// (bolt log store, file snapshots) whose state machine is a go-memdb
// database of tables that other packages declare with Table, and beside it
// a history store on disk (bbolt) for the history tables: what only grows
// (the audit log, the outbox, finished deploys' logs) is written by the
// same commands but kept hash-chained on disk, so that a node's memory
// follows its live state, not its age. Snapshots carry the history's head,
// not its rows; a node that lacks rows a snapshot names fetches them from
// the others and checks them against the chain.
//
// A write is a command: a transaction of operations on tables (Insert, Put,
// Delete, and the preconditions PutIf, DeleteIf, Check, CheckTable) that
// commits on every node or on none, or the retention command, the only way
// rows of an append-only table are ever removed. The FSM enforces what the
// tables declare (append-only, unique indexes, Validate and Retain rules)
// deterministically, refuses with a *TxnError that carries the public error,
// and panics on an entry it cannot decode rather than diverge. The list of
// command types is append-only.
//
// A node alone uses an in-memory transport and opens no port; nodes of a
// cluster share one TCP port for Raft and for forwarding, behind a mutual
// HMAC handshake under the cluster secret. Writes on a follower are
// forwarded to the leader; reads come from the local state, or through
// ConsistentRead when they must include every acknowledged write. A node
// that has just started or restored a snapshot has not caught up with the
// cluster until it has applied what the leader had applied when asked:
// CaughtUp says so (STORE_UNAVAILABLE until then), and whoever answers from
// the local state checks it first. Loops registered with RunWhileLeader run
// only while the node leads.
//
// Files too big for the Raft log stay on the node that has them and travel
// between nodes on the same port, behind the same handshake: a node serves
// the named blobs of the BlobSource in its Config, and FetchBlob asks the
// other servers of the configuration, the leader first, until one has a
// blob, streaming it length-prefixed and checksummed so that a cut transfer
// is an error. A node serves and fetches a few blobs at once; names are
// plain tokens (ValidBlobName), and a blob no server has is ErrBlobNotFound.
//
// It must not import any product package but internal/errcode, and knows no
// domain type: the tables' owners declare them, internal/schema lists them.
// It is the only package that imports raft, raft-boltdb, bbolt, go-memdb and
// go-hclog.
package raftstore
