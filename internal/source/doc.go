// Package source owns fetching an app's source into its area of the work
// dir, <work_dir>/apps/<app id>/source/<checkout id>, with a current pointer
// swapped atomically: safe extraction of uploaded archives (tar, tar.gz,
// zip) and git clones of repositories, each refusing whatever could write
// outside the checkout or exhaust the host, and host policy's
// source_allowlist.
//
// A repository address is a URL chosen by anyone who may create an app, so
// a clone is kept from probing svc's own network (reach.go): it never
// connects to a loopback or link-local address, and to a private one only
// when source_allowlist names the host; the rule holds for the address
// actually connected to (http(s) through a proxy svc runs for the clone,
// redirects included; ssh pinned to a checked address). A repository that
// could not be fetched has one answer whatever the reason (Unfetchable),
// so that answers do not tell a closed port from an open one or from one
// asking for credentials; errors the API or an app's record shows name no
// server path, and the cause goes to the log with the request id.
//
// It also keeps every server of a cluster holding every app's checkout:
// the app's record names its checkout, the server that made it serves it
// packed to the others (OpenBlob), and a server that lacks it fetches it
// through the cluster (Peers) and extracts it with the same refusals and
// limits as an upload, or clones the repository again at the recorded
// commit (Ensure, SyncCheckouts).
//
// It must not detect or build: it hands a finished checkout to a hook
// (detection plugs in there) and records the app's source through the apps
// service. It must not import the server or any adapter, nor talk to other
// servers itself: the composition root gives it Peers, and routes the
// cluster's blob requests to OpenBlob.
package source
