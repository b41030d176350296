package nomad

import (
	"fmt"
	"slices"
	"strings"
)

// namespaceCapabilities are what the nomad runtime adapter's token needs
// in its namespace, each for the calls that use it: list-jobs to find
// svc's jobs by their meta (after a restart, and to cancel a dead
// server's builds); submit-job to register, plan, revert, promote, tag and
// stop them; read-job for jobs, allocations, evaluations, deployments,
// checks, stats and Nomad's service registrations (the nomad routes
// adapter); read-logs for logs; alloc-exec for `svc exec`;
// alloc-lifecycle to restart allocations; host-volume-create and
// host-volume-read for volumes. Beside them it needs node:read (capacity,
// volume placement), write on the host volumes named svc-* (its jobs
// mount them), and, when its apps run with raw_exec, alloc-node-exec
// (Nomad asks it of an exec into a task without filesystem isolation);
// nothing else: no other namespace, no agent, operator or ACL rights.
// The hashistack Terraform module's policy is this one
// (terraform/terraform_test.go checks it), and TestContractRealAgentACL
// runs the contract suite with exactly it.
var namespaceCapabilities = []string{
	"list-jobs", "submit-job", "read-job", "read-logs", "alloc-exec", "alloc-lifecycle",
	"host-volume-create", "host-volume-read",
}

// rawExecCapability is the capability an exec into a raw_exec task needs.
const rawExecCapability = "alloc-node-exec"

// ACLPolicy is the Nomad ACL policy (HCL) of the adapter's token for
// namespace ns; rawExec when its apps run with the raw_exec driver.
func ACLPolicy(ns string, rawExec bool) string {
	if ns == "" {
		ns = "default"
	}
	caps := namespaceCapabilities
	if rawExec {
		caps = append(slices.Clone(caps), rawExecCapability)
	}
	return fmt.Sprintf("namespace %q {\n  capabilities = [%s]\n}\nhost_volume \"svc-*\" {\n  policy = \"write\"\n}\nnode {\n  policy = \"read\"\n}\n",
		ns, quoteList(caps))
}

// capabilitiesText is what the token needs, for a sentence.
func capabilitiesText() string {
	c := namespaceCapabilities
	return strings.Join(c[:len(c)-1], ", ") + " and " + c[len(c)-1] + " (and " + rawExecCapability +
		" for raw_exec apps) in the namespace, write on host volumes svc-*, and node:read"
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
