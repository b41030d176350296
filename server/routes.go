package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/icon"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/launcher"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// route is one endpoint. The table below registers the routes, and the
// reference and the OpenAPI document are generated from the same table, so
// they describe exactly what the binary serves.
type route struct {
	method string
	path   string // the specification's syntax: /api/v1/apps/{appID}
	// op names the route for its clients as <resource>_<verb>: the tool
	// of the tool server (apps_list) and the CLI command (svc apps list).
	op string
	// query lists the query parameters the route reads, paging aside.
	query []queryParam
	// noTool and noCommand say why a route has no tool or no CLI command
	// (a browser's redirect, a cookie of a browser's sign-in): every other
	// route of the API has both, which a test of the binary checks.
	noTool, noCommand string
	// upload is the kind of a raw request body (archive, image); the
	// route then has no request type.
	upload  string
	access  access
	verb    authz.Verb
	summary string
	handler echo.HandlerFunc
	// action is the audit action a successful state-changing request of
	// this route writes (exactly one entry).
	action string
	// beforePasswordChange routes stay open to an account that must change
	// its password first.
	beforePasswordChange bool
	// idempotent routes honour Idempotency-Key.
	idempotent bool
	// paging is how a route answering a list (an items array) pages it:
	// every such route must say (register refuses one that does not).
	paging paging
	// bodyLimit overrides the default request body cap.
	bodyLimit int64
	// bodyTooLarge, if set, refuses a body over bodyLimit instead of the
	// generic 413 (an image over 256 KB is 400 VALID_INVALID, as API.md says).
	bodyTooLarge func() *errcode.Error
	// disabledCode, if set, is how the route refuses everyone, the owner
	// included, when host policy disables its verb (disabled_verbs, and
	// agent_disabled_verbs for agent tokens): POLICY_EXEC_DISABLED for the
	// terminal, where the floor alone would answer PERM_VERB_REQUIRED.
	disabledCode errcode.Code
	// request and response are zero values of the body types, for the
	// OpenAPI document; status is the success status.
	request  any
	response any
	status   int
	// produces is the success answer's content type when it is not JSON
	// (an event stream); response then describes one event's data.
	produces string
	// operational endpoints live outside the API's base path.
	operational bool
	// stateless routes read nothing of the replicated state (liveness,
	// readiness, metrics): they answer while this node's store catches up,
	// when every other route answers STORE_UNAVAILABLE (caughtUp).
	stateless bool
}

const basePath = "/api/v1"

// mcpSummary describes the tool server's endpoint.
const mcpSummary = "Tool server for AI assistants (MCP over streamable HTTP), one tool per API operation as GET /api/v1/reference lists them (tools). " +
	"A bearer token only (a session cookie does not count): without a valid one 401 with WWW-Authenticate: Bearer before any MCP exchange; " +
	"a session is bound to the token that opened it. Each tool calls the API in process with that token, so every verb, policy floor " +
	"(agent_disabled_verbs for an agent token) and audit entry applies as for a direct call; requests up to 16 MiB"

// consolePage begins the summary of each of the console's pages.
const consolePage = "A page of the console (Deps.Console; HTML, the same index.html for every page, whose script shows the page of the address; Content-Security-Policy allowing only the console's own files and API): "

// queryParam is a query parameter a route reads: its name, its JSON
// Schema type (string, integer, boolean; an array of strings when it may
// repeat) and what it does.
type queryParam struct {
	name, typ, doc string
	repeat         bool
}

// Shorthands for the table.
const (
	get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
	api                        = basePath
)

