#!/usr/bin/env bash
# make terraform-e2e: applies terraform/examples/local with OpenTofu against
# a real `nomad agent -dev` and a real `vault server -dev` started here, on
# loopback, and checks what the modules promise:
#
#   1. tofu init + apply: the hashistack module's Vault and Nomad objects,
#      then the svc-nomad job (three svc servers, raw_exec);
#   2. the three servers answer /readyz and form one Raft cluster: every
#      node's GET /api/v1/operator/raft lists the same three voters and the
#      same leader;
#   3. each server's GET /api/v1/adapters lists adp_tf_vault, adp_tf_nomad
#      and adp_tf_routes with origin config_file, loaded;
#   4. a sample (samples/static-hello, SAMPLE= for another) deploys through
#      the nomad runtime: `svc launch` ends running and Nomad runs its
#      service job, and the app answers through svc's edge at its URL
#      (routed by the routes adapter); the app is then deleted and its
#      jobs go;
#   5. tofu destroy, then nothing the modules made is left: no Nomad job
#      `svc`, no namespace but default, no Vault policies svc, svc-apps,
#      svc-server, no auth mounts jwt-nomad/ and approle/ (and, with ACLs,
#      no Nomad ACL policy or token svc, no Consul policy svc-routes, no
#      auth method nomad-workloads).
#
# DRIVER=exec runs the three servers with Nomad's exec driver, the
# svc-nomad module's default (chrooted, their state at /srv/svc), instead
# of raw_exec.
#
# ACL=1 runs the stack as production runs it: Nomad with ACLs on (the
# script bootstraps them and gives tofu the management token), and the
# apps in a namespace of their own, svc-apps. It then also checks that
# the servers' nomad adapter holds the client token the hashistack module
# made (not the management token), and that this token may not read or
# stop the servers' own job in namespace default.
#
# CONSUL=/path/to/consul (or SVC_CONSUL_BIN; a Consul v1.16+, tested with
# v1.20.6 built by scripts/consul-tool.sh) adds a Consul dev agent with
# ACLs on, deny by default: the apps register their services in Consul
# through Nomad's workload identities (the hashistack module's
# nomad-workloads auth method) and svc routes with the consul routes
# adapter and the read-only token the module made. It checks the app's
# service is passing in Consul, registered through that auth method, and
# that the routes token may not register a service.
#
# What it needs, as variables (each is checked first; a missing one stops
# it with what to do):
#
#   TOFU=/path/to/tofu      default: tofu on PATH, else the one
#                           scripts/tofu-tool.sh cached (it builds one)
#   NOMAD=/path/to/nomad    default: SVC_NOMAD_BIN, else nomad on PATH.
#                           A Nomad agent (v1.10+ for workload identities
#                           with Vault; tested with v2.0.5) with raw_exec
#   VAULT=/path/to/vault    default: SVC_VAULT_BIN, else vault on PATH,
#                           else the one scripts/vault-tool.sh cached
#   PROVIDERS_DIR=/dir      the hashicorp/vault, nomad and consul providers'
#                           binaries, named terraform-provider-NAME_vX.Y.Z
#                           as in their release zips. Without it, tofu init
#                           downloads them from registry.opentofu.org, which
#                           needs the network.
#
# SVC_BIN=/path/to/svc uses that binary instead of building bin/svc here.
# KEEP=1 keeps the work directory (logs, state) and stops nothing on exit.
# Ports: Vault 8200, Nomad 4646-4648, svc 8080-8082 (API) and 8300-8302
# (Raft) by the example's defaults; they must be free.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
started=$(date +%s)

say() { echo "terraform-e2e: $*" >&2; }
fail() {
	say "FAILED: $*"
	exit 1
}
elapsed() { echo "$(($(date +%s) - started))s"; }

# --- What it needs -----------------------------------------------------------

