// Package source owns fetching an app's source into its area of the work
// dir, <work_dir>/apps/<app id>/source/<checkout id>, with a current pointer
// swapped atomically: safe extraction of uploaded archives (tar, tar.gz,
// zip) and git clones of repositories, each refusing whatever could write
// outside the checkout or exhaust the host, and host policy's
// source_allowlist.
//
// It must not detect or build: it hands a finished checkout to a hook
// (detection plugs in there) and records the app's source through the apps
// service. It must not import the server or any adapter.
package source
