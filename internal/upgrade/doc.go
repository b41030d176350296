// Package upgrade replaces the running svc binary with a new one in place
// (POST /api/v1/upgrade, svc upgrade FILE) and rolls it back when the new
// one does not come up.
//
// The pure core: Marker, the small record of the latest upgrade kept in
// the work directory (upgrade.json), and Decide, which says what a
// starting binary must do about it; CompareVersions; Verify and Sign, the
// Ed25519 signature over the SHA-256 digest of a binary. The thin shell:
// Check runs a candidate binary's "version" command; Swap and SwapBack
// rename binaries (atomic renames in the executable's directory); Trial
// starts the new binary as a child on the inherited listening socket and
// waits for its readiness line.
//
// The sequence (cmd/svc drives it; see docs/upgrade.md):
//
//  1. checking: the upload is written next to the executable, made
//     executable, run with "version" (it must print one, other than the
//     running one) and, with upgrade.signing_public_key set, its signature
//     verified. A refusal changes nothing.
//  2. restarting: the marker is written, the binary swapped in (the old one
//     kept as <exe>.prev), the current generation ended as a restart ends
//     it (requests in flight finish, the store closes, apps stop), and the
//     new binary started as a trial child. Ready within the timeout: the
//     child is stopped and the process execs the new binary (same PID).
//     Not ready: the child is killed, <exe>.prev renamed back, and the old
//     generation restarted in process; it emits svc.upgrade_failed.
//  3. on its start the new binary reads the marker (Decide), counts the
//     attempt, runs the store's migrations, and once serving emits
//     svc.upgraded and marks the upgrade done. A new binary that dies
//     after the exec and is started again (by systemd, say) finds its
//     attempt already counted, swaps back and execs the previous binary,
//     which emits svc.upgrade_failed.
//
// In a cluster of several voting servers an upload is a rollout instead
// (rollout.go, follow.go): the upgrade_rollouts table's one row, the
// binary kept in the work directory and served to the other servers as a
// blob (OpenBlob), and each server's Follow loop taking its turn in order
// (NextStep, pure and table-tested), the leader last after handing its
// leadership on. A server's step ends with its own upgrade's event.
//
// It owns the marker, the upgrade_rollouts table and the upgrades/
// directory of the work directory; it writes audit entries and events but
// no other table, and it never touches the store's files.
package upgrade