missing=()
find_tool() { # VAR value-or-empty name fallback-cmd...
	local v="$1" name="$2"
	shift 2
	if [ -n "$v" ]; then
		[ -x "$v" ] && [ ! -d "$v" ] && { echo "$v"; return 0; }
		return 1
	fi
	command -v "$name" 2>/dev/null && return 0
	[ $# -gt 0 ] && "$@" 2>/dev/null && return 0
	return 1
}
TOFU=$(find_tool "${TOFU:-}" tofu bash scripts/tofu-tool.sh --path-if-built) ||
	missing+=("OpenTofu: TOFU=${TOFU:-<unset>} is not an executable and no tofu is on PATH or cached; build one with \`bash scripts/tofu-tool.sh\` (from the Go module proxy, cached) and pass TOFU=<the path it prints>")
NOMAD=$(find_tool "${NOMAD:-${SVC_NOMAD_BIN:-}}" nomad) ||
	missing+=("Nomad: NOMAD=${NOMAD:-<unset>} is not an executable and no nomad is on PATH; Nomad is not on the Go module proxy: take a release binary (releases.hashicorp.com/nomad) or build one from a hashicorp/nomad release tag (its README, 'Building Nomad'; the ui build tag is not needed) and pass NOMAD=/path/to/nomad")
VAULT=$(find_tool "${VAULT:-${SVC_VAULT_BIN:-}}" vault bash scripts/vault-tool.sh --path-if-built) ||
	missing+=("Vault: VAULT=${VAULT:-<unset>} is not an executable and no vault is on PATH or cached; build one with \`bash scripts/vault-tool.sh\` (about 6.5 minutes once, cached) and pass VAULT=<the path it prints>")
CONSUL="${CONSUL:-${SVC_CONSUL_BIN:-}}"
if [ -n "$CONSUL" ] && { [ ! -x "$CONSUL" ] || [ -d "$CONSUL" ]; }; then
	missing+=("Consul: CONSUL=$CONSUL is not an executable; build one with \`bash scripts/consul-tool.sh\` (from the Go module proxy, cached) and pass CONSUL=<the path it prints>, or leave CONSUL unset to run without Consul")
fi
providers=(vault nomad consul)
declare -A provider_bin provider_version
if [ -n "${PROVIDERS_DIR:-}" ]; then
	for p in "${providers[@]}"; do
		f=$(ls -1 "$PROVIDERS_DIR"/terraform-provider-"$p"_v* 2>/dev/null | sort -V | tail -n1 || true)
		if [ -z "$f" ] || [ ! -x "$f" ]; then
			missing+=("the hashicorp/$p provider: no executable $PROVIDERS_DIR/terraform-provider-${p}_vX.Y.Z; take it from its release zip (releases.hashicorp.com/terraform-provider-$p) or build it from a release tag of github.com/hashicorp/terraform-provider-$p (go build) and name the binary terraform-provider-${p}_v<that tag's version>")
			continue
		fi
		provider_bin[$p]=$(cd "$(dirname "$f")" && pwd)/$(basename "$f")
		provider_version[$p]=${f##*_v}
	done
fi
for c in go curl jq python3 sha256sum openssl; do
	command -v "$c" >/dev/null || missing+=("$c: not on PATH (apt-get install $c)")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "cannot run; missing:"
	for m in "${missing[@]}"; do echo "  - $m" >&2; done
	exit 2
fi
ports=(8200 4646 4647 4648 8080 8081 8082 8300 8301 8302)
# Consul's dev agent moves off 8300-8302, which svc's Raft takes.
[ -z "$CONSUL" ] || ports+=(8500 18300 18301 18302)
for port in "${ports[@]}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		fail "port $port on 127.0.0.1 is in use; the example's Vault, Nomad, Consul and svc servers need ${ports[*]}"
	fi
done
say "tofu:  $TOFU ($(TF_CLI_CONFIG_FILE=/dev/null "$TOFU" version 2>/dev/null | grep -m1 -E '^(OpenTofu|Terraform) v' || true))"
say "nomad: $NOMAD ($("$NOMAD" version | head -n1))"
say "vault: $VAULT ($("$VAULT" version | head -n1))"
[ -z "$CONSUL" ] || say "consul: $CONSUL ($("$CONSUL" version | head -n1))"
say "ACLs: ${ACL:-0}, Consul: $([ -n "$CONSUL" ] && echo yes || echo no), the servers' driver: ${DRIVER:-raw_exec}"

# --- A work directory and the stack ------------------------------------------

work=$(mktemp -d /tmp/svc-tf-e2e.XXXXXX)
pids=()
# Nomad's and Consul's HTTP APIs, with the management tokens once there are.
ncurl() { curl -fsS ${NOMAD_TOKEN:+-H "X-Nomad-Token: $NOMAD_TOKEN"} "$@"; }
ccurl() { curl -fsS ${CONSUL_HTTP_TOKEN:+-H "X-Consul-Token: $CONSUL_HTTP_TOKEN"} "$@"; }
cleanup() {
	rc=$?
	if [ "${KEEP:-}" = 1 ]; then
		say "KEEP=1: left running (pids ${pids[*]:-none}); work directory $work"
		exit "$rc"
	fi
	# Whatever the job left: the svc servers run under Nomad's executor,
	# which outlives the agent, so every allocation is stopped first and
	# Nomad is given a minute to see them end.
	if [ -n "${NOMAD_ADDR:-}" ] && ncurl "$NOMAD_ADDR/v1/job/svc" >/dev/null 2>&1; then
		ncurl -X DELETE "$NOMAD_ADDR/v1/job/svc?purge=true" >/dev/null 2>&1 || true
	fi
	for _ in $(seq 1 60); do
		live=$(ncurl "$NOMAD_ADDR/v1/allocations?namespace=*" 2>/dev/null |
			jq '[.[] | select(.ClientStatus=="running" or .ClientStatus=="pending")] | length' 2>/dev/null || echo 0)
		[ "${live:-0}" = 0 ] && break
		sleep 1
	done
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill "${pids[$i]}" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		for _ in $(seq 1 30); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
		kill -9 "$p" 2>/dev/null || true
	done
	# And any task process still running from the work directory (its
	# root, a chroot there, or its working directory).
	for d in /proc/[0-9]*; do
		case "$(readlink "$d/root" 2>/dev/null)/ $(readlink "$d/cwd" 2>/dev/null)/" in
		"$work"/*) kill -9 "${d#/proc/}" 2>/dev/null || true ;;
		*" $work"/*) kill -9 "${d#/proc/}" 2>/dev/null || true ;;
		esac
	done
	# What the stopped Nomad client left mounted under the work directory
	# (the exec driver's bind mounts, the tasks' secrets tmpfs), deepest
	# first, so that it can be removed.
	awk -v d="$work/" 'index($5, d) == 1 { print length($5), $5 }' /proc/self/mountinfo 2>/dev/null |
		sort -rn | cut -d' ' -f2- | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	if [ "$rc" -ne 0 ]; then
		say "logs and state kept in $work (vault.log, nomad.log, tofu-*.log, allocs/)"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT

cp -R "$repo/terraform" "$work/terraform"
ex="$work/terraform/examples/local"
state_root="$work/svc-state"
mkdir -p "$state_root"/svc-state-{1,2,3} "$work/bin"

if [ -n "${SVC_BIN:-}" ]; then
	cp "$SVC_BIN" "$work/bin/svc"
else
	say "building bin/svc ($(elapsed))"
	(GOFLAGS="${GOFLAGS:--p=1}" nice -n 10 go build -trimpath -o "$work/bin/svc" ./cmd/svc) || fail "go build ./cmd/svc"
fi
svc="$work/bin/svc"

export VAULT_ADDR=http://127.0.0.1:8200 VAULT_TOKEN="root-$(openssl rand -hex 8)"
mkdir -p "$work/vault-home"
say "starting vault server -dev ($(elapsed))"
(cd "$work" && exec env HOME="$work/vault-home" "$VAULT" server -dev -dev-root-token-id="$VAULT_TOKEN" \
	-dev-listen-address=127.0.0.1:8200 >"$work/vault.log" 2>&1) &
pids+=($!)
for _ in $(seq 1 60); do
	curl -fsS "$VAULT_ADDR/v1/sys/health" >/dev/null 2>&1 && break
	sleep 1
done
curl -fsS "$VAULT_ADDR/v1/sys/health" >/dev/null || fail "vault dev server did not come up (see $work/vault.log)"

if [ -n "$CONSUL" ]; then
	# ACLs on and deny by default, as production runs Consul; the initial
	# management token is this run's, for tofu's Consul provider. Off
	# 8300-8302 (svc's Raft) and without DNS and gRPC, which nothing here
	# uses.
	export CONSUL_HTTP_ADDR=127.0.0.1:8500 CONSUL_HTTP_TOKEN
	CONSUL_HTTP_TOKEN=$(python3 -c 'import uuid; print(uuid.uuid4())')
	cat >"$work/consul.hcl" <<-EOF
		acl {
		  enabled        = true
		  default_policy = "deny"
		  tokens {
		    initial_management = "$CONSUL_HTTP_TOKEN"
		  }
		}
		ports {
		  server   = 18300
		  serf_lan = 18301
		  serf_wan = 18302
		  dns      = -1
		  grpc     = -1
		  grpc_tls = -1
		}
	EOF
	say "starting consul agent -dev with ACLs ($(elapsed))"
	(cd "$work" && exec "$CONSUL" agent -dev -bind=127.0.0.1 -client=127.0.0.1 -config-file="$work/consul.hcl" \
		>"$work/consul.log" 2>&1) &
	pids+=($!)
	for _ in $(seq 1 60); do
		leader=$(curl -fsS "http://$CONSUL_HTTP_ADDR/v1/status/leader" 2>/dev/null || true)
		[ -n "$leader" ] && [ "$leader" != '""' ] && break
		sleep 1
	done
	ccurl "http://$CONSUL_HTTP_ADDR/v1/acl/token/self" >/dev/null ||
		fail "consul agent -dev did not come up with ACLs and the management token (see $work/consul.log)"
	# The agents' own tokens, with the policies examples/aws's
	# bootstrap-acls.sh makes: Consul's agent registers its node; Nomad's
	# agent has the minimal policy of Nomad's documentation (its apps'
	# services log in with their workload identities instead).
	printf '%s\n' 'node_prefix "" {' '  policy = "write"' '}' 'service_prefix "" {' '  policy = "read"' '}' |
		"$CONSUL" acl policy create -name consul-agents -rules=- >/dev/null
	printf '%s\n' 'agent_prefix "" {' '  policy = "read"' '}' 'node_prefix "" {' '  policy = "write"' '}' \
		'service_prefix "" {' '  policy = "write"' '}' 'acl = "write"' 'mesh = "write"' |
		"$CONSUL" acl policy create -name nomad-agents -rules=- >/dev/null
	consul_agent=$("$CONSUL" acl token create -description "Consul agents" -policy-name consul-agents -format=json | jq -r .SecretID)
	"$CONSUL" acl set-agent-token agent "$consul_agent" >/dev/null
	nomad_consul=$("$CONSUL" acl token create -description "Nomad agents" -policy-name nomad-agents -format=json | jq -r .SecretID)
fi

# The example's nomad-dev.hcl with this run's host volume paths; it names
# Vault at 127.0.0.1:8200 already.
sed "s|/tmp/svc-state|$state_root|g" "$ex/nomad-dev.hcl" >"$work/nomad-dev.hcl"
# No cloud fingerprinting: on a machine whose 169.254.169.254 answers but
# is no cloud's metadata service, Nomad v2.0.5's env_aws fingerprinter
# fails the client's start ("failed to setup IMDS client").
# And room for a build beside the three servers (1000 MHz each, the
# module's default): a two-core machine has about 4000 MHz, and svc refuses
# a build Nomad has no room for (CAPACITY_WOULD_OVERSUBSCRIBE).
cat >"$work/nomad-local.hcl" <<-'EOF'
	client {
	  cpu_total_compute = 16000
	  options = {
	    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
	  }
	}
EOF
if [ "${ACL:-}" = 1 ]; then
	echo 'acl { enabled = true }' >>"$work/nomad-local.hcl"
fi
if [ -n "$CONSUL" ]; then
	# The agent registers itself with its own token; the apps' services log
	# in with their workload identities (audience consul.io) through the
	# auth method the hashistack module makes.
	cat >>"$work/nomad-local.hcl" <<-EOF
		consul {
		  address             = "$CONSUL_HTTP_ADDR"
		  token               = "$nomad_consul"
		  service_auth_method = "nomad-workloads"
		  service_identity {
		    aud = ["consul.io"]
		    ttl = "1h"
		  }
		}
	EOF
fi
export NOMAD_ADDR=http://127.0.0.1:4646
say "starting nomad agent -dev ($(elapsed))"
# Without this shell's Vault and Consul tokens: raw_exec tasks inherit the
# client's environment, and the servers and apps must have only what their
# jobs give them.
(cd "$work" && exec env -u VAULT_TOKEN -u CONSUL_HTTP_TOKEN "$NOMAD" agent -dev -config="$work/nomad-dev.hcl" -config="$work/nomad-local.hcl" -alloc-dir="$work/allocs" \
	-state-dir="$work/nomad-client" >"$work/nomad.log" 2>&1) &
pids+=($!)
if [ "${ACL:-}" = 1 ]; then
	say "bootstrapping Nomad's ACLs ($(elapsed))"
	for _ in $(seq 1 60); do
		NOMAD_TOKEN=$(curl -fsS -X POST "$NOMAD_ADDR/v1/acl/bootstrap" 2>/dev/null | jq -r '.SecretID // empty' || true)
		[ -n "$NOMAD_TOKEN" ] && break
		sleep 1
	done
	[ -n "$NOMAD_TOKEN" ] || fail "POST /v1/acl/bootstrap gave no token in a minute (see $work/nomad.log)"
	export NOMAD_TOKEN
	curl -fsS "$NOMAD_ADDR/v1/jobs" >/dev/null 2>&1 && fail "Nomad answers GET /v1/jobs without a token: its ACLs are not on"
fi
ready=""
for _ in $(seq 1 90); do
	if ! kill -0 "${pids[-1]}" 2>/dev/null; then
		tail -n 30 "$work/nomad.log" >&2
		fail "nomad agent -dev exited (the log's end is above; $work/nomad.log)"
	fi
	ready=$(ncurl "$NOMAD_ADDR/v1/nodes" 2>/dev/null | jq -r '[.[] | select(.Status=="ready")] | length' 2>/dev/null || true)
	[ "${ready:-0}" -ge 1 ] && break
	sleep 2
done
[ "${ready:-0}" -ge 1 ] || fail "no Nomad client became ready in 3 minutes (see $work/nomad.log)"
ncurl "$NOMAD_ADDR/v1/nodes" | jq -e '.[0].Drivers.raw_exec.Healthy == true' >/dev/null ||
	fail "Nomad's raw_exec driver is not healthy on this client; the example's job and apps run with raw_exec"

say "writing the servers' cluster secret and key-encryption key into Vault ($(elapsed))"
"$VAULT" kv put secret/svc/server/cluster secret="$(openssl rand -hex 32)" kek="$(openssl rand -base64 32)" >/dev/null

# bin/svc for the Nomad client's artifact block, from a loopback HTTP server.
art_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$work/bin" && exec python3 -m http.server "$art_port" --bind 127.0.0.1 >"$work/artifact-http.log" 2>&1) &
pids+=($!)
export TF_VAR_artifact_url="http://127.0.0.1:$art_port/svc"
TF_VAR_artifact_sha256=$(sha256sum "$svc" | cut -d' ' -f1)
export TF_VAR_artifact_sha256 TF_VAR_state_root="$state_root"
apps_ns=default
if [ "${ACL:-}" = 1 ]; then
	apps_ns=svc-apps
	export TF_VAR_nomad_acl_enabled=true TF_VAR_apps_namespace=$apps_ns
fi
# DRIVER=exec runs the servers as production does (the svc-nomad module's
# default driver): chrooted, their state in the host volume at /srv/svc.
export TF_VAR_server_driver="${DRIVER:-raw_exec}"
[ -z "$CONSUL" ] || export TF_VAR_consul_addr="http://$CONSUL_HTTP_ADDR" TF_VAR_consul_acl_enabled=true
export TF_IN_AUTOMATION=1 TF_INPUT=0

# --- OpenTofu ----------------------------------------------------------------

export TF_CLI_CONFIG_FILE="$work/tofu.tfrc"
if [ -n "${PROVIDERS_DIR:-}" ]; then
	# A filesystem mirror holding only these providers: tofu init installs
	# them from it and never asks a registry.
	# Under both registries' names, so that TOFU=/path/to/terraform works
	# too (hashicorp/vault means registry.terraform.io/hashicorp/vault there).
	mirror="$work/providers"
	for p in "${providers[@]}"; do
		for host in registry.opentofu.org registry.terraform.io; do
			d="$mirror/$host/hashicorp/$p/${provider_version[$p]}/linux_amd64"
			mkdir -p "$d"
			cp "${provider_bin[$p]}" "$d/terraform-provider-${p}_v${provider_version[$p]}"
		done
		say "provider hashicorp/$p ${provider_version[$p]} from ${provider_bin[$p]}"
	done
	cat >"$TF_CLI_CONFIG_FILE" <<-EOF
		provider_installation {
		  filesystem_mirror {
		    path    = "$mirror"
		    include = ["registry.opentofu.org/hashicorp/*", "registry.terraform.io/hashicorp/*"]
		  }
		}
	EOF
else
	: >"$TF_CLI_CONFIG_FILE"
fi

tofu() {
	local log="$work/tofu-$1.log"
	say "tofu $* ($(elapsed))"
	if ! (cd "$ex" && "$TOFU" "$@") >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		fail "tofu $* (the log's end is above; $log)"
	fi
}
if [ -z "${PROVIDERS_DIR:-}" ] && ! (cd "$ex" && "$TOFU" init -no-color) >"$work/tofu-init.log" 2>&1; then
	tail -n 20 "$work/tofu-init.log" >&2
	fail "tofu init could not install the providers from registry.opentofu.org (the log's end is above); without the network, pass PROVIDERS_DIR=<a directory with terraform-provider-{vault,nomad,consul}_vX.Y.Z> (see the top of this script)"
fi
[ -z "${PROVIDERS_DIR:-}" ] || tofu init -no-color
tofu apply -auto-approve -no-color

# --- The cluster --------------------------------------------------------------

mapfile -t apis < <(cd "$ex" && "$TOFU" output -json api_addresses | jq -r '.[]')
[ ${#apis[@]} -eq 3 ] || fail "tofu output api_addresses lists ${#apis[@]} servers, not 3"
say "waiting for ${apis[*]} to answer /readyz ($(elapsed))"
for a in "${apis[@]}"; do
	ok=""
	for _ in $(seq 1 150); do
		curl -fsS "$a/readyz" >/dev/null 2>&1 && { ok=1; break; }
		sleep 2
	done
	if [ -z "$ok" ]; then
		ncurl "$NOMAD_ADDR/v1/job/svc/allocations" | jq -r '.[] | "\(.TaskGroup) \(.ClientStatus) \(.TaskStates.svc.Events[-1].DisplayMessage // "")"' >&2 || true
		fail "$a/readyz did not answer 200 within 5 minutes (the allocations' state is above; their logs are under $work/allocs)"
	fi
done

admin_password="e2e-$(openssl rand -hex 12)"
curl -fsS "${apis[0]}/api/v1/setup" -H 'Content-Type: application/json' -c "$work/cookies" \
	-d "{\"username\":\"admin\",\"display_name\":\"Admin\",\"password\":\"$admin_password\"}" >/dev/null ||
	fail "POST /api/v1/setup on ${apis[0]}"
SVC_TOKEN=$(curl -fsS "${apis[0]}/api/v1/tokens" -b "$work/cookies" -H 'Content-Type: application/json' \
	-d '{"name":"terraform-e2e"}' | jq -r .secret)
[ -n "$SVC_TOKEN" ] && [ "$SVC_TOKEN" != null ] || fail "POST /api/v1/tokens gave no secret"
export SVC_TOKEN
api() { curl -fsS -H "Authorization: Bearer $SVC_TOKEN" "$@"; }

say "checking the Raft cluster on every server ($(elapsed))"
leaders=()
for a in "${apis[@]}"; do
	st=""
	for _ in $(seq 1 30); do
		st=$(api "$a/api/v1/operator/raft" 2>/dev/null || true)
		[ -n "$st" ] && [ "$(jq -r '.leader_id' <<<"$st")" != "" ] &&
			[ "$(jq '[.servers[] | select(.suffrage=="Voter")] | length' <<<"$st")" = 3 ] && break
		sleep 2
	done
	echo "$a: $(jq -c '{node_id, state, leader_id, servers: [.servers[] | "\(.id)=\(.addr) \(.suffrage)"]}' <<<"$st")" >&2
	[ "$(jq '[.servers[] | select(.suffrage=="Voter")] | length' <<<"$st")" = 3 ] ||
		fail "$a: GET /api/v1/operator/raft does not list three voters"
	leaders+=("$(jq -r .leader_id <<<"$st")")
done
[ "${leaders[0]}" != "" ] && [ "${leaders[0]}" = "${leaders[1]}" ] && [ "${leaders[1]}" = "${leaders[2]}" ] ||
	fail "the servers do not agree on one leader: ${leaders[*]}"

say "checking the adapters the config file declares ($(elapsed))"
for a in "${apis[@]}"; do
	list=$(api "$a/api/v1/adapters?limit=100")
	for id in adp_tf_vault adp_tf_nomad adp_tf_routes; do
		v=$(jq -c --arg id "$id" '.items[] | select(.adapter_id==$id) | {adapter_id, kind, origin, loaded, error}' <<<"$list")
		[ -n "$v" ] || fail "$a: GET /api/v1/adapters has no $id"
		jq -e '.origin=="config_file" and .loaded==true and .error==null' <<<"$v" >/dev/null ||
			fail "$a: $id is not loaded from the config file: $v"
	done
	echo "$a: $(jq -c '[.items[] | select(.origin=="config_file") | "\(.adapter_id) \(.kind) \(.origin)"]' <<<"$list")" >&2
done

# The tokens the servers' templates rendered from Vault, per allocation.
rendered() { # VAR: its value in every server's secrets/cluster.env, one per line
	for f in "$work"/allocs/*/svc/secrets/cluster.env; do
		sed -n "s/^$1=\"\(.*\)\"$/\1/p" "$f"
	done
}
if [ "${ACL:-}" = 1 ]; then
	say "checking svc's Nomad token ($(elapsed))"
	acc=$(ncurl "$NOMAD_ADDR/v1/acl/tokens" | jq -r '[.[] | select(.Name=="svc")] | if length==1 then .[0].AccessorID else empty end')
	[ -n "$acc" ] || fail "Nomad has not exactly one ACL token named svc"
	tok=$(ncurl "$NOMAD_ADDR/v1/acl/token/$acc")
	jq -e '.Type=="client" and .Policies==["svc"]' <<<"$tok" >/dev/null ||
		fail "svc's Nomad token is not a client token with the policy svc alone: $(jq -c '{Type, Policies}' <<<"$tok")"
	svc_nomad=$(jq -r .SecretID <<<"$tok")
	[ "$(rendered SVCADP_NOMAD_TOKEN | wc -l)" -ge 3 ] && [ "$(rendered SVCADP_NOMAD_TOKEN | sort -u)" = "$svc_nomad" ] ||
		fail "the three servers were not given svc's Nomad token through their templates"
	# What a member who can deploy reaches through svc's token: its apps'
	# namespace, and not svc's own job.
	code() { curl -sS -o /dev/null -w '%{http_code}' "$@"; }
	c=$(code -H "X-Nomad-Token: $svc_nomad" "$NOMAD_ADDR/v1/jobs?namespace=$apps_ns")
	[ "$c" = 200 ] || fail "svc's Nomad token may not list the jobs of namespace $apps_ns: HTTP $c"
	c=$(code -H "X-Nomad-Token: $svc_nomad" "$NOMAD_ADDR/v1/job/svc?namespace=default")
	[ "$c" = 403 ] || fail "svc's Nomad token reads the servers' own job: HTTP $c, want 403"
	c=$(code -X DELETE -H "X-Nomad-Token: $svc_nomad" "$NOMAD_ADDR/v1/job/svc?namespace=default")
	[ "$c" = 403 ] || fail "svc's Nomad token may stop the servers' own job: HTTP $c, want 403"
	c=$(code -H "X-Nomad-Token: $svc_nomad" "$NOMAD_ADDR/v1/acl/tokens")
	[ "$c" = 403 ] || fail "svc's Nomad token may list ACL tokens: HTTP $c, want 403"
	echo "nomad: svc's token $acc (client, policy svc): jobs of $apps_ns 200, the servers' job and the ACL tokens 403" >&2
fi
if [ -n "$CONSUL" ]; then
	say "checking the routes adapter's Consul token ($(elapsed))"
	acc=$(ccurl "http://$CONSUL_HTTP_ADDR/v1/acl/tokens" | jq -r '[.[] | select(.Description=="svc'"'"'s consul routes adapter")] | if length==1 then .[0].AccessorID else empty end')
	[ -n "$acc" ] || fail "Consul has not exactly one token for svc's routes adapter"
	tok=$(ccurl "http://$CONSUL_HTTP_ADDR/v1/acl/token/$acc")
	jq -e '[.Policies[].Name]==["svc-routes"]' <<<"$tok" >/dev/null ||
		fail "the routes adapter's Consul token has other policies than svc-routes: $(jq -c '.Policies' <<<"$tok")"
	routes_tok=$(jq -r .SecretID <<<"$tok")
	[ "$(rendered SVCADP_CONSUL_TOKEN | wc -l)" -ge 3 ] && [ "$(rendered SVCADP_CONSUL_TOKEN | sort -u)" = "$routes_tok" ] ||
		fail "the three servers were not given the routes adapter's Consul token through their templates"
	c=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT -H "X-Consul-Token: $routes_tok" \
		-d '{"Name":"svc-forged","Port":1}' "http://$CONSUL_HTTP_ADDR/v1/agent/service/register")
	[ "$c" = 403 ] || fail "the routes adapter's Consul token may register a service: HTTP $c, want 403"
	echo "consul: the routes token $acc (policy svc-routes) reads, and may not register a service (403)" >&2
fi

# --- A sample app through the nomad runtime ------------------------------------

sample="${SAMPLE:-static-hello}"
say "svc launch samples/$sample on the nomad runtime ($(elapsed))"
if ! SVC_ADDR="${apis[0]}" "$svc" launch "samples/$sample" >"$work/launch.log" 2>&1; then
	tail -n 40 "$work/launch.log" >&2
	fail "svc launch samples/$sample (the log's end is above; $work/launch.log)"
fi
app=$(SVC_ADDR="${apis[0]}" "$svc" apps get "$sample" -o json)
app_id=$(jq -r .app.id <<<"$app")
state=$(jq -r .app.state <<<"$app")
[ "$state" = running ] || fail "$sample is $state after svc launch, not running"
# The app's jobs: every job but the servers' own (the example's apps run in
# namespace default, or svc-apps with ACL=1).
app_jobs() { ncurl "$NOMAD_ADDR/v1/jobs?namespace=*" | jq -r "[.[] | select(.ID != \"svc\") $1] | $2"; }
jobs=$(app_jobs '| select(.Type=="service" and .Status=="running")' 'map("\(.Namespace)/\(.ID) \(.Status)") | join(", ")')
echo "nomad: the app's service job: ${jobs:-none}" >&2
[ -n "$jobs" ] || fail "$sample runs, says svc, but Nomad runs no service job for it"
if [ -n "$CONSUL" ]; then
	# The app's primary service, registered by Nomad with its workload
	# identity, passing in Consul.
	svc_name=$(ccurl "http://$CONSUL_HTTP_ADDR/v1/catalog/services" |
		jq -r --arg t "svc-app=$app_id" 'to_entries[] | select(.value | index($t)) | .key' | head -n1)
	[ -n "$svc_name" ] || fail "Consul has no service tagged svc-app=$app_id"
	passing=""
	for _ in $(seq 1 60); do
		passing=$(ccurl "http://$CONSUL_HTTP_ADDR/v1/health/service/$svc_name?passing=true" | jq length)
		[ "${passing:-0}" -ge 1 ] && break
		sleep 2
	done
	[ "${passing:-0}" -ge 1 ] || fail "Consul's service $svc_name has no passing instance in 2 minutes"
	# Nomad registered it with a token its workload identity got from the
	# hashistack module's auth method, not with the agent's own.
	ccurl "http://$CONSUL_HTTP_ADDR/v1/acl/tokens" |
		jq -e --arg s "$svc_name" 'any(.[]; .AuthMethod=="nomad-workloads" and any(.ServiceIdentities[]?; .ServiceName==$s))' >/dev/null ||
		fail "no Consul token from the auth method nomad-workloads holds the service identity $svc_name"
	echo "consul: $svc_name has $passing passing instance(s), registered with a nomad-workloads login" >&2
fi
# The app answers through svc's edge at its URL: the routes adapter found
# its instance. (The three servers share this machine, so the app's edge
# port is the one server's that bound it first.)
url=$(jq -r '.app.url // empty' <<<"$app")
[ -n "$url" ] || fail "$sample has no url"
# A static sample's page title tells the app's answer from svc's own.
marker=$(grep -o -m1 '<title>[^<]*' "samples/$sample/index.html" 2>/dev/null || true)
st=""
for _ in $(seq 1 60); do
	st=$(curl -sS -o "$work/edge.body" -w '%{http_code}' -H "Authorization: Bearer $SVC_TOKEN" "$url" || true)
	[ "$st" = 200 ] && grep -qF "$marker" "$work/edge.body" && break
	sleep 1
done
[ "$st" = 200 ] && grep -qF "$marker" "$work/edge.body" ||
	fail "$url through the edge: HTTP $st within a minute, want 200${marker:+ and the page with $marker} ($(head -c 200 "$work/edge.body"))"
echo "edge: $url answers 200${marker:+ with $marker}" >&2
say "deleting $sample ($app_id) ($(elapsed))"
api -X DELETE "${apis[0]}/api/v1/apps/$app_id?force=true" >/dev/null || fail "DELETE /api/v1/apps/$app_id"
for _ in $(seq 1 60); do
	left=$(app_jobs '| select(.Status!="dead")' 'length')
	[ "$left" = 0 ] && break
	sleep 2
done
[ "$left" = 0 ] || fail "the app's Nomad jobs are still there 2 minutes after it was deleted"
# Purge what is left (dead jobs: builds, the app's), so that a namespace
# the module made can go.
for j in $(app_jobs '' 'map("\(.ID)?namespace=\(.Namespace)") | .[]'); do
	ncurl -X DELETE "$NOMAD_ADDR/v1/job/$j&purge=true" >/dev/null
done

# --- tofu destroy, and nothing left ----------------------------------------------

tofu destroy -auto-approve -no-color
left=()
ncurl "$NOMAD_ADDR/v1/job/svc" >/dev/null 2>&1 && left+=("Nomad job svc")
ns=$(ncurl "$NOMAD_ADDR/v1/namespaces" | jq -r '[.[].Name | select(. != "default")] | join(" ")')
[ -z "$ns" ] || left+=("Nomad namespaces $ns")
pol=$(curl -fsS -H "X-Vault-Token: $VAULT_TOKEN" "$VAULT_ADDR/v1/sys/policies/acl?list=true" | jq -r '.data.keys[]')
for p in svc svc-apps svc-server; do grep -qx "$p" <<<"$pol" && left+=("Vault policy $p"); done
auth=$(curl -fsS -H "X-Vault-Token: $VAULT_TOKEN" "$VAULT_ADDR/v1/sys/auth" | jq -r '.data | keys[]')
for m in jwt-nomad/ approle/; do grep -qx "$m" <<<"$auth" && left+=("Vault auth mount $m"); done
if [ "${ACL:-}" = 1 ]; then
	ncurl "$NOMAD_ADDR/v1/acl/policies" | jq -e 'any(.[]; .Name=="svc")' >/dev/null && left+=("Nomad ACL policy svc")
	ncurl "$NOMAD_ADDR/v1/acl/tokens" | jq -e 'any(.[]; .Name=="svc")' >/dev/null && left+=("Nomad ACL token svc")
fi
if [ -n "$CONSUL" ]; then
	ccurl "http://$CONSUL_HTTP_ADDR/v1/acl/policies" | jq -e 'any(.[]; .Name=="svc-routes")' >/dev/null && left+=("Consul policy svc-routes")
	ccurl "http://$CONSUL_HTTP_ADDR/v1/acl/auth-methods" | jq -e 'any(.[]; .Name=="nomad-workloads")' >/dev/null && left+=("Consul auth method nomad-workloads")
	ccurl "http://$CONSUL_HTTP_ADDR/v1/acl/binding-rules" | jq -e 'length > 0' >/dev/null && left+=("Consul binding rules")
fi
[ ${#left[@]} -eq 0 ] || fail "left after tofu destroy: ${left[*]}"
(cd "$ex" && "$TOFU" state list 2>/dev/null | grep . >&2) && fail "tofu state is not empty after destroy"

say "PASSED in $(elapsed) (ACLs: ${ACL:-0}, Consul: $([ -n "$CONSUL" ] && echo yes || echo no), driver: ${DRIVER:-raw_exec}): apply, 3-node Raft cluster, config-file adapters, $sample deployed on Nomad and answering through the edge, destroy left nothing"
