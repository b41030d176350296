package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// hostVolume is an app's volume as a Nomad host volume.
type hostVolume struct {
	Name     string // Nomad's volume name
	HostPath string // its directory on the node that holds it
	NodeID   string // the node that holds it (the first that declares a static one)
}

// volumeName is the Nomad name of an app's volume (jobtemplates'
// VolumeSource): the same for every job of the app.
func volumeName(appID, volume string) string { return jobtemplates.VolumeSource(appID, volume) }

// ensureVolumes makes sure every volume the job's workloads mount is a
// Nomad host volume of its name (volumeName), so that the job's volume
// request places the workload on the node that holds it, and returns them
// by volume name. For each, in order:
//
//  1. a dynamic host volume of that name (the oldest; not unavailable),
//     which an earlier job of the app created;
//  2. a static host volume of that name declared in the client
//     configuration of a node of the pool (client { host_volume "<name>"
//     { path = "..." } }): an operator's choice, or a cluster without
//     dynamic host volumes. It comes before creating one because a
//     dynamic volume of the same name would take its place on that node;
//  3. a new dynamic host volume from Nomad's built-in plugin "mkdir"
//     (Nomad 1.10 and later: a directory under the client's
//     host_volumes_dir). It outlives the app's jobs, so a later job of
//     the app finds it in 1.
//
// A dynamic volume is created pending and becomes ready only when its
// node's fingerprint reports it (nomad/state, upsertHostVolumeForNode);
// Nomad's scheduler places a job only on a ready one
// (scheduler/feasible, HostVolumeChecker), so a pending volume is waited
// for with blocking queries, within the start timeout. When no volume can be
// had the error says what to configure.
//
// Two controllers creating the same volume at once could create two (on
// two nodes: Nomad refuses a second of the same name on one node); only
// the leader runs deploys, which keeps that from happening.
func (r *Runtime) ensureVolumes(ctx context.Context, job scheduler.Job) (map[string]hostVolume, error) {
	want := map[string]scheduler.Mount{}
	for _, t := range job.Workloads {
		for _, m := range t.Mounts {
			if _, ok := want[m.Volume]; !ok || m.SizeBytes > want[m.Volume].SizeBytes {
				want[m.Volume] = m
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	if job.AppID == "" {
		return nil, errcode.Invalid("app_id", "job %s mounts volumes but names no app: volumes are an app's", job.ID)
	}
	stubs, _, err := r.client.HostVolumes().List(&api.HostVolumeListRequest{NodePool: r.cfg.NodePool}, r.query(ctx))
	if err != nil {
		return nil, r.volumeError(err, "list host volumes", "")
	}
	vols := make([]string, 0, len(want))
	for vol := range want {
		vols = append(vols, vol)
	}
	sort.Strings(vols)
	out := map[string]hostVolume{}
	for _, vol := range vols {
		name := volumeName(job.AppID, vol)
		hv, ok, err := r.existingVolume(ctx, stubs, name)
		if err != nil {
			return nil, err
		}
		if ok {
			out[vol] = hv
			continue
		}
		v, err := r.createVolume(ctx, name, want[vol].SizeBytes)
		if err != nil {
			return nil, err
		}
		out[vol] = hostVolume{Name: name, HostPath: v.HostPath, NodeID: v.NodeID}
	}
	return out, nil
}

// existingVolume finds the host volume name as ensureVolumes does,
// without creating one: the oldest dynamic one among stubs that is not
// unavailable (waited for until ready), else a static one a node
// declares.
func (r *Runtime) existingVolume(ctx context.Context, stubs []*api.HostVolumeStub, name string) (hostVolume, bool, error) {
	var found *api.HostVolumeStub
	for _, s := range stubs {
		if s.Name == name && s.State != api.HostVolumeStateUnavailable && (found == nil || s.CreateIndex < found.CreateIndex) {
			found = s
		}
	}
	if found != nil {
		v, err := r.awaitVolume(ctx, found.ID, name, 0)
		if err != nil {
			return hostVolume{}, false, err
		}
		return hostVolume{Name: name, HostPath: v.HostPath, NodeID: v.NodeID}, true, nil
	}
	path, node, err := r.staticVolume(ctx, name)
	if err != nil || path == "" {
		return hostVolume{}, false, err
	}
	return hostVolume{Name: name, HostPath: path, NodeID: node}, true, nil
}

// locateVolume finds an app's existing host volume (a copy of its data
// never creates one): NOT_FOUND when no deploy made it yet.
func (r *Runtime) locateVolume(ctx context.Context, appID, volume string) (hostVolume, error) {
	if appID == "" || !scheduler.PlainName(volume) {
		return hostVolume{}, errcode.Invalid("volume", "a volume copy names an app and a plain volume name")
	}
	stubs, _, err := r.client.HostVolumes().List(&api.HostVolumeListRequest{NodePool: r.cfg.NodePool}, r.query(ctx))
	if err != nil {
		return hostVolume{}, r.volumeError(err, "list host volumes", "")
	}
	name := volumeName(appID, volume)
	hv, ok, err := r.existingVolume(ctx, stubs, name)
	if err != nil {
		return hostVolume{}, err
	}
	if !ok {
		return hostVolume{}, errcode.New(errcode.NotFound, "app %s has no Nomad host volume %s yet", appID, name).
			WithDetail("volume", volume).WithRemedy("a volume is made when a deploy first mounts it")
	}
	return hv, nil
}

// createVolume creates a dynamic host volume with the "mkdir" plugin and
// waits until it is ready. Nomad requires capacity_max to be at least
// capacity_min, so a size sets both (mkdir volumes have no size limit).
func (r *Runtime) createVolume(ctx context.Context, name string, size int64) (*api.HostVolume, error) {
	req := &api.HostVolumeCreateRequest{Volume: &api.HostVolume{
		Name: name, Namespace: r.cfg.Namespace, PluginID: "mkdir", NodePool: r.cfg.NodePool,
		RequestedCapacityMinBytes: size, RequestedCapacityMaxBytes: size,
		RequestedCapabilities: []*api.HostVolumeCapability{{
			AttachmentMode: api.HostVolumeAttachmentModeFilesystem, AccessMode: api.HostVolumeAccessModeSingleNodeWriter,
		}},
	}}
	resp, meta, err := r.client.HostVolumes().Create(req, r.write(ctx))
	if err != nil {
		return nil, r.volumeError(err, "create host volume "+name, name)
	}
	if resp == nil || resp.Volume == nil || resp.Volume.ID == "" {
		return nil, errcode.New(errcode.AdapterFailed, "nomad created host volume %s but did not describe it", name)
	}
	if resp.Volume.State == api.HostVolumeStateReady {
		return resp.Volume, nil
	}
	return r.awaitVolume(ctx, resp.Volume.ID, name, meta.LastIndex)
}

// awaitVolume reads a dynamic host volume, waiting with blocking queries
// (from index) until it is ready, within the start timeout
// (startTimeout).
func (r *Runtime) awaitVolume(ctx context.Context, id, name string, index uint64) (*api.HostVolume, error) {
	timeout := r.startTimeout(ctx)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	state := api.HostVolumeStatePending
	for {
		v, meta, err := r.client.HostVolumes().Get(id, (&api.QueryOptions{WaitIndex: index, WaitTime: blockWait}).WithContext(wctx))
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("host volume %s: %w", name, ctx.Err())
		case err != nil && errors.Is(wctx.Err(), context.DeadlineExceeded):
			return nil, errcode.New(errcode.AdapterFailed, "nomad's host volume %s is still %s after %s", name, state, timeout).
				WithDetail("volume_id", id).
				WithRemedy("check the Nomad client that holds it (nomad volume status -type host %s): a volume becomes ready when its node reports it", id)
		case err != nil:
			return nil, r.volumeError(err, "read host volume "+name, name)
		}
		switch state = v.State; state {
		case api.HostVolumeStateReady:
			return v, nil
		case api.HostVolumeStateUnavailable:
			return nil, errcode.New(errcode.AdapterFailed, "nomad's host volume %s is unavailable: its node no longer reports it", name).
				WithDetail("volume_id", id).WithDetail("node_id", v.NodeID).
				WithRemedy("bring node %s back, or delete the volume (nomad volume delete -type host %s) to let the next deploy create it afresh, without its data", v.NodeID, id)
		}
		index = max(index, meta.LastIndex, 1)
	}
}

// staticVolume returns the path of the static host volume name declared
// on the ready nodes of the pool (a node's host volume without an ID) and
// the first node that declares it; "" when none does. A raw_exec workload
// is given the path, so every node that declares it must declare the same
// path.
func (r *Runtime) staticVolume(ctx context.Context, name string) (string, string, error) {
	stubs, _, err := r.client.Nodes().List(r.query(ctx))
	if err != nil {
		return "", "", r.translate(err, "list nodes", "the nodes")
	}
	var path, pathNode string
	for _, s := range stubs {
		if s.Status != api.NodeStatusReady || (r.cfg.NodePool != "" && s.NodePool != r.cfg.NodePool) {
			continue
		}
		n, _, err := r.client.Nodes().Info(s.ID, r.query(ctx))
		if statusOf(err) == http.StatusNotFound {
			continue // gone since the list
		}
		if err != nil {
			return "", "", r.translate(err, "read node "+s.ID, "node "+s.ID)
		}
		hv := n.HostVolumes[name]
		if hv == nil || hv.ID != "" {
			continue
		}
		switch {
		case path == "":
			path, pathNode = hv.Path, n.ID
		case hv.Path != path && r.cfg.Driver == DriverRawExec:
			return "", "", errcode.New(errcode.AdapterFailed, "the static host volume %s is at %s on node %s but at %s on node %s", name, path, pathNode, hv.Path, n.ID).
				WithRemedy("declare host volume %q at the same path on every Nomad client: a raw_exec workload is told its path (%s)", name, volumeEnvPrefix)
		}
	}
	return path, pathNode, nil
}

// volumeError translates a failure of the host volumes API. Nomad
// answers a cluster that cannot make dynamic host volumes (servers before
// 1.10, no node of the pool with the plugin, a token without the
// capability) with a status and its own text, which is kept for the
// operator; the remedy says what to configure either way.
func (r *Runtime) volumeError(err error, op, name string) error {
	code := statusOf(err)
	if code == 0 {
		return r.translate(err, op, "host volume "+name)
	}
	pool := r.cfg.NodePool
	if pool == "" {
		pool = "any"
	}
	static := fmt.Sprintf(`client { host_volume %q { path = "/srv/svc/%s" } }`, name, name)
	if name == "" {
		static = `client { host_volume "svc-<app ID>-<volume>" { path = "..." } }`
	}
	e := errcode.Wrap(err, errcode.AdapterFailed, "nomad refused to %s: %s", op, nomadText(err)).WithDetail("status", code)
	if code == http.StatusForbidden {
		return e.WithRemedy("give the nomad adapter's token the host-volume-create and host-volume-read capabilities in namespace %s, or declare the volume as a static host volume in a client's configuration (%s)", r.namespace(), static)
	}
	return e.WithRemedy("declare the volume as a static host volume in the client configuration of a node of pool %s (%s) and restart that client, "+
		"or let svc create it: Nomad 1.10 or later on servers and clients (the built-in mkdir plugin makes a directory under the client's host_volumes_dir)", pool, static)
}

// nomadText is the text Nomad answered with, or the error's.
func nomadText(err error) string {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) && ue.HasBody() {
		return strings.TrimSpace(ue.Body())
	}
	var pue *api.UnexpectedResponseError
	if errors.As(err, &pue) && pue != nil && pue.HasBody() {
		return strings.TrimSpace(pue.Body())
	}
	return err.Error()
}

// volumeEnvPrefix begins the variable that tells a raw_exec workload
// where a volume is.
const volumeEnvPrefix = "SVC_VOLUME_<NAME>"

// volumeEnv is SVC_VOLUME_<NAME>: a volume's variable name.
func volumeEnv(volume string) string {
	return "SVC_VOLUME_" + strings.ToUpper(strings.ReplaceAll(volume, "-", "_"))
}