// routeTable lists every endpoint the server answers. One line per route.
func (s *Server) routeTable() []route {
	return []route{
		// Setup, sessions and personal.
		{method: get, path: api + "/setup", op: "setup_get", access: accessPublic, summary: "Says whether the installation waits for its first administrator", handler: s.getSetup, response: setupStatusDTO{}},
		{method: post, path: api + "/setup", op: "setup_create", access: accessPublic, summary: "Creates the first account as administrator and signs it in; refused once any account exists", handler: s.postSetup, action: "user.create", request: setupRequest{}, response: userAnswer{}, status: 201},
		{method: post, path: api + "/sessions", op: "sessions_create", noCommand: "none of its own: svc login signs in with a password and keeps a token, as a session is a browser's", noTool: "a tool server calls with a token; a password sign-in makes a browser's session (svc login turns one into a token)", access: accessPublic, summary: "Sign in with a username and password; sets the session cookie", handler: s.postSession, action: "session.create", request: signInRequest{}, response: userAnswer{}},
		{method: del, path: api + "/sessions", op: "sessions_delete", noTool: "ends a browser's session; a tool server holds a token, which tokens_delete revokes", noCommand: "ends a browser's session; the CLI holds a token, which svc logout revokes", access: accessSignedIn, summary: "Sign out, ending this session", handler: s.deleteSession, action: "session.delete", beforePasswordChange: true, status: 204},
		{method: get, path: edge.HandoffEndpoint, op: "edge_handoff", query: []queryParam{{name: "next", typ: "string", doc: "the app page"}, {name: "state", typ: "string", doc: "the edge's state"}}, noTool: "a browser's redirect through the edge's sign-in", noCommand: "a browser's redirect through the edge's sign-in", access: accessPublic, summary: "The handoff that signs a browser in to an app on the app's own origin (the edge sends browsers here): query next (the app page, an address of one of this installation's apps) and state (the edge's). A signed-in caller who may open the app, or a browser showing the app's passcode admission, is sent (303) to the app's /.svc/handoff with a single-use code valid 60 seconds; anyone else to the console's /login or /passcode/<appID> page and back. Top-level navigations only; a token is refused (send it to the app)", handler: s.getHandoff, status: http.StatusSeeOther},
		{method: get, path: api + "/edge/next", op: "edge_next", query: []queryParam{{name: "next", typ: "string", doc: "what the page was given"}}, noTool: "for the console's pages, deciding where a browser goes next", noCommand: "for the console's pages, deciding where a browser goes next", access: accessPublic, summary: "Where a console page (sign-in, passcode, setup, a password change) may send the browser once done, as the edge decides: query next, answered as {next} to follow when it is a path of this console (given back as a path) or an address of one of this installation's apps; VALID_INVALID for anything else (another host, //host, a backslash, javascript:, more than one next), so that no page is an open redirect", handler: s.getNextPage, response: nextPageDTO{}},
		{method: get, path: api + "/me", op: "me_get", access: accessSignedIn, summary: "The caller and the installation-level verbs held", handler: s.getMe, beforePasswordChange: true, response: meDTO{}},
		{method: post, path: api + "/me/password", op: "me_set_password", access: accessSignedIn, summary: "Change own password; ends every other session", handler: s.postMyPassword, action: "user.password.change", beforePasswordChange: true, request: changePasswordRequest{}, status: 204},

		// Tokens.
		{method: get, path: api + "/tokens", op: "tokens_list", access: accessSignedIn, paging: pagedCursor, summary: "The caller's own tokens; paged with limit and cursor", handler: s.listTokens, response: list[tokenDTO]{}},
		{method: post, path: api + "/tokens", op: "tokens_create", access: accessSignedIn, summary: "Mint a delegated token; the secret is returned once", handler: s.postToken, action: "token.create", request: tokenRequest{}, response: tokenAnswer{}, status: 201},
		{method: get, path: api + "/tokens/service", op: "tokens_list_service", access: accessVerb, verb: authz.InstallTokensManage, paging: pagedCursor, summary: "List service tokens; paged with limit and cursor", handler: s.listServiceTokens, response: list[tokenDTO]{}},
		{method: post, path: api + "/tokens/service", op: "tokens_create_service", access: accessVerb, verb: authz.InstallTokensManage, summary: "Mint a service token; the secret is returned once", handler: s.postServiceToken, action: "token.create", request: tokenRequest{}, response: tokenAnswer{}, status: 201},
		{method: del, path: api + "/tokens/{tokenID}", op: "tokens_delete", access: accessSelf, verb: authz.InstallUsersManage, summary: "Revoke a token: own, no verb; a service token, install.tokens.manage; anyone else's, install.users.manage. Without the verb PERM_VERB_REQUIRED; a token that does not exist is NOT_FOUND only to a holder of both verbs", handler: s.deleteToken, action: "token.revoke", status: 204},

		// Accounts.
		{method: get, path: api + "/users", op: "users_list", access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "Accounts; paged with limit and cursor", handler: s.listUsers, response: list[userDTO]{}},
		{method: post, path: api + "/users", op: "users_create", access: accessVerb, verb: authz.InstallUsersManage, summary: "Create an account; without a password one is generated and returned once; its email (verified) must be no other account's (409 STATE_INVALID, details.field email)", handler: s.postUser, action: "user.create", request: createUserRequest{}, response: userAnswer{}, status: 201},
		{method: get, path: api + "/users/{userID}/apps", op: "users_apps", access: accessSelf, verb: authz.InstallView, paging: pagedCursor, summary: "Apps the account has a grant on (to itself or to one of its groups), among those the caller can see: the strongest role_id and where it comes from (via direct or group, group_id), can_open, can_manage; own account needs no verb, another's install.view (PERM_VERB_REQUIRED without it, whether or not the account exists); paged with limit and cursor", handler: s.getUserApps, response: list[identity.AppAccess]{}},
		{method: get, path: api + "/users/{userID}", op: "users_get", access: accessSelf, verb: authz.InstallView, summary: "One account; own account needs no verb, another's install.view (PERM_VERB_REQUIRED without it, whether or not the account exists)", handler: s.getUser, beforePasswordChange: true, response: userAnswer{}},
		{method: patch, path: api + "/users/{userID}", op: "users_update", access: accessSelf, verb: authz.InstallUsersManage, summary: "Change username, display name, email or status; own display name and email need no verb, anything else install.users.manage (PERM_VERB_REQUIRED without it, whether or not the account exists). An email another account has (in any case) is refused 409 STATE_INVALID (details.field email); email_verified is true when a holder of install.users.manage sets the address, false when the person does", handler: s.patchUser, action: "user.update", request: patchUserRequest{}, response: userAnswer{}},
		{method: del, path: api + "/users/{userID}", op: "users_delete", access: accessVerb, verb: authz.InstallUsersManage, summary: "Delete an account, its sessions, delegated tokens, memberships and grants", handler: s.deleteUser, action: "user.delete", status: 204},
		{method: put, path: api + "/users/{userID}/role", op: "users_set_role", access: accessVerb, verb: authz.InstallUsersManage, summary: "Give an installation role", handler: s.putUserRole, action: "user.role.set", request: roleRequest{}, response: userAnswer{}},
		{method: del, path: api + "/users/{userID}/role", op: "users_unset_role", access: accessVerb, verb: authz.InstallUsersManage, summary: "Remove the installation role; the last administrator cannot be demoted", handler: s.deleteUserRole, action: "user.role.remove", status: 204},
		{method: post, path: api + "/users/{userID}/password", op: "users_reset_password", access: accessVerb, verb: authz.InstallUsersManage, summary: "Reset another local account's password; ends all its sessions", handler: s.postUserPassword, action: "user.password.reset", request: resetPasswordRequest{}, status: 204},
		{method: post, path: api + "/passwords/generate", op: "passwords_generate", access: accessVerb, verb: authz.InstallUsersManage, summary: "A random password of 18 to 22 characters; stores nothing", handler: s.postGeneratePassword, response: passwordDTO{}},

		// Groups, roles, verbs.
		{method: get, path: api + "/groups", op: "groups_list", access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "Groups; paged with limit and cursor", handler: s.listGroups, response: list[identity.Group]{}},
		{method: post, path: api + "/groups", op: "groups_create", access: accessVerb, verb: authz.InstallUsersManage, summary: "Create a group", handler: s.postGroup, action: "group.create", request: groupRequest{}, response: groupDTO{}, status: 201},
		{method: put, path: api + "/groups/{groupID}/members", op: "groups_set_members", access: accessVerb, verb: authz.InstallUsersManage, summary: "Set the whole member list", handler: s.putMembers, action: "group.members.set", request: membersRequest{}, response: groupDTO{}},
		{method: put, path: api + "/groups/{groupID}/members/{userID}", op: "groups_add_member", access: accessVerb, verb: authz.InstallUsersManage, summary: "Add one member", handler: s.putMember, action: "group.member.add", response: groupDTO{}},
		{method: del, path: api + "/groups/{groupID}/members/{userID}", op: "groups_remove_member", access: accessVerb, verb: authz.InstallUsersManage, summary: "Remove one member; refused if nobody would remain able to manage accounts", handler: s.deleteMember, action: "group.member.remove", response: groupDTO{}},
		{method: put, path: api + "/groups/{groupID}/role", op: "groups_set_role", access: accessVerb, verb: authz.InstallUsersManage, summary: "Give every member an installation role", handler: s.putGroupRole, action: "group.role.set", request: roleRequest{}, response: groupDTO{}},
		{method: del, path: api + "/groups/{groupID}/role", op: "groups_unset_role", access: accessVerb, verb: authz.InstallUsersManage, summary: "Remove the group's role; refused if nobody would remain able to manage accounts", handler: s.deleteGroupRole, action: "group.role.remove", response: groupDTO{}},
		{method: get, path: api + "/groups/{groupID}/apps", op: "groups_apps", access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "The group's app grants, among the apps the caller can see: its role on each (role_id), whether members can open the app through it (can_open), can_manage. Share an app with a group through POST /apps/{appID}/grants; paged with limit and cursor", handler: s.getGroupApps, response: list[identity.AppAccess]{}},
		{method: del, path: api + "/groups/{groupID}", op: "groups_delete", access: accessVerb, verb: authz.InstallUsersManage, summary: "Delete a group and everything shared with it", handler: s.deleteGroup, action: "group.delete", status: 204},
		{method: get, path: api + "/roles", op: "roles_list", query: []queryParam{{name: "scope", typ: "string", doc: "install (default), app or all"}}, access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "Built-in and custom roles; scope install (default), app or all; paged with limit and cursor", handler: s.listRoles, response: list[authz.Role]{}},
		{method: post, path: api + "/roles", op: "roles_create", access: accessVerb, verb: authz.InstallUsersManage, summary: "Compose a custom role from verbs", handler: s.postRole, action: "role.create", request: createRoleRequest{}, response: roleDTO{}, status: 201},
		{method: del, path: api + "/roles/{roleID}", op: "roles_delete", access: accessVerb, verb: authz.InstallUsersManage, summary: "Delete a custom role and every grant of it", handler: s.deleteRole, action: "role.delete", status: 204},
		{method: get, path: api + "/verbs", op: "verbs_list", access: accessVerb, verb: authz.InstallView, summary: "Every verb by scope", handler: s.getVerbs, response: verbsDTO{}},

		// Installation.
		{method: get, path: api + "/policy", op: "policy_get", access: accessVerb, verb: authz.InstallView, summary: "Host policy, and the settings fixed at startup", handler: s.getPolicy, response: policyDTO{}},
		{method: put, path: api + "/policy", op: "policy_set", access: accessVerb, verb: authz.InstallPolicyManage, summary: "Replace host policy; a setting fixed at startup is refused", handler: s.putPolicy, action: "policy.update", request: policyRequest{}, response: policyDTO{}},
		{method: post, path: api + "/policy/preview", op: "policy_preview", access: accessVerb, verb: authz.InstallPolicyManage, summary: "Which apps a candidate policy would block", handler: s.postPolicyPreview, request: policyRequest{}, response: previewDTO{}},
		{method: get, path: api + "/config", op: "config_get", access: accessVerb, verb: authz.InstallView, summary: "Startup configuration: every non-secret setting with value and origin, and the policy fields fixed at startup", handler: s.getConfig, response: configDTO{}},
		{method: post, path: api + "/restart", op: "server_restart", access: accessVerb, verb: authz.InstallAdaptersMgmt, summary: "Finishes requests in flight, restarts, reloads adapters and config file (environment is not re-read); returns before restart; apps are unreachable for some seconds; started_at changes afterwards", handler: s.postRestart, action: "server.restart", response: restartDTO{}, status: 202},
		{method: get, path: api + "/adapters", op: "adapters_list", access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "Configured adapters and the embedded defaults, with live capabilities and health; names set credentials, never values; per-adapter pending_restart, top-level restart_needed and started_at; paged with limit and cursor", handler: s.listAdapters, response: adapters.List{}},
		{method: get, path: api + "/adapters/kinds", op: "adapters_kinds", access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "Adapter kinds this build can run, by category then name, and the settings each takes (credential, required, default or example); paged with limit and cursor", handler: s.listAdapterKinds, response: kindList{}},
		{method: post, path: api + "/adapters", op: "adapters_configure", access: accessVerb, verb: authz.InstallAdaptersMgmt, summary: "Configure an adapter in place: the one adapter_id names, else the category and kind's own (201 when it is made; several of one kind need adapter_id), or another of the kind with new: true; settings in config, write-only credentials in credentials (stored encrypted, never shown; one left out keeps its value, null removes it); pending_restart until the next restart loads it", handler: s.postAdapter, action: "adapter.configure", request: configureAdapterRequest{}, response: adapterAnswer{}, status: 201},
		{method: del, path: api + "/adapters/{adapterID}", op: "adapters_delete", access: accessVerb, verb: authz.InstallAdaptersMgmt, summary: "Delete a configured adapter nothing depends on; refused (409 STATE_INVALID, details.dependents naming each dependent and its remedy) while it holds secrets, provisioned slot fills, accounts or groups come from it, apps run or deploy on it, a pinned spec names it, or it is the primary this server loaded; built-in adapters are never deleted; emits adapter.configured; it stays loaded, listed as deleted, until the next restart", handler: s.deleteAdapter, action: "adapter.delete", status: 204},
		{method: get, path: api + "/keyring", op: "keyring_get", access: accessVerb, verb: authz.InstallView, summary: "The data keys that seal secrets and credentials (IDs and dates, never material); the first is current", handler: s.getKeyring, response: keyringDTO{}},
		{method: post, path: api + "/keyring/rotate", op: "keyring_rotate", access: accessVerb, verb: authz.InstallAdaptersMgmt, summary: "Add a data key that seals everything from now on, and re-seal every sealed value under it", handler: s.postKeyringRotate, action: "keyring.rotate", response: keyring.Rotation{}},
		{method: get, path: api + "/edge/keys", op: "edge_keys_list", access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "The Ed25519 keys that sign the identity assertions apps receive, newest (current) first: kid, public key, created_at, retired_at, whether published in the JWKS; never private material; paged with limit and cursor", handler: s.listEdgeKeys, response: list[edge.KeyInfo]{}},
		{method: post, path: api + "/edge/keys/rotate", op: "edge_keys_rotate", access: accessVerb, verb: authz.InstallAdaptersMgmt, summary: "Add a signing key that signs every assertion from now on; previous keys stay published until no assertion they signed can be valid (120 s plus a margin), then are retired. Also done every 30 days on its own. Answers every key, as GET /edge/keys lists them", handler: s.postEdgeKeysRotate, action: "edge_key.rotate", response: edgeKeysDTO{}},
		{method: get, path: api + "/audit", op: "audit_list", query: []queryParam{{name: "action", typ: "string", doc: "only this action (app.create)"}, {name: "principal_id", typ: "string", doc: "only entries by this principal"}, {name: "principal_kind", typ: "string", doc: "user, token, system or anonymous"}, {name: "app_id", typ: "string", doc: "only entries about this app"}, {name: "target_kind", typ: "string", doc: "only entries on this kind of target"}, {name: "target_id", typ: "string", doc: "only entries on this target"}, {name: "involving", typ: "string", doc: "entries whose principal or target is this ID"}, {name: "since", typ: "string", doc: "from this time on (RFC 3339)"}, {name: "until", typ: "string", doc: "before this time (RFC 3339)"}}, access: accessVerb, verb: authz.InstallAuditRead, paging: pagedBefore, summary: "Audit log, newest first; filters action, principal_id, principal_kind, app_id, target_kind, target_id, involving, since, until; pages with before", handler: s.getAudit, response: auditDTO{}},
		// Events: the catalogue, subscriptions and their delivery logs. The
		// service decides who may manage a subscription (its owner, or a
		// holder of install.events.manage).
		{method: get, path: api + "/events", op: "events_list", access: accessSignedIn, paging: pagedCursor, summary: "The event catalogue, by name: every event with its scope (app, install, or app_or_install), meaning and data fields; subscriptions filter on these names; paged with limit and cursor", handler: s.listEventKinds, response: list[events.Kind]{}},
		{method: post, path: api + "/subscriptions", op: "subscriptions_create", access: accessSignedIn, summary: "Create an event subscription: app.view on the app for an app's (app_id), install.events.manage for an install-wide one; events are exact names, prefixes (deploy.*) or *, each matching some event; url (a webhook; a literal private, loopback or link-local address is refused unless host policy allow_private_webhooks is on) or adapter_id (a notification adapter); webhook shaping with method, content_type, headers (values write-only) and payload_template (checked against a sample event). The signing key is answered once", handler: s.postSubscription, action: "subscription.create", request: subscriptionRequest{}, response: subscriptionCreated{}, status: 201},
		{method: get, path: api + "/subscriptions", op: "subscriptions_list", query: []queryParam{{name: "app_id", typ: "string", doc: "only this app's subscriptions"}}, access: accessSignedIn, paging: pagedCursor, summary: "The caller's own subscriptions, or every one with install.events.manage; query app_id narrows to one app's; paged with limit and cursor", handler: s.listSubscriptions, response: list[subscriptions.View]{}},
		{method: get, path: api + "/subscriptions/{subscriptionID}", op: "subscriptions_get", access: accessSelf, verb: authz.InstallEventsManage, summary: "One subscription: header names, never values; signing keys' dates, never the keys. Its owner, or install.events.manage (PERM_VERB_REQUIRED otherwise, whether or not it exists)", handler: s.getSubscription, response: subscriptionAnswer{}},
		{method: patch, path: api + "/subscriptions/{subscriptionID}", op: "subscriptions_update", access: accessSelf, verb: authz.InstallEventsManage, summary: "Change any field of the create body (headers replace the whole set), or enabled: false turns it off, true back on and clears its failure record. Its owner, or install.events.manage", handler: s.patchSubscription, action: "subscription.update", request: subscriptionPatch{}, response: subscriptionAnswer{}},
		{method: del, path: api + "/subscriptions/{subscriptionID}", op: "subscriptions_delete", access: accessSelf, verb: authz.InstallEventsManage, summary: "Delete a subscription and its delivery log. Its owner, or install.events.manage", handler: s.deleteSubscription, action: "subscription.delete", status: 204},
		{method: post, path: api + "/subscriptions/{subscriptionID}/rotate-key", op: "subscriptions_rotate_key", access: accessSelf, verb: authz.InstallEventsManage, summary: "A new signing key, answered once; for 24 hours the replaced key signs too (Svc-Signature: v1=<new> v1=<old>). Its owner, or install.events.manage", handler: s.postRotateSubscriptionKey, action: "subscription.rotate_key", response: subscriptions.RotatedKey{}},
		{method: post, path: api + "/subscriptions/{subscriptionID}/test", op: "subscriptions_test", access: accessSelf, verb: authz.InstallEventsManage, summary: "Send a subscription.test event to this subscription only, whatever its filter, at once; answers the delivery (202), whose attempts GET …/deliveries/{deliveryID} shows. Its owner, or install.events.manage", handler: s.postTestSubscription, action: "subscription.test", response: deliveryAnswer{}, status: 202},
		{method: get, path: api + "/subscriptions/{subscriptionID}/deliveries", op: "deliveries_list", access: accessSelf, verb: authz.InstallEventsManage, paging: pagedCursor, summary: "The delivery log, newest first: each delivery's state (pending, delivered, retry_scheduled, failed), attempts (status_code, error, duration_ms) and next attempt; paged with limit and cursor. Its owner, or install.events.manage", handler: s.listDeliveries, response: list[subscriptions.DeliveryView]{}},
		{method: get, path: api + "/subscriptions/{subscriptionID}/deliveries/{deliveryID}", op: "deliveries_get", access: accessSelf, verb: authz.InstallEventsManage, summary: "One delivery with every attempt. Its owner, or install.events.manage", handler: s.getDelivery, response: deliveryAnswer{}},
		{method: post, path: api + "/subscriptions/{subscriptionID}/deliveries/{deliveryID}/resend", op: "deliveries_resend", access: accessSelf, verb: authz.InstallEventsManage, summary: "A new attempt on a delivery now: the same event and Svc-Event-Id; a delivery that ended gets one attempt, one waiting for a retry is attempted now (202). Its owner, or install.events.manage", handler: s.postResendDelivery, action: "delivery.resend", response: deliveryAnswer{}, status: 202},
		{method: get, path: api + "/reference", op: "reference_get", access: accessSignedIn, summary: "Generated reference of endpoints, CLI commands, tool names and error codes", handler: s.getReference, response: referenceDTO{}},
		{method: get, path: api + "/openapi.json", op: "openapi_get", access: accessSignedIn, summary: "OpenAPI 3.1 document of the API", handler: s.getOpenAPI, response: map[string]any{}},

		// The launcher: apps the caller can open, favorites and sections.
		{method: get, path: api + "/me/apps", op: "launcher_list", access: accessSignedIn, paging: pagedCursor, summary: "Apps the caller can open (not the apps they administer), favorites first, with section_id; and the caller's sections; the apps paged with limit and cursor (every page has all the sections)", handler: s.getMyApps, response: launcher.View{}},
		{method: put, path: api + "/me/favorites/{appID}", op: "launcher_favorite", access: accessSignedIn, summary: "Pin an app the caller can open; grants nothing", handler: s.putFavorite, action: "favorite.create", status: 204},
		{method: del, path: api + "/me/favorites/{appID}", op: "launcher_unfavorite", access: accessSignedIn, summary: "Unpin", handler: s.deleteFavorite, action: "favorite.delete", status: 204},
		{method: post, path: api + "/me/sections", op: "sections_create", access: accessSignedIn, summary: "Create a named collapsible section; grants nothing", handler: s.postSection, action: "section.create", request: sectionRequest{}, response: sectionAnswer{}, status: 201},
		{method: patch, path: api + "/me/sections/{sectionID}", op: "sections_update", access: accessSignedIn, summary: "Rename a section, or move it with position", handler: s.patchSection, action: "section.update", request: sectionRequest{}, response: sectionAnswer{}},
		{method: del, path: api + "/me/sections/{sectionID}", op: "sections_delete", access: accessSignedIn, summary: "Delete a section; its apps return to the ungrouped list", handler: s.deleteSection, action: "section.delete", status: 204},
		{method: put, path: api + "/me/sections/{sectionID}/apps/{appID}", op: "sections_add_app", access: accessSignedIn, summary: "File an app into the section, moving it out of any other", handler: s.putFiling, action: "section.app.add", status: 204},
		{method: del, path: api + "/me/sections/{sectionID}/apps/{appID}", op: "sections_remove_app", access: accessSignedIn, summary: "Take the app out of the section", handler: s.deleteFiling, action: "section.app.remove", status: 204},

		// Apps.
		{method: get, path: api + "/apps", op: "apps_list", access: accessSignedIn, paging: pagedCursor, summary: "Apps the caller can administer; paged with limit and cursor", handler: s.listApps, response: list[apps.App]{}},
		{method: post, path: api + "/apps", op: "apps_create", access: accessVerb, verb: authz.AppCreate, summary: "Create an app; returns at once in draft. The creator gets an owner grant and a data-plane grant", handler: s.postApp, action: "app.create", idempotent: true, request: createAppRequest{}, response: appAnswer{}, status: 201},
		{method: get, path: api + "/apps/{appID}", op: "apps_get", access: accessVerb, verb: authz.AppView, summary: "Name, source, state, pinned spec, and verbs: the caller's verbs on the app, host policy applied (what a client may offer them)", handler: s.getApp, response: appAnswer{}},
		{method: patch, path: api + "/apps/{appID}", op: "apps_update", access: accessVerb, verb: authz.AppSpecEdit, summary: "Rename an app, change its slug, or change its repository (checked now, cloned and detected behind the answer)", handler: s.patchApp, action: "app.update", request: patchAppRequest{}, response: appAnswer{}},
		{method: del, path: api + "/apps/{appID}", op: "apps_delete", query: []queryParam{{name: "backup", typ: "boolean", doc: "keep a final copy of the app's volumes"}, {name: "force", typ: "boolean", doc: "discard the app's volumes without a copy"}}, access: accessVerb, verb: authz.AppDelete, summary: "Delete an app; query backup=true keeps a final copy, force=true discards it", handler: s.deleteApp, action: "app.delete", status: 204},

		// Sharing: grants, the grant to everyone's passcode, and principals to share with.
		{method: get, path: api + "/apps/{appID}/grants", op: "grants_list", access: accessVerb, verb: authz.AppView, summary: "Who can reach the app (access: data-plane grants, the grant to everyone included, with passcode: bool) and who can administer it (management: control-plane grants with role_id), as two lists, oldest first; never a passcode", handler: s.getGrants, response: identity.AppGrants{}},
		{method: post, path: api + "/apps/{appID}/grants", op: "grants_create", access: accessVerb, verb: authz.AppGrantsMgmt, summary: "Share the app: {plane: control|data, principal_kind: user|group|token|anonymous, principal_id (not for anonymous), role_id (control plane only: an app role), passcode (the grant to everyone only: 6 to 128 characters)}. The user must be active, the token a service token; one grant per plane and principal (a second is STATE_INVALID); a role holding verbs the caller lacks on the app is PERM_DENIED; the grant to everyone is on the data plane and refused with POLICY_ANONYMOUS_GRANT_FORBIDDEN where host policy's public_sharing forbids it (passcode_only: without a passcode). Emits grant.created", handler: s.postGrant, action: "grant.create", request: createGrantRequest{}, response: grantAnswer{}, status: 201},
		{method: patch, path: api + "/apps/{appID}/grants/{grantID}", op: "grants_update", access: accessVerb, verb: authz.AppGrantsMgmt, summary: "Change a management grant's role_id in one update (grant.role_changed), or set the passcode of the grant to everyone: a new passcode asks everyone admitted by the old one again; an empty string removes it (refused under public_sharing passcode_only). Refused (STATE_INVALID) when the app would be left with no management grant holding app.grants.manage, unless the caller holds it through an installation role", handler: s.patchGrant, action: "grant.update", request: patchGrantRequest{}, response: grantAnswer{}},
		{method: del, path: api + "/apps/{appID}/grants/{grantID}", op: "grants_delete", access: accessVerb, verb: authz.AppGrantsMgmt, summary: "Remove a grant (the grant to everyone with its passcode and admissions); emits grant.deleted with scope app. The last management grant holding app.grants.manage is kept as for PATCH", handler: s.deleteGrant, action: "grant.delete", status: 204},
		{method: get, path: api + "/apps/{appID}/principals", op: "grants_principals", query: []queryParam{{name: "q", typ: "string", doc: "users and groups whose name starts with this"}}, access: accessVerb, verb: authz.AppGrantsMgmt, summary: "Users and groups to share with, matching query q (at most 100 characters; case-insensitive part of a username, display name or email for active users, of a name for groups): at most 20 of each, by name", handler: s.getPrincipals, response: identity.PrincipalMatches{}},
		{method: get, path: api + "/apps/{appID}/passcode", op: "passcode_get", access: accessPublic, summary: "The name of an app shared with everyone behind a passcode, for its passcode page; NOT_FOUND for any other app", handler: s.getPasscode, response: passcodeAppDTO{}},
		{method: post, path: api + "/apps/{appID}/passcode", op: "passcode_enter", noTool: "admits a browser with a cookie for the app's origin; an assistant reaches apps through the API", noCommand: "admits a browser with a cookie for the app's origin", access: accessPublic, summary: "Enter the passcode of an app shared with everyone behind one: {passcode}. Right: 204 and the admission cookie svc_passcode_<appID> (HttpOnly, SameSite=Lax, a day, for the handoff path only), which the handoff carries to the app's origin and the edge accepts from an API client, until the passcode changes. Wrong: 403 PERM_PASSCODE_REQUIRED. Ten wrong tries in fifteen minutes from one address (or a hundred from any, per app) make the caller wait: RATE_LIMITED with Retry-After", handler: s.postPasscode, action: "passcode.admit", request: passcodeRequest{}, status: 204},

		// Tile images.
		{method: get, path: api + "/apps/{appID}/icon", op: "apps_get_icon", produces: "image", access: accessOpen, summary: "Tile image, or a generated one when none is set; anyone who can open the app (or holds a verb on it) may load it; ETag and If-None-Match", handler: s.getIcon},
		{method: put, path: api + "/apps/{appID}/icon", op: "apps_set_icon", upload: "image", access: accessVerb, verb: authz.AppSpecEdit, summary: "Set the tile image: the body is the image itself, PNG, JPEG, WebP or GIF (told by its content), at most 256 KB; SVG is refused", handler: s.putIcon, action: "icon.update", bodyLimit: icon.MaxBytes, bodyTooLarge: icon.TooLarge, response: appAnswer{}},
		{method: del, path: api + "/apps/{appID}/icon", op: "apps_delete_icon", access: accessVerb, verb: authz.AppSpecEdit, summary: "Remove the tile image; the tile reverts to a generated one", handler: s.deleteIcon, action: "icon.delete", status: 204},

		// Sources.
		{method: post, path: api + "/apps/{appID}/source", op: "source_upload", upload: "archive", access: accessVerb, verb: authz.AppSpecEdit, summary: "Upload a source archive as the app's source: the body is the archive, Content-Type application/gzip (tar.gz), application/x-tar or application/zip; refused whole if any entry is unsafe (traversal, links leading out, devices) or over the limits; detection runs behind it", handler: s.postSource, action: "source.upload", bodyLimit: source.DefaultMaxArchiveBytes, response: sourceAnswer{}, status: 202},

		// Detection.
		{method: get, path: api + "/apps/{appID}/detection", op: "detection_get", access: accessVerb, verb: authz.AppView, summary: "Winning bid, evidence, runners-up, outstanding questions and answers", handler: s.getDetection, response: detection.Record{}},
		{method: post, path: api + "/apps/{appID}/detection/rerun", op: "detection_rerun", access: accessVerb, verb: authz.AppSpecEdit, summary: "Run detection again on the current commit", handler: s.postDetectionRerun, action: "detection.rerun", response: detection.Record{}},
		{method: get, path: api + "/apps/{appID}/detection/diff", op: "detection_diff", access: accessVerb, verb: authz.AppView, summary: "What accepting the proposal changes on the running app: the pinned revision against the proposal", handler: s.getDetectionDiff, response: spec.DiffResult{}},
		{method: post, path: api + "/apps/{appID}/detection/answers", op: "detection_answer", access: accessVerb, verb: authz.AppSpecEdit, summary: "Answer detection's questions (never a secret: give secrets at accept) and detect again", handler: s.postDetectionAnswers, action: "detection.answer", request: answersRequest{}, response: detection.Record{}},
		{method: post, path: api + "/apps/{appID}/detection/accept", op: "detection_accept", access: accessVerb, verb: authz.AppSpecEdit, summary: "Write the proposal, with values set, as a pinned revision; a secret value goes to the secrets adapter and also needs app.secrets.write; confirm is required over a configured app", handler: s.postDetectionAccept, action: "detection.accept", request: acceptRequest{}, response: specAnswer{}, status: 201},

		{method: post, path: api + "/apps/{appID}/plan", op: "apps_plan", access: accessVerb, verb: authz.AppView, summary: "What a deploy of a revision (default: the pinned one) would do and every reason it would be refused, with warnings that never block; creates nothing", handler: s.postPlan, request: planRequest{}, response: plan.Result{}},

		// Secrets.
		{method: get, path: api + "/apps/{appID}/secrets", op: "secrets_list", access: accessVerb, verb: authz.AppView, paging: pagedCursor, summary: "Which secrets exist, where each is kept (origin) and at which version; never values; paged with limit and cursor", handler: s.listSecrets, response: list[secrets.View]{}},
		{method: put, path: api + "/apps/{appID}/secrets/{key}", op: "secrets_set", access: accessVerb, verb: authz.AppSecretsW, summary: "Set a secret; setting an existing one is a rotation (a new version)", handler: s.putSecret, action: "secret.set", request: putSecretRequest{}, response: secretAnswer{}},
		{method: del, path: api + "/apps/{appID}/secrets/{key}", op: "secrets_delete", access: accessVerb, verb: authz.AppSecretsW, summary: "Remove a secret from its adapter", handler: s.deleteSecret, action: "secret.delete", status: 204},
		{method: get, path: api + "/apps/{appID}/secrets/{key}/value", op: "secrets_get", access: accessVerb, verb: authz.AppSecretsR, summary: "Read one value; audited every time. This verb guards reading values through the API only: whoever may change the app's spec and deploy it (app.spec.edit, app.deploy) can read every secret the app receives through the code they deploy", handler: s.getSecretValue, action: "secret.read", response: secretValue{}},

		// Spec revisions.
		{method: get, path: api + "/apps/{appID}/specs", op: "specs_list", access: accessVerb, verb: authz.AppView, paging: pagedCursor, summary: "All revisions, newest first, without their documents, and which is pinned (pinned_revision); paged with limit and cursor", handler: s.listSpecs, response: specList{}},
		{method: post, path: api + "/apps/{appID}/specs", op: "specs_create", access: accessVerb, verb: authz.AppSpecEdit, summary: "Write a new revision: {\"spec\": document}, or the document itself as YAML (Content-Type application/yaml); validated, neither pinned nor deployed; details.field of a problem is its path in the document", handler: s.postSpec, action: "spec.create", bodyLimit: specBodyLimit, request: createSpecRequest{}, response: specAnswer{}, status: 201},
		{method: get, path: api + "/apps/{appID}/specs/{rev}", op: "specs_get", access: accessVerb, verb: authz.AppView, summary: "One revision in full", handler: s.getSpec, response: specAnswer{}},
		{method: post, path: api + "/apps/{appID}/specs/{rev}/pin", op: "specs_pin", access: accessVerb, verb: authz.AppSpecEdit, summary: "Pin a revision: the target of the reconciler and of the next deploy; the app's pinned changes with it", handler: s.pinSpec, action: "spec.pin", response: specAnswer{}},
		{method: get, path: api + "/apps/{appID}/specs/{a}/diff/{b}", op: "specs_diff", access: accessVerb, verb: authz.AppView, summary: "Classified difference from revision a to b: what a deploy would restart, rebuild or leave alone", handler: s.diffSpecs, response: spec.DiffResult{}},
		{method: get, path: api + "/apps/{appID}/export", op: "specs_export", query: []queryParam{{name: "format", typ: "string", doc: "yaml for YAML (default JSON)"}}, access: accessVerb, verb: authz.AppView, summary: "Configuration as a document: the pinned spec (or the latest), secrets by key; every secret value redacted; format=yaml answers YAML", handler: s.getExport, response: spec.Export{}},

		// Slots and volumes.
		{method: get, path: api + "/apps/{appID}/slots", op: "slots_list", access: accessVerb, verb: authz.AppView, paging: pagedCursor, summary: "Needs of the app and what fills each: every slot the pinned and the latest spec revision declare (type, required, filled, mode, adapter_id, non-secret fields, the names of secret fields, effective: next_deploy), then fills of slots no longer declared (declared: false); never a credential; paged with limit and cursor", handler: s.listSlots, response: list[slots.View]{}},
		{method: put, path: api + "/apps/{appID}/slots/{key}", op: "slots_fill", access: accessVerb, verb: authz.AppSpecEdit, summary: "Fill a declared slot in exactly one way: {provision: {adapter_id?, rotate_password?}} (a slots adapter of the slot's type makes the resource; again: the same one, its password kept unless rotate_password), {bind: {url}} or {value: {fields}} (postgres: url, or host, port, database, username, password, sslmode); secret fields are stored encrypted and never shown; a resource provisioned before is left in place; effective at the next deploy", handler: s.putSlot, action: "slot.fill", request: fillSlotRequest{}, response: slotAnswer{}},
		{method: get, path: api + "/apps/{appID}/volumes", op: "volumes_list", access: accessVerb, verb: authz.AppView, paging: pagedCursor, summary: "The app's storage: the volumes of the pinned spec revision (the latest when none is pinned), with size and mounts; paged with limit and cursor", handler: s.listVolumes, response: list[volumes.View]{}},
		{method: post, path: api + "/apps/{appID}/volumes", op: "volumes_create", access: accessVerb, verb: authz.AppSpecEdit, summary: "Declare a path kept between deploys: {name, size_bytes (1 MiB to 10 TiB), workload? (default the primary), path}; writes a new spec revision from the latest with the volume and its mount, neither pinned nor deployed, and answers it as spec_revision; data written elsewhere is discarded at the next deploy", handler: s.postVolume, action: "volume.create", request: createVolumeRequest{}, response: volumeAnswer{}, status: 201},

		// Deploys. The scheduler writes each deploy's audit entry and events
		// in the same write as the deployment.
		{method: get, path: api + "/apps/{appID}/deployments", op: "deployments_list", access: accessVerb, verb: authz.AppView, paging: pagedCursor, summary: "All deploys, newest first; paged with limit and cursor", handler: s.listDeployments, response: list[deploymentDTO]{}},
		{method: post, path: api + "/apps/{appID}/deployments", op: "deployments_create", access: accessVerb, verb: authz.AppDeploy, summary: "Deploy a revision: {revision?} (absent or 0: the pinned one); refused as the plan refuses it, and while another deploy of the app runs (STATE_INVALID); answers 202 with the deployment (Location: where to follow it) and builds and runs behind the answer; it ships the app's source as recorded now (source: commit or archive digest), and a workload whose build key (source and build section) matches a kept build starts that artifact without building, so an env- or run-only change never rebuilds and a new upload always does; a revision whose spec asks for approvals (deploy.approvals) waits for them (state waiting_approval); honours Idempotency-Key. Deploying runs code of the caller's choosing with the app's secrets and slot credentials in its environment (in the sandbox, docs/security.md): grant app.deploy only to those you would give the app's secrets", handler: s.postDeployment, action: "deployment.create", idempotent: true, request: deployRequest{}, response: deploymentAnswer{}, status: 202},
		{method: post, path: api + "/apps/{appID}/deployments/rollback", op: "deployments_rollback", access: accessVerb, verb: authz.AppDeploy, summary: "Ship again the last release that ran successfully before the one the app runs now, exactly as it ran: its revision, its source and its kept builds, started without building (redeploys: that deployment); releases that shipped what the app runs now are passed over. When its builds are gone it builds from that release's own source; when that is gone too, STATE_INVALID with what to do. Answers 202 with the deployment; honours Idempotency-Key", handler: s.postRollback, action: "deployment.create", idempotent: true, response: deploymentAnswer{}, status: 202},
		{method: get, path: api + "/apps/{appID}/deployments/{depID}", op: "deployments_get", access: accessVerb, verb: authz.AppView, summary: "What a deploy shipped and how it ended: revision and spec_id, source (kind, commit or archive digest, checkout_id), redeploys, per workload builds (build_key, artifact_id, reused: a kept build started without building, built_by), state, trigger, error_code and error_message on failure, approvals", handler: s.getDeployment, response: deploymentAnswer{}},
		{method: get, path: api + "/apps/{appID}/deployments/{depID}/logs", op: "deployments_logs", access: accessVerb, verb: authz.AppLogsRead, summary: "Deploy output as server-sent events (text/event-stream), flushed per line while the deploy runs: event: log, data: {time, stream (build, run or system), line}; then event: end, data: {state, error_code}. A finished deployment replays its whole log, then the end", handler: s.getDeploymentLogs, response: deployLogEvent{}, produces: "text/event-stream"},
		{method: post, path: api + "/apps/{appID}/deployments/{depID}/approve", op: "deployments_approve", access: accessVerb, verb: authz.AppDeploy, summary: "Approve a deploy waiting for approval; once it has the approvals its revision asks for it is queued. The person who asked for the deploy cannot approve it (PERM_DENIED); nobody approves twice", handler: s.postApprove, action: "deployment.approve", response: deploymentAnswer{}},
		{method: post, path: api + "/apps/{appID}/deployments/{depID}/reject", op: "deployments_reject", access: accessVerb, verb: authz.AppDeploy, summary: "Reject a deploy waiting for approval: {reason} (required, at most 1000 bytes); it ends rejected", handler: s.postReject, action: "deployment.reject", request: rejectRequest{}, response: deploymentAnswer{}},

		// Running apps.
		{method: post, path: api + "/apps/{appID}/start", op: "apps_start", access: accessVerb, verb: authz.AppRestart, summary: "Desired state becomes running; the reconciler converges (refused when running it would oversubscribe the host); a failed app stays failed until deployed", handler: s.postStart, action: "app.start", response: appAnswer{}},
		{method: post, path: api + "/apps/{appID}/stop", op: "apps_stop", access: accessVerb, verb: authz.AppRestart, summary: "Desired state becomes stopped; the reconciler converges", handler: s.postStop, action: "app.stop", response: appAnswer{}},
		{method: post, path: api + "/apps/{appID}/restart", op: "apps_restart", access: accessVerb, verb: authz.AppRestart, summary: "Restart a running app's workloads in place, nothing else changing; the reconciler does it behind the answer (app.restarted)", handler: s.postAppRestart, action: "app.restart", response: appAnswer{}, status: 202},
		{method: get, path: api + "/apps/{appID}/status", op: "apps_status", access: accessVerb, verb: authz.AppView, summary: "App state and desired state, the deployment and revision it runs, and per workload: running, restart count, health, last exit code; what keeps it from serving (problem: the failed deploy's or the runtime's code, message and remedy)", handler: s.getStatus, response: scheduler.Status{}},
		{method: get, path: api + "/apps/{appID}/usage", op: "apps_usage", access: accessVerb, verb: authz.AppView, summary: "Current resource reading beside limits (a reading, not history): per workload CPU in thousandths of a core, memory and disk in bytes, each mounted volume's size, limits (0: none); host_cpu_millis and host_memory_bytes say what no limit means; supported: false when the runtime cannot report", handler: s.getUsage, response: scheduler.Usage{}},
		{method: get, path: api + "/apps/{appID}/logs", op: "apps_logs", query: []queryParam{{name: "tail", typ: "integer", doc: "the number of lines, 1 to 10000 (default 100)"}, {name: "workload", typ: "string", doc: "the workload (default the primary)"}, {name: "follow", typ: "boolean", doc: "true: server-sent events, the last tail lines and then each new line as it is written (process runtime only)"}}, access: accessVerb, verb: authz.AppLogsRead, summary: "The app's runtime output, oldest first: query tail (number of lines, 1 to 10000, default 100) and workload (default the primary workload). With follow=true the answer is server-sent events (text/event-stream): event: log, data: {line} for the last tail lines and then each line as the workload writes it; event: end, data: {reason: stopped (the workload's job stopped: a redeploy replaced it, the app was stopped) or lagged (the reader fell behind; follow again)}. Following needs the process runtime (PLAN_CAPABILITY_UNSUPPORTED on Nomad)", handler: s.getAppLogs, response: appLogsDTO{}},
		{method: get, path: api + "/apps/{appID}/exec", op: "apps_exec", noTool: "a terminal is a websocket of keystrokes and screen output that a tool call cannot hold open; svc exec gives a person one. A tool that runs one command and returns its output is possible over stdio (api.Client.Exec), not yet at /mcp, whose in-process calls cannot take over a connection", query: []queryParam{{name: "workload", typ: "string", doc: "the workload (default the primary)"}, {name: "command", typ: "string", repeat: true, doc: "the program and its arguments (default a shell)"}, {name: "rows", typ: "integer", doc: "terminal rows, 1 to 1000"}, {name: "cols", typ: "integer", doc: "terminal columns, 1 to 1000"}}, access: accessVerb, verb: authz.AppExec, disabledCode: errcode.PolicyExecDisabled, summary: "Terminal in a running workload over a websocket; query workload (default the primary), command (repeatable: program and arguments; default a shell), rows and cols (1 to 1000; default 24 by 80). Framing: " + execFraming + ". Audited (app.exec, with the command, never what is typed); refused with POLICY_EXEC_DISABLED when host policy turns exec off, even for the owner; a browser's upgrade from another origin is refused", handler: s.getExec, action: "app.exec", status: http.StatusSwitchingProtocols},
		{method: get, path: api + "/capacity", op: "capacity_get", access: accessVerb, verb: authz.InstallView, summary: "What the host has (CPU, memory) and what apps meant to run commit of it, what is free, and the host port range and how much of it apps hold", handler: s.getCapacity, response: scheduler.Capacity{}},

		// Operator.
		{method: get, path: api + "/operator/raft", op: "raft_get", query: []queryParam{{name: "digest", typ: "boolean", doc: "add a hash of the whole state"}}, access: accessVerb, verb: authz.InstallView, summary: "The replicated store as this node sees it; digest=true adds a hash of the whole state", handler: s.getRaft, response: raftStatusDTO{}},
		{method: get, path: api + "/operator/raft/history", op: "raft_history", access: accessVerb, verb: authz.InstallAuditRead, summary: "Check this node's history store (audit log, events, deploy logs, probes) from its first record to its head: every record's hash follows from the one before, every value kept matches its hash, a value is missing only where a drop is recorded. The head (records, hash) names the whole history; nodes that applied the same log have the same head", handler: s.getHistory, response: raftstore.HistoryReport{}},
		{method: post, path: api + "/operator/raft/probes", op: "raft_probes_create", access: accessVerb, verb: authz.InstallAdaptersMgmt, summary: "Write a probe through the replicated write path and time its commit", handler: s.postProbe, action: "operator.probe.create", request: probeRequestDTO{}, response: probeResultDTO{}, status: 201},
		{method: get, path: api + "/operator/raft/probes", op: "raft_probes_list", access: accessVerb, verb: authz.InstallView, paging: pagedCursor, summary: "Probes this node holds, oldest first; paged with limit and cursor", handler: s.listProbes, response: list[operator.Probe]{}},
		{method: get, path: api + "/operator/raft/probes/{probeID}", op: "raft_probes_get", access: accessVerb, verb: authz.InstallView, summary: "A probe as this node's state holds it", handler: s.getProbe, response: probeDTO{}},

		// The console (Deps.Console): index.html for each of its pages, whose own router shows the page, and its built files.
		{method: get, path: "/", access: accessPublic, summary: consolePage + "the launcher: the apps the signed-in person can open (GET /api/v1/me/apps), favorites, sections, search; sends a browser not signed in to /login, or to /setup while the installation waits for its first administrator", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/login", access: accessPublic, summary: consolePage + "sign-in (POST /api/v1/sessions), then to query next where GET /api/v1/edge/next allows it (the edge sends browsers not signed in here); any other next is not followed, and the page says so", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/setup", access: accessPublic, summary: consolePage + "while the installation waits for its first administrator (GET /api/v1/setup), the form creating it (POST /api/v1/setup); afterwards, says it is set up", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/passcode/{appID}", access: accessPublic, summary: consolePage + "the passcode of an app shared with everyone behind one (GET and POST /api/v1/apps/{appID}/passcode), then to next as /login goes; for any other app it shows the API's NOT_FOUND", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/account/{page...}", access: accessPublic, summary: consolePage + "the signed-in person's own pages: /account/password changes their password (POST /api/v1/me/password), and is the only page an account that must change its password is shown; /account/tokens lists, creates and revokes their tokens", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/apps", access: accessPublic, summary: consolePage + "the apps the signed-in person administers (GET /api/v1/apps), with state and address", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/apps/{page...}", access: accessPublic, summary: consolePage + "an app's pages at /apps/<app ID>/…: overview (status, usage, start, stop, restart), deploys (history, a deploy's live log, approve, reject, roll back), logs (tail and follow), spec revisions, plan, detection, secrets, slots, volumes, sharing, a terminal, settings. In path routing mode the edge serves /apps/<slug>/ to the apps instead: an app ID has an underscore, a slug never does", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/new", access: accessPublic, summary: consolePage + "a new app from a repository (POST /api/v1/apps) or an uploaded archive (POST /api/v1/apps, then …/source), then on to its detection page", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/admin", access: accessPublic, summary: consolePage + "the installation's first page (accounts)", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/admin/{page...}", access: accessPublic, summary: consolePage + "the installation's pages, for those holding install.view: accounts, groups, roles, service tokens, adapters, host policy, the audit log, configuration, capacity", handler: s.serveConsole, produces: "text/html", operational: true, stateless: true},
		{method: get, path: "/assets/{file...}", access: accessPublic, summary: "The console's built files (scripts, styles), named by their content's hash: Cache-Control public, max-age one year, immutable; gzip when accepted; 404 for a file the build lacks", handler: s.serveConsole, produces: "application/octet-stream", operational: true, stateless: true},

		// Operations.
		{method: get, path: "/healthz", access: accessPublic, summary: "Liveness: the process answers", handler: s.getHealth, response: healthDTO{}, operational: true, stateless: true},
		{method: get, path: "/readyz", access: accessPublic, summary: "Readiness: this node knows a leader of the replicated store, has caught up with it since it started or restored a snapshot (applied what the leader had applied when asked; until then every endpoint but /healthz, /readyz and /metrics answers 503 STORE_UNAVAILABLE with Retry-After, and reason says why), and has applied SVC_ADMIN_PASSWORD, if set", handler: s.getReady, response: healthDTO{}, operational: true, stateless: true},
		{method: get, path: "/metrics", access: accessPublic, summary: "Prometheus metrics", handler: echo.WrapHandler(s.d.MetricsHandler), operational: true, stateless: true},
		// The tool server for AI assistants (streamable HTTP, docs/mcp.md).
		{method: post, path: "/mcp", access: accessSignedIn, summary: mcpSummary + ": a client's JSON-RPC messages (initialize, tools/list, tools/call, …), answered as JSON or an event stream", handler: s.serveMCP, bodyLimit: mcpBodyLimit, operational: true},
		{method: get, path: "/mcp", access: accessSignedIn, summary: mcpSummary + ": a session's event stream of messages from the server", handler: s.serveMCP, operational: true},
		{method: del, path: "/mcp", access: accessSignedIn, summary: mcpSummary + ": end a session", handler: s.serveMCP, operational: true},
		{method: get, path: "/.well-known/jwks.json", access: accessPublic, summary: "The public keys that verify the X-Svc-Assertion header (JWKS of OKP Ed25519 keys, alg EdDSA, by kid); Cache-Control: public, max-age=60", handler: s.getJWKS, response: edge.JWKS{}, operational: true},
	}
}
